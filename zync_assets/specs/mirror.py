"""A mirror rule, expanded for the topics there are: each to an output topic of its own.

    transforms:
      - {type: mirror, topics: 'shop\\.public\\..*', out: 'warehouse.{table}', pool: Mirror}

A mirror rule names its topics by pattern and its outputs by a template, so a spec
does not list a database's tables. Before a stage runs it (the ETL, to-kafka, status,
Dagster's steps), the spec is expanded for the topics its raw pools have ingested: the
rule takes every one its pattern matches that no other rule of the spec reads (a join or
a view keeps its tables), and each gets an output route, `out` filled in from the topic
name (`{table}`, `{schema}`, `{prefix}`: its last, second-to-last and first dot-separated
parts; `{topic}`: all of it). The expansion is pure: a spec expanded again for more
topics grows, and for the same topics stays as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from zync_assets.core.errors import ZyncError
from zync_assets.specs.model import Route, Spec
from zync_assets.specs.patterns import is_plumbing
from zync_assets.specs.rules import MIRROR_SQL, Rule


def mirror_topic(template: str, topic: str) -> str:
    """The output topic of `topic` under the template `template`."""
    parts = topic.split(".")
    return template.format_map({
        "table": parts[-1], "schema": parts[-2] if len(parts) > 1 else "",
        "prefix": parts[0], "topic": topic,
    })  # fmt: skip


def mirror_sources(spec: Spec) -> dict[str, str]:
    """Each output topic of `spec`'s expanded mirror rules that forward row images as they
    are (the default sql, Avro in and out) → the input topic whose row schema its records
    follow, so to-kafka sends them in the source's column types (tokafka/declared.py)."""
    inputs = {route.topic: route.format.value for route in spec.inputs}
    return {
        out: topic
        for rule in spec.transforms
        if rule.type == "mirror" and rule.sql == MIRROR_SQL and rule.format is not None
        and rule.format.value == "avro"
        for topic, out in rule.mirrored
        if inputs.get(topic, "avro") == "avro"
    }  # fmt: skip


def has_mirrors(spec: Spec) -> bool:
    return any(rule.type == "mirror" for rule in spec.transforms)


def expand_mirrors(spec: Spec, ingested: Mapping[str, str]) -> Spec:
    """`spec` with each mirror rule taking the `ingested` topics it matches (topic → its
    raw pool), each with an input route and an output route; ZyncError when two topics
    would share an output topic, or one would write a topic another rule or input has."""
    if not has_mirrors(spec):
        return spec
    others = {t for r in spec.transforms if r.type != "mirror" for t in r.topics}
    written = {t for r in spec.transforms if r.type != "mirror" for t in r.output_topics}
    available = sorted(t for t in set(ingested) if t not in others and not is_plumbing(t))
    taken: set[str] = set()
    rules: list[Rule] = []
    routes = {route.topic: route for route in spec.outputs}
    # Each output topic's source: a mirror's earlier expansions, then this one.
    owner = {out: t for r in spec.transforms if r.type == "mirror" for t, out in r.mirrored}
    declared = {topic for topic in routes if topic not in owner} | written
    sources = {route.topic for route in spec.inputs} | set(available)
    for rule in spec.transforms:
        if rule.type != "mirror":
            rules.append(rule)
            continue
        assert rule.pattern is not None and rule.pool is not None and rule.format is not None
        mine = [t for t in available if t not in taken and rule.pattern.matches(t)]
        taken |= set(mine)
        pairs = tuple((topic, mirror_topic(rule.out, topic)) for topic in mine)
        for topic, out in pairs:
            if out in declared or out in sources or owner.setdefault(out, topic) != topic:
                raise ZyncError(
                    f"{spec.path}: transforms[{rule.number}] out: topic {topic} would be "
                    f"mirrored to {out}, which another topic, rule or input has: change the "
                    f"template {rule.out!r} (e.g. 'warehouse.{{schema}}_{{table}}')"
                )
            routes[out] = Route(out, rule.pool, rule.format)
        rules.append(replace(rule, inputs=tuple(mine), mirrored=pairs))
    named = {route.topic for route in spec.inputs}
    formats = spec.formats(taken)
    inputs = spec.inputs + [
        Route(topic, ingested[topic], formats[topic]) for topic in sorted(taken - named)
    ]
    return replace(spec, inputs=inputs, transforms=rules, outputs=list(routes.values()))
