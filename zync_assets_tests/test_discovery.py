"""A raw pool fed by a topic pattern reads every topic the pattern takes — those that
appear while it runs from their first offset, once — and reports a topic that goes away.
Real Kafka, registry, Spark and Delta; the pipeline and Dagster's sensor alike."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, build_sensor_context, materialize

from zync_assets.core.config import ZyncConfig, in_force
from zync_assets.ingest.discovery import Changes
from zync_assets.kafka.clients import delete_topics
from zync_assets.kafka.registry import Registry
from zync_assets.orchestration.definitions import build_zync_definitions
from zync_assets.pipeline.run import Pipeline
from zync_assets.specs.model import load_spec
from zync_assets_tests.conftest import Stack, produce_json

pytestmark = pytest.mark.integration


class Heard:
    """A PipelineReporter that keeps what discovery told it."""

    def __init__(self) -> None:
        self.changes: list[Changes] = []

    def discovered(self, changes: Changes) -> None:
        self.changes.append(changes)

    def __getattr__(self, name: str):  # the other stages' reports: not this test's
        return lambda *args: None


def rows(n: int) -> list[tuple[dict, dict]]:
    return [({"id": i}, {"op": "c", "after": {"id": i}}) for i in range(n)]


def spec_of(tmp_path: Path, prefix: str) -> Path:
    path = tmp_path / "mirror.yaml"
    path.write_text(
        "inputs:\n"
        f"  - {{topics: '{prefix}\\.public\\..*', exclude: ['{prefix}\\.public\\.skip_.*'], "
        "pool: Mirror}\n"
    )
    return path


def per_topic(spark, lake: Path) -> Counter:
    pool = spark.read.format("delta").load(str(lake / "Mirror"))
    return Counter(
        (r.topic, r.offset) for r in pool.selectExpr("kafka.topic", "kafka.offset").collect()
    )


def test_a_running_pipeline_takes_new_topics_from_their_first_offset_once(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    a, b, c = (f"{prefix}.public.{t}" for t in ("a", "b", "c"))
    produce_json(stack, a, rows(3))
    produce_json(stack, b, rows(2))
    produce_json(stack, f"{prefix}.public.skip_me", rows(1))  # excluded
    produce_json(stack, f"{prefix}.other", rows(1))  # not matched
    config = dataclasses.replace(ZyncConfig.from_env(), discovery_interval_s=1)
    heard = Heard()
    with in_force(config):
        pipe = Pipeline(spark, [load_spec(spec_of(tmp_path, prefix))], stack.kafka,
                        Registry(stack.registry_settings), stages=("ingest",))  # fmt: skip
        pipe.pass_once(heard)
        assert per_topic(spark, lake) == Counter(
            {(a, 0): 1, (a, 1): 1, (a, 2): 1, (b, 0): 1, (b, 1): 1}
        )
        produce_json(stack, c, rows(2))  # a table Debezium starts to capture
        produce_json(stack, a, rows(1))
        time.sleep(1.2)  # one discovery interval
        pipe.pass_once(heard)
        delete_topics(stack.kafka, [b])  # a table dropped
        time.sleep(1.2)
        pipe.pass_once(heard)  # no error: reported
        pipe.pass_once(heard)  # nothing new: nothing written, nothing twice
    counted = per_topic(spark, lake)
    assert set(counted.values()) == {1}  # every offset once
    assert sorted(counted) == sorted(
        [(a, 0), (a, 1), (a, 2), (a, 3), (b, 0), (b, 1), (c, 0), (c, 1)]
    )
    assert [ch for ch in heard.changes if ch.appeared] == [Changes(appeared={"Mirror": [c]})]
    assert [ch.gone for ch in heard.changes if ch.gone] == [{"Mirror": [b]}]


def test_a_pipeline_says_once_which_topics_its_pattern_leaves_to_another_spec(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    """A topic feeds one pool: the pattern's pool reads every table but the one a second
    spec names for a pool of its own, and the first pass says so, the passes after not."""
    prefix = f"pao{uuid.uuid4().hex[:6]}"
    a, b = f"{prefix}.public.a", f"{prefix}.public.b"
    produce_json(stack, a, rows(2))
    produce_json(stack, b, rows(1))
    other = tmp_path / "other.yaml"
    other.write_text(f"inputs:\n  - {{topic: {b}, pool: Other, format: json}}\n")
    specs = [load_spec(spec_of(tmp_path, prefix)), load_spec(other)]
    heard = Heard()
    pipe = Pipeline(spark, specs, stack.kafka, Registry(stack.registry_settings),
                    stages=("ingest",))  # fmt: skip
    pipe.pass_once(heard)
    pipe.pass_once(heard)
    said = [line for changes in heard.changes for line in changes.lines()]
    assert said == [
        f"pool Mirror: mirror.yaml's pattern '{prefix}\\.public\\..*' leaves {b} to pool "
        "Other, where other.yaml names them (a topic feeds one pool): mirror.yaml's rules and "
        "lake tables skip them; name them for pool Mirror in other.yaml to have both"
    ]
    assert per_topic(spark, lake) == Counter({(a, 0): 1, (a, 1): 1})  # b went to Other


def test_dagsters_sensor_takes_a_new_topic_and_shows_it_under_its_pattern(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    prefix = f"pad{uuid.uuid4().hex[:6]}"
    a, c = f"{prefix}.public.a", f"{prefix}.public.c"
    produce_json(stack, a, rows(2))
    defs = build_zync_definitions([load_spec(spec_of(tmp_path, prefix))])
    pattern_key = AssetKey(["kafka", "Mirror_topics"])
    raw = defs.get_assets_def(AssetKey(["raw", "Mirror"]))
    assert pattern_key in raw.dependency_keys  # the lineage: pattern → raw pool
    assert prefix in (defs.resolve_asset_graph().get(pattern_key).description or "")
    instance = DagsterInstance.ephemeral()

    def tick():
        context = build_sensor_context(
            instance=instance, resources=defs.resources, definitions=defs
        )
        return defs.get_sensor_def("raw_Mirror_kafka_sensor").evaluate_tick(context)

    def run(request) -> None:
        done = materialize([raw], instance=instance, resources=defs.resources,
                           run_config=request.run_config)  # fmt: skip
        assert done.success

    (first,) = tick().run_requests
    run(first)
    assert not tick().run_requests  # caught up
    produce_json(stack, c, rows(3))  # a new table's topic
    later = tick()
    (second,) = later.run_requests
    (observed,) = later.asset_events
    assert observed.asset_key == pattern_key
    assert observed.metadata["high_water_marks"].value == {a: {"0": 2}, c: {"0": 3}}
    run(second)
    assert sorted(per_topic(spark, lake)) == [(a, 0), (a, 1), (c, 0), (c, 1), (c, 2)]
