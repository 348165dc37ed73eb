"""The raw-pool Kafka sensor and asset, evaluated by real Dagster against the real stack."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetKey, DagsterInstance, build_sensor_context, materialize

from zync_assets.orchestration.definitions import build_zync_definitions
from zync_assets.orchestration.raw import PROGRESS_KEY, raw_key, watch_for_new_data
from zync_assets.specs.model import load_spec
from zync_assets_tests.conftest import Stack, produce_json, read_topic, stateless_spec
from zync_assets_tests.support.kafka_log import assert_sent_together

pytestmark = pytest.mark.integration


def spec_for(tmp_path: Path, topic: str, pool: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"inputs:\n  - {{topic: {topic}, pool: {pool}}}\n")
    return path


def carried(defs, pool: str) -> set[str]:
    """What the runs raw pool `pool`'s sensor starts materialize: its job's assets."""
    sensor = defs.resolve_sensor_def(f"raw_{pool}_kafka_sensor")
    job = defs.resolve_job_def(sensor.job_name)
    return {k.to_user_string() for k in job.asset_layer.selected_asset_keys}


def evaluate(defs, instance: DagsterInstance, name: str):
    sensor = defs.get_sensor_def(name)
    context = build_sensor_context(instance=instance, resources=defs.resources, definitions=defs)
    return sensor.evaluate_tick(context)


def test_sensor_requests_a_run_only_when_kafka_has_something_new(
    spark, stack: Stack, topic: str, tmp_path: Path, lake: Path
) -> None:
    defs = build_zync_definitions([load_spec(spec_for(tmp_path, topic, "SensorPool"))])
    instance = DagsterInstance.ephemeral()
    name = "raw_SensorPool_kafka_sensor"
    produce_json(stack, topic, [(None, {"n": 1}), (None, {"n": 2})])

    first = evaluate(defs, instance, name)
    assert len(first.run_requests) == 1
    request = first.run_requests[0]
    config = request.run_config["ops"]["raw__SensorPool"]["config"]
    assert json.loads(config["end_offsets"]) == {topic: {"0": 2}}
    # What it saw is the input topic's observation: its high-water marks, its data version.
    (observed,) = first.asset_events
    assert observed.asset_key == AssetKey(["kafka", topic])
    assert observed.metadata["high_water_marks"].value == {"0": 2}
    assert observed.tags["dagster/data_version"] == "0:2"

    produce_json(stack, topic, [(None, {"n": 3})])  # arrives after the observation
    result = materialize(
        [defs.get_assets_def(raw_key("SensorPool"))],
        instance=instance,
        resources=defs.resources,
        run_config=request.run_config,
    )
    assert result.success
    metadata = result.asset_materializations_for_node("raw__SensorPool")[0].metadata
    assert metadata[PROGRESS_KEY].value == {topic: {"0": 2}}  # exactly what was seen
    assert metadata["rows_written"].value == 2

    second = evaluate(defs, instance, name)
    assert len(second.run_requests) == 1  # offset 2 is beyond the cursor
    materialize(
        [defs.get_assets_def(raw_key("SensorPool"))], instance=instance,
        resources=defs.resources, run_config=second.run_requests[0].run_config,
    )  # fmt: skip
    quiet = evaluate(defs, instance, name)
    assert quiet.run_requests == [] and "nothing beyond the cursors" in quiet.skip_message
    assert quiet.asset_events == []  # nothing new, nothing observed


def test_a_sensor_evaluation_notices_a_change_that_arrives_while_it_watches(
    stack: Stack, topic: str
) -> None:
    """Dagster starts a sensor's evaluation at most every 5 s: one that looked once would
    see this change only at its next evaluation."""
    produce_json(stack, topic, [(None, {"n": 0})])
    seen = {topic: {0: 1}}
    late = threading.Timer(1.5, lambda: produce_json(stack, topic, [(None, {"n": 1})]))
    late.start()
    try:
        end = watch_for_new_data(stack.kafka, [topic], seen)
    finally:
        late.join()
    assert end == {topic: {0: 2}}
    assert watch_for_new_data(stack.kafka, [topic], {topic: {0: 2}}, watch_s=1.0) is None


def test_assets_and_lineage_come_from_the_spec_files(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("inputs:\n  - {topic: A, pool: P}\n  - {topic: B, pool: P}\n")
    defs = build_zync_definitions([load_spec(spec)])
    raw = defs.get_assets_def(raw_key("P"))
    assert {k.to_user_string() for k in raw.dependency_keys} == {"kafka/A", "kafka/B"}


def test_a_raw_pools_sensor_runs_carry_its_data_through_every_stage_below_it(
    tmp_path: Path,
) -> None:
    """One run per change, not one per stage: each run start and sensor tick saved is
    seconds of freshness. A raw pool no transform reads carries nothing further."""
    spec = stateless_spec(tmp_path / "a.yaml", "A", "PA", "SA", 'sql: "in.key AS key"')
    lone = tmp_path / "b.yaml"
    lone.write_text("inputs:\n  - {topic: B, pool: PB}\n")
    defs = build_zync_definitions([load_spec(spec), load_spec(lone)])
    assert carried(defs, "PA") == {"raw/PA", "staging/SA", "done/SA", "kafka/A_out"}
    assert carried(defs, "PB") == {"raw/PB"}


def test_raw_then_staging_and_done_materialize_with_passing_checks(
    spark, stack: Stack, topic: str, tmp_path: Path, lake: Path
) -> None:
    spec = stateless_spec(
        tmp_path / "flow.yaml", topic, "FlowRaw", "FlowStaging",
        "where: \"op = 'c'\", sql: \"in.key AS key, in.after AS value\"",
    )  # fmt: skip
    with spec.open("a") as tables:  # a lake table of each kind of source: raw and staging
        tables.write(f"tables:\n  - {{name: flow_current, source: {topic}_out, keys: [id]}}\n"
                     f"  - {{name: flow_history, source: {topic}, keys: [id], stored-as: scd2}}\n")  # fmt: skip
    defs = build_zync_definitions([load_spec(spec)])
    produce_json(stack, topic, [({"id": i}, {"op": "c", "after": {"id": i}}) for i in range(3)])
    instance = DagsterInstance.ephemeral()
    graph = defs.resolve_asset_graph()
    keys = [k for k in graph.get_all_asset_keys() if graph.get(k).is_materializable]
    assert {k.to_user_string() for k in keys} == {
        "raw/FlowRaw", "staging/FlowStaging", "done/FlowStaging", f"kafka/{topic}_out",
        "table/flow_current", "table/flow_history",
    }  # fmt: skip
    assert {
        k.to_user_string() for k in graph.get(AssetKey(["table", "flow_current"])).parent_keys
    } == {"staging/FlowStaging"}
    result = materialize(
        [defs.get_assets_def(k) for k in keys], instance=instance, resources=defs.resources
    )
    assert result.success
    staging = [
        m
        for m in result.get_asset_materialization_events()
        if m.materialization.asset_key.path == ["staging", "FlowStaging"]
    ]
    metadata = staging[0].materialization.metadata
    assert metadata["outputs"].value == 3 and metadata["pending"].value == 0
    assert metadata["lag"].value == 0 and metadata["pending_oldest_age_s"].value == 0
    assert metadata["cursors"].value == {topic: {"0": 3}}
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "dense_output_offsets": True,
        "cursors_never_move_back": True,
        "no_duplicate_done_records": True,
        "no_dead_letters": True,
        "no_expired_events": True,
        "applies": True,  # each lake table's pass applied (it fails while a pass fails)
    }
    order = [
        m.materialization.asset_key.to_user_string()
        for m in result.get_asset_materialization_events()
    ]
    tables_at = min(order.index("table/flow_current"), order.index("table/flow_history"))
    assert order.index(f"kafka/{topic}_out") < tables_at, order  # the warehouse path first
    (sent,) = [
        m.materialization.metadata
        for m in result.get_asset_materialization_events()
        if m.materialization.asset_key.path == ["kafka", f"{topic}_out"]
    ]
    assert sent["records_sent"].value == 3 and sent["staging_offsets"].value == "0..2"
    assert sent["high_water_mark_before"].value == {"0": 0}
    after: Any = sent["high_water_mark_after"].value
    assert after["0"] >= 3  # + a transaction marker
    assert [r.value for r in read_topic(stack, f"{topic}_out")] == [{"id": i} for i in range(3)]
    by_table = {
        m.materialization.asset_key.path[1]: m.materialization.metadata
        for m in result.get_asset_materialization_events()
        if m.materialization.asset_key.path[0] == "table"
    }
    assert {name: meta["upserts"].value for name, meta in by_table.items()} == {
        "flow_current": 3, "flow_history": 3,
    }  # fmt: skip
    assert by_table["flow_history"]["cursors"].value == {topic: {"0": 3}}


def test_a_failed_blocking_check_stops_the_sync_to_kafka_until_a_pass_checks_out(
    spark, stack: Stack, topic: str, tmp_path: Path, lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staging pass whose outputs are not dense must not reach the warehouse: not in the
    run that made it, not through the automation after it."""
    from dagster import evaluate_automation_conditions

    from zync_assets.etl.checks import Check
    from zync_assets.kafka.clients import cluster_metadata
    from zync_assets.orchestration import staging
    from zync_assets.orchestration.staging import staging_key

    spec = stateless_spec(tmp_path / "gap.yaml", topic, "GapRaw", "GapStaging",
                          'sql: "in.key AS key, in.value AS value"')  # fmt: skip
    defs = build_zync_definitions([load_spec(spec)])
    out = AssetKey(["kafka", f"{topic}_out"])
    everything = [
        defs.get_assets_def(k) for k in (raw_key("GapRaw"), staging_key("GapStaging"), out)
    ]
    instance = DagsterInstance.ephemeral()
    produce_json(stack, topic, [(None, {"n": i}) for i in range(3)])
    checked = staging.run_checks

    def with_a_gap(session, result):  # the fault: this pass's output offsets have a hole
        return [Check(c.name, False, "injected: offset 1 missing")
                if c.name == "dense_output_offsets" else c for c in checked(session, result)]  # fmt: skip

    monkeypatch.setattr(staging, "run_checks", with_a_gap)
    failed = materialize(everything, instance=instance, resources=defs.resources,
                         raise_on_error=False)  # fmt: skip
    checks = {e.check_name: e.passed for e in failed.get_asset_check_evaluations()}
    assert checks["dense_output_offsets"] is False  # the fault landed
    assert not failed.success
    assert out not in {m.asset_key for m in failed.get_asset_materialization_events()}
    assert f"{topic}_out" not in cluster_metadata(stack.kafka).topics  # nothing was sent

    # A later pass fails its check too, in a run without the topic: the automation, which
    # would send what staging gained, must not.
    before = evaluate_automation_conditions(defs=defs, instance=instance)
    produce_json(stack, topic, [(None, {"n": 3})])
    again = materialize(everything[:2], instance=instance, resources=defs.resources,
                        raise_on_error=False)  # fmt: skip
    assert not again.success
    later = evaluate_automation_conditions(defs=defs, instance=instance, cursor=before.cursor)
    assert later.get_num_requested(out) == 0

    monkeypatch.setattr(staging, "run_checks", checked)
    mended = materialize(everything[1:], instance=instance, resources=defs.resources)
    assert mended.success
    assert [r.value for r in read_topic(stack, f"{topic}_out")] == [{"n": i} for i in range(4)]


def test_dagster_cli_materializes_a_raw_pool(
    stack: Stack, topic: str, tmp_path: Path, lake: Path
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    spec_for(specs, topic, "CliPool")
    produce_json(stack, topic, [(None, {"n": 1})])
    dagster = str(Path(sys.executable).parent / "dagster")
    env = stack.env(ZYNC_SPECS=str(specs), ZYNC_LAKE=str(lake), DAGSTER_HOME=str(tmp_path))
    done = subprocess.run(
        [dagster, "asset", "materialize", "-m", "zync_assets.definitions", "--select", "raw/CliPool"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RUN_SUCCESS" in done.stderr + done.stdout
    assert (lake / "CliPool" / "_delta_log").is_dir()


def test_staging_follows_new_raw_data_and_only_then(
    spark, stack: Stack, topic: str, tmp_path: Path, lake: Path
) -> None:
    from dagster import evaluate_automation_conditions

    from zync_assets.orchestration.staging import staging_key

    spec = stateless_spec(
        tmp_path / "eager.yaml", topic, "EagerRaw", "EagerStaging",
        'sql: "in.key AS key, in.value AS value"',
    )  # fmt: skip
    defs = build_zync_definitions([load_spec(spec)])
    instance = DagsterInstance.ephemeral()
    raw = defs.get_assets_def(raw_key("EagerRaw"))
    etl = defs.get_assets_def(staging_key("EagerStaging"))
    out = AssetKey(["kafka", f"{topic}_out"])
    produce_json(stack, topic, [(None, {"n": 1})])
    everything = [raw, etl, defs.get_assets_def(out)]
    assert materialize(everything, instance=instance, resources=defs.resources).success

    quiet = evaluate_automation_conditions(defs=defs, instance=instance)
    assert quiet.get_num_requested(staging_key("EagerStaging")) == 0  # nothing new upstream
    assert quiet.get_num_requested(out) == 0

    produce_json(stack, topic, [(None, {"n": 2})])
    assert materialize([raw], instance=instance, resources=defs.resources).success
    after_raw = evaluate_automation_conditions(defs=defs, instance=instance, cursor=quiet.cursor)
    assert after_raw.get_num_requested(staging_key("EagerStaging")) == 1
    # to-kafka is requested with staging, in the same run, after it
    assert after_raw.get_num_requested(out) == 1

    # A run with nothing new to do says so: no "None" in its log lines or its metadata.
    assert materialize(everything, instance=instance, resources=defs.resources).success
    idle = materialize(everything, instance=instance, resources=defs.resources)
    lines = [e.user_message for e in instance.all_logs(idle.run_id)]
    ours = [
        m
        for m in lines
        if m.startswith(("pool EagerRaw", "eager → EagerStaging", "EagerStaging →"))
    ]
    assert len(ours) == 3 and not [m for m in ours if "None" in m], ours
    for materialization in idle.get_asset_materialization_events():
        values = materialization.materialization.metadata.values()
        assert not [v for v in values if v.value is None or str(v.value) == "None"]


def test_dead_letters_show_in_metadata_and_warn_through_an_asset_check(
    spark, stack: Stack, topic: str, tmp_path: Path, lake: Path
) -> None:
    from dagster import AssetCheckSeverity

    from zync_assets_tests.conftest import produce_bytes

    defs = build_zync_definitions([load_spec(spec_for(tmp_path, topic, "DeadPool"))])
    produce_json(stack, topic, [(None, {"n": 1})])
    produce_bytes(stack, topic, [(None, b"not avro")])
    result = materialize(
        [defs.get_assets_def(raw_key("DeadPool"))],
        instance=DagsterInstance.ephemeral(),
        resources=defs.resources,
    )
    assert result.success  # dead letters are kept, not a failure
    metadata = result.asset_materializations_for_node("raw__DeadPool")[0].metadata
    assert metadata["rows_written"].value == 1 and metadata["dead_letters"].value == 1
    assert metadata["dead_letters_total"].value == 1
    (check,) = result.get_asset_check_evaluations()
    assert (check.check_name, check.passed, check.severity) == (
        "no_dead_letters", False, AssetCheckSeverity.WARN,
    )  # fmt: skip
    assert check.metadata["inspect"].value == 'zync query "SELECT * FROM DeadPool_dlq"'


def test_an_old_open_group_shows_in_metadata_and_warns_through_an_asset_check(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    import datetime as dt
    import uuid

    from confluent_kafka import Producer
    from dagster import AssetCheckSeverity

    from zync_assets.kafka.clients import ensure_topic
    from zync_assets.orchestration.staging import staging_key

    p = f"grp{uuid.uuid4().hex[:6]}"
    ensure_topic(stack.kafka, f"{p}.order", 1)
    spec = tmp_path / "groups.yaml"
    spec.write_text(
        f"inputs:\n  - {{topic: {p}.order, pool: {p}Raw, format: json}}\n"
        f"outputs:\n  - {{topic: {p}_out, pool: {p}Staging, format: json}}\n"
        f"transforms:\n  - {{type: txn, inputs: [{p}.order], group-by: 'value:txn::bigint', "
        f"complete-when: 'bool_or(value:done::boolean)', out: {p}_out, "
        'sql: \'SELECT txn, NULL AS key, named_struct("n", count(*)) AS value FROM events '
        "GROUP BY txn'}\n"
    )
    # A group opened 20 minutes ago whose completing record never came, and one complete.
    producer = Producer(stack.kafka.client_config())
    old = int((dt.datetime.now(dt.UTC) - dt.timedelta(minutes=20)).timestamp() * 1000)
    for n, value in enumerate([{"txn": 1, "done": False}, {"txn": 2, "done": True}]):
        producer.produce(f"{p}.order", json.dumps(value).encode(), timestamp=old + n)
    assert producer.flush(30) == 0
    defs = build_zync_definitions([load_spec(spec)])
    result = materialize(
        [defs.get_assets_def(raw_key(f"{p}Raw")), defs.get_assets_def(staging_key(f"{p}Staging"))],
        instance=DagsterInstance.ephemeral(),
        resources=defs.resources,
    )
    assert result.success
    [staging] = [
        m.materialization.metadata
        for m in result.get_asset_materialization_events()
        if m.asset_key == staging_key(f"{p}Staging")
    ]
    assert staging["outputs"].value == 1 and staging["open_transactions"].value == 1
    age: Any = staging["oldest_open_transaction_age_s"].value
    assert age >= 20 * 60
    [check] = [
        c for c in result.get_asset_check_evaluations() if c.check_name == "no_stale_transactions"
    ]
    assert (check.passed, check.severity) == (False, AssetCheckSeverity.WARN)
    assert check.metadata["inspect"].value == f"zync etl {spec} --pending"


def test_a_pools_topics_sent_together_are_one_multi_asset(
    spark, stack: Stack, tmp_path: Path, lake: Path
) -> None:
    """A `txn` rule with two outs: its pool's topics are one multi-asset, and materializing
    it sends both, each group's rows in one Kafka transaction."""
    import uuid

    from confluent_kafka import Producer

    from zync_assets.kafka.clients import ensure_topic
    from zync_assets.orchestration.raw import topic_key
    from zync_assets.orchestration.staging import staging_key

    p = f"two{uuid.uuid4().hex[:6]}"
    ensure_topic(stack.kafka, f"{p}.order", 1)
    spec = tmp_path / "two.yaml"
    spec.write_text(
        f"inputs:\n  - {{topic: {p}.order, pool: {p}Raw, format: json}}\n"
        f"outputs:\n  - {{topic: {p}_a, pool: {p}Staging, format: json}}\n"
        f"  - {{topic: {p}_b, pool: {p}Staging, format: json}}\n"
        f"transforms:\n  - {{type: txn, inputs: [{p}.order], group-by: 'value:txn::bigint', "
        f"complete-when: 'bool_or(value:done::boolean)', out: [{p}_a, {p}_b], "
        'sql: \'SELECT txn, topic, NULL AS key, named_struct("txn", txn) AS value FROM events '
        f'CROSS JOIN (SELECT explode(array("{p}_a", "{p}_b")) AS topic) GROUP BY txn, topic\'}}\n'
    )
    producer = Producer(stack.kafka.client_config())
    for value in ({"txn": 1, "done": False}, {"txn": 1, "done": True}, {"txn": 2, "done": True}):
        producer.produce(f"{p}.order", json.dumps(value).encode())
    assert producer.flush(30) == 0
    defs = build_zync_definitions([load_spec(spec)])
    a, b = defs.get_assets_def(topic_key(f"{p}_a")), defs.get_assets_def(topic_key(f"{p}_b"))
    assert a is b and a.node_def.name == f"to_kafka_{p}Staging"
    everything = [
        defs.get_assets_def(key)
        for key in (raw_key(f"{p}Raw"), staging_key(f"{p}Staging"), topic_key(f"{p}_a"))
    ]
    result = materialize(everything, instance=DagsterInstance.ephemeral(), resources=defs.resources)
    assert result.success
    sent = {
        m.asset_key: m.materialization.metadata["records_sent"].value
        for m in result.get_asset_materialization_events()
        if m.asset_key in (topic_key(f"{p}_a"), topic_key(f"{p}_b"))
    }
    assert sent == {topic_key(f"{p}_a"): 2, topic_key(f"{p}_b"): 2}
    for topic in (f"{p}_a", f"{p}_b"):
        records = read_topic(stack, topic, decode=False)
        assert sorted(json.loads(r.value)["payload"]["txn"] for r in records) == [1, 2]
    assert_sent_together(stack, [f"{p}_a", f"{p}_b"])


def test_a_views_lineage_runs_from_its_inputs_raw_pool_to_its_topic(tmp_path: Path) -> None:
    spec = tmp_path / "v.yaml"
    spec.write_text(
        "inputs:\n  - {topic: acc, pool: VR}\n  - {topic: cus, pool: VR}\n"
        "outputs:\n  - {topic: view_out, pool: VS}\n"
        "transforms:\n  - type: view\n    inputs: {a: acc, c: cus}\n    key: id\n"
        "    out: view_out\n    sql: SELECT a.after:id::bigint AS id FROM a\n"
    )
    defs = build_zync_definitions([load_spec(spec)])
    assert carried(defs, "VR") == {"raw/VR", "staging/VS", "done/VS", "kafka/view_out"}
    staging = defs.get_assets_def(AssetKey(["staging", "VS"]))
    assert AssetKey(["raw", "VR"]) in staging.dependency_keys


def test_two_lakes_in_one_process_each_keep_their_pools_and_cursors(
    spark, stack: Stack, topic: str, tmp_path: Path, lake: Path
) -> None:
    """Two zync definitions, each with its own configuration (lakes east and west), merge
    into one project; a run of one writes only its lake, and each sensor reads its own."""
    from dagster import Definitions

    from zync_assets.core.config import ZyncConfig

    rule = 'sql: "in.key AS key, in.after AS value"'
    spec = load_spec(stateless_spec(tmp_path / "two.yaml", topic, "TwoRaw", "TwoStaging", rule))
    base = ZyncConfig(kafka=stack.kafka, registry=stack.registry_settings)
    lakes = {side: tmp_path / side for side in ("east", "west")}
    both = Definitions.merge(*(
        build_zync_definitions([spec], config=base.with_lake(str(lakes[side])), key_prefix=side)
        for side in lakes
    ))  # fmt: skip
    Definitions.validate_loadable(both)
    produce_json(stack, topic, [({"id": i}, {"op": "c", "after": {"id": i}}) for i in range(3)])
    instance = DagsterInstance.ephemeral()

    def rows(side: str, pool: str) -> int:
        return spark.read.format("delta").load(str(lakes[side] / pool)).count()

    def tick(side: str):
        context = build_sensor_context(
            instance=instance, resources=both.resources, definitions=both
        )
        return both.get_sensor_def(f"{side}_raw_TwoRaw_kafka_sensor").evaluate_tick(context)

    east = [both.get_assets_def(AssetKey(["east", kind, pool]))
            for kind, pool in (("raw", "TwoRaw"), ("staging", "TwoStaging"))]  # fmt: skip
    assert materialize(east, instance=instance, resources=both.resources).success
    assert rows("east", "TwoRaw") == 3
    assert rows("east", "TwoStaging") == 6  # 3 outputs and 3 done records
    assert not lakes["west"].exists() and not lake.exists()  # nor the environment's lake
    assert not tick("east").run_requests  # its cursors are at the end
    (request,) = tick("west").run_requests  # the west lake has nothing yet
    west = both.get_assets_def(AssetKey(["west", "raw", "TwoRaw"]))
    done = materialize([west], instance=instance, resources=both.resources,
                       run_config=request.run_config)  # fmt: skip
    assert done.success and rows("west", "TwoRaw") == 3 and rows("east", "TwoRaw") == 3
    assert not lake.exists()
