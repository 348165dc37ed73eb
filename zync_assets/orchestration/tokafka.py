"""`kafka/<output topic>` per spec output: staging → Kafka, after staging gains records.

A staging pool that a gated or `txn` rule writes to sends its topics together, in Kafka
transactions that keep each source transaction whole across them (tokafka/together.py):
its topics are one multi-asset, materialized together. A mirror rule's topics, one per
source table, are one asset too, `kafka/<pool>_mirror`: a table that appears needs no
new definition.

(No `from __future__ import annotations`: Dagster reads the asset functions' type hints.)
"""

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    AssetSpec,
    MaterializeResult,
    MetadataValue,
    asset,
    multi_asset,
)

from zync_assets.etl.state import read_state
from zync_assets.lake.pools import pool_path
from zync_assets.orchestration.conditions import after_checked_upstream, freshness_policy
from zync_assets.orchestration.naming import DEFAULT_NAMING, Naming
from zync_assets.orchestration.resources import resource_keys, zync_step
from zync_assets.orchestration.versions import TOPIC_KINDS, code_version
from zync_assets.specs.ingested import mirrored
from zync_assets.specs.mirror import mirror_sources
from zync_assets.specs.model import Route, Spec
from zync_assets.specs.rules import Rule
from zync_assets.tokafka.sync import SyncResult, sync_pool


def _by_partition(marks: dict[int, int]) -> dict[str, int]:
    """JSON's keys are text: the partitions as Dagster stores them, whatever the store."""
    return {str(partition): mark for partition, mark in sorted(marks.items())}


def sync_metadata(result: SyncResult) -> dict[str, Any]:
    return {
        "records_sent": result.sent,
        "staging_offsets": (
            f"{result.first_offset}..{result.next_offset - 1}" if result.sent else "none new"
        ),
        "next_staging_offset": result.next_offset,
        "high_water_mark_before": MetadataValue.json(_by_partition(result.high_water_before)),
        "high_water_mark_after": MetadataValue.json(_by_partition(result.high_water_after)),
        "schema_subjects": MetadataValue.json(result.subjects),
    }


def output_topic_assets(spec: Spec, naming: Naming = DEFAULT_NAMING) -> list:
    together = pools_sent_together(spec)
    assets = [
        _topic_asset(spec, route, naming) for route in spec.outputs if route.pool not in together
    ]
    for pool in sorted(together):
        assets.append(_pool_topics_asset(spec, pool, naming))
    mirrors = [rule for rule in spec.transforms if rule.type == "mirror"]
    return assets + [_mirror_asset(spec, rule, naming) for rule in mirrors]


def mirror_asset_name(rule: Rule) -> str:
    return f"{rule.pool}_mirror" + ("" if rule.number == 1 else f"_{rule.number}")


def _mirror_asset(spec: Spec, rule: Rule, naming: Naming) -> AssetsDefinition:
    assert rule.pattern is not None and rule.pool is not None and rule.format is not None
    pool, pattern = rule.pool, rule.pattern
    wire = "Avro" if rule.format.value == "avro" else "Kafka Connect JSON"

    @asset(
        **naming.attributes("topic", mirror_asset_name(rule), output=True,
                            tags={"zync/stage": "to-kafka"}),
        deps=[naming.key("staging", pool), naming.key("done", pool)],
        kinds=TOPIC_KINDS,
        code_version=code_version(rule),
        automation_condition=after_checked_upstream(),
        freshness_policy=freshness_policy(spec.freshness),
        description=f"Output topics `{rule.out}`, one per topic matching `{pattern.pattern}`: "
        f"staging pool {pool}'s records, exactly once, {wire}.",
        required_resource_keys=resource_keys(naming),
    )  # fmt: skip
    def mirror_topics(context: AssetExecutionContext) -> MaterializeResult:
        now = mirrored(spec)
        (expanded,) = [r for r in now.transforms if r.number == rule.number]
        topics = list(expanded.output_topics)
        formats = {r.topic: r.format.value for r in now.outputs if r.pool == pool}
        with zync_step(context, naming) as step:
            results = sync_pool(
                step.session(), pool, step.config.kafka, step.registry(),
                topics=topics, formats=formats, sources=mirror_sources(now),
            ) if topics else []  # fmt: skip
        sent = {r.topic: r.sent for r in results if r.topic in topics}
        context.log.info(f"{pool} → {len(topics)} mirrored topics: sent {sum(sent.values())}")
        return MaterializeResult(metadata={
            "topics": len(topics), "sent": sum(sent.values()),
            "sent_by_topic": MetadataValue.json({t: n for t, n in sent.items() if n}),
        })  # fmt: skip

    return mirror_topics


def pools_sent_together(spec: Spec) -> set[str]:
    """Staging pools a gated or `txn` rule of `spec` writes to."""
    pool_of = {route.topic: route.pool for route in spec.outputs}
    return {
        pool_of[topic]
        for rule in spec.transforms
        if rule.transactional
        for topic in rule.output_topics
        if topic in pool_of
    }


def _topic_spec(
    spec: Spec, route: Route, naming: Naming, tags: dict[str, str] | None = None
) -> dict[str, Any]:
    wire = "Avro." if route.format.value == "avro" else "Kafka Connect JSON."
    named = naming.attributes("topic", route.topic, output=True, tags=tags)
    return {
        **named,
        # both in the staging pool
        "deps": [naming.key("staging", route.pool), naming.key("done", route.pool)],
        "kinds": TOPIC_KINDS,
        "code_version": code_version(route),
        "automation_condition": after_checked_upstream(),
        "freshness_policy": freshness_policy(spec.freshness),
        "description": f"Output topic {route.topic}: staging pool {route.pool}'s records, "
        f"exactly once, {wire}",
    }


def _topic_asset(spec: Spec, route: Route, naming: Naming) -> AssetsDefinition:
    @asset(
        **_topic_spec(spec, route, naming, tags={"zync/stage": "to-kafka"}),
        required_resource_keys=resource_keys(naming),
    )
    def output_topic(context: AssetExecutionContext) -> MaterializeResult:
        # Its topic alone; all the pool's if the pool's outputs turn out to carry source
        # transactions (a gated rule since taken out of the spec): sync_pool sends those
        # together.
        (sent,) = _sync(context, spec, route.pool, [route.topic], naming)
        return sent

    return output_topic


def _pool_topics_asset(spec: Spec, pool: str, naming: Naming) -> AssetsDefinition:
    routes = [route for route in spec.outputs if route.pool == pool]

    @multi_asset(
        name=naming.definition_name(f"to_kafka_{pool}"),
        specs=[AssetSpec(**_topic_spec(spec, route, naming)) for route in routes],
        op_tags={"zync/stage": "to-kafka"},
        description=f"Staging pool {pool}'s output topics, sent together: a source "
        "transaction's records are in one Kafka transaction across them.",
        can_subset=False,
        required_resource_keys=resource_keys(naming),
    )
    def pool_topics(context: AssetExecutionContext) -> Iterator[MaterializeResult]:
        yield from _sync(context, spec, pool, [route.topic for route in routes], naming)

    return pool_topics


def _sync(
    context: AssetExecutionContext, spec: Spec, pool: str, topics: list[str], naming: Naming
) -> list[MaterializeResult]:
    """Sync `topics` of `pool` (all the pool's, if it sends them together), each in the
    format its route in `spec` gives; the materializations of `topics`."""
    formats = {r.topic: r.format.value for r in spec.outputs if r.pool == pool}
    with zync_step(context, naming) as step:
        results = sync_pool(
            step.session(), pool, step.config.kafka, step.registry(),
            topics=topics, formats=formats, sources=mirror_sources(mirrored(spec)),
        )  # fmt: skip
        for result in results:
            context.log.info(
                f"{pool} → {result.topic}: sent {result.sent} records from staging offset "
                f"{result.first_offset}; high-water marks {result.high_water_before} → "
                f"{result.high_water_after}"
            )
        return [
            output_topic_materialization(spec, result, naming)
            for result in results
            if result.topic in topics
        ]


def output_topic_materialization(
    spec: Spec, result: SyncResult, naming: Naming = DEFAULT_NAMING
) -> MaterializeResult:
    """What a to-kafka sync records in Dagster, from a run or from `zync run`."""
    state = read_state(pool_path(result.pool), spec.name)
    staged = state.next_offsets.get(result.topic, 0)
    return MaterializeResult(
        asset_key=naming.key("topic", result.topic, output=True),
        metadata={
            **sync_metadata(result),
            "staging_records": staged,
            "unsent": max(staged - result.next_offset, 0),
        },
    )
