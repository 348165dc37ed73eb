"""A spec as the lake has it now: the input topics its raw pools have ingested, and its
mirror rules expanded for them.

Table patterns (tables/expand.py) and mirror rules (specs/mirror.py) make a table or an
output per topic; the topics are those the pools' progress lists, so finding them costs
no Spark job and no call to Kafka, and every stage and front end finds the same ones.
"""

from __future__ import annotations

from zync_assets.lake.pools import pool_exists, pool_path
from zync_assets.lake.progress import read_progress
from zync_assets.specs.mirror import expand_mirrors, has_mirrors
from zync_assets.specs.model import Spec
from zync_assets.specs.patterns import is_plumbing


def ingested_topics(spec: Spec) -> dict[str, str]:
    """Each input topic of the spec that its raw pool has ingested (sorted) → the pool:
    from the pools' progress, so no Spark job and no call to Kafka (table patterns and
    mirror rules expand for these)."""
    named = {route.topic for route in spec.inputs}
    found: dict[str, str] = {}
    for pool in spec.raw_pools():
        path = pool_path(pool)
        if not pool_exists(path):
            continue
        for topic in read_progress(path).offsets:
            ours = topic in named or any(p.matches(topic) for p in spec.patterns)
            if ours and not is_plumbing(topic):
                found.setdefault(topic, pool)
    return dict(sorted(found.items()))


def mirrored(spec: Spec) -> Spec:
    """`spec` with its mirror rules expanded for the topics its raw pools have ingested
    (specs/mirror.py); the spec itself when it has none."""
    return expand_mirrors(spec, ingested_topics(spec)) if has_mirrors(spec) else spec
