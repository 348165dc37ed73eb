"""zync's Dagster definitions inside a host project's: they merge, and impose nothing.

A host has its own executor, its own `spark` resource and assets of its own downstream of
zync's; `Definitions.merge` must take both, zync's sensors must start only zync's assets,
and zync's sensor runs stay in-process whatever the host's executor.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dagster import (
    AssetKey,
    Definitions,
    ResourceDefinition,
    asset,
    in_process_executor,
    multiprocess_executor,
    validate_run_config,
)

from zync_assets.core.errors import ZyncError
from zync_assets.orchestration.definitions import AUTOMATION_SENSOR, build_zync_definitions
from zync_assets.orchestration.naming import ZyncAsset, ZyncTranslator
from zync_assets.orchestration.raw import ingest_run_config
from zync_assets.specs.model import load_spec, load_specs

SPEC = """
inputs:
  - {topic: orders, pool: OrdersRaw}
outputs:
  - {topic: orders_out, pool: OrdersStaging}
transforms:
  - {type: stateless, in: orders, out: orders_out, sql: "%s"}
tables:
  - {name: orders_current, source: orders, keys: [id]}
"""


def zync_defs(tmp_path: Path, sql: str = "in.key AS key, in.after AS value") -> Definitions:
    spec = tmp_path / "orders.yaml"
    spec.write_text(SPEC % sql)
    return build_zync_definitions([load_spec(spec)])


@asset(deps=[AssetKey(["kafka", "orders_out"])], required_resource_keys={"spark"})
def revenue_report() -> None:
    """A host's own asset, fed by zync's output topic."""


def host_defs() -> Definitions:
    return Definitions(
        assets=[revenue_report],
        resources={"spark": ResourceDefinition.hardcoded_resource("the host's own")},
        executor=multiprocess_executor,
    )


def test_zyncs_definitions_merge_with_a_host_that_has_its_own_executor_and_spark(
    tmp_path: Path,
) -> None:
    merged = Definitions.merge(host_defs(), zync_defs(tmp_path))
    Definitions.validate_loadable(merged)
    graph = merged.resolve_asset_graph()
    report = graph.get(AssetKey("revenue_report"))
    assert report.parent_keys == {AssetKey(["kafka", "orders_out"])}  # one lineage graph
    assert set(merged.resources or {}) == {
        "spark", "zync_lake", "zync_spark", "zync_kafka", "zync_schema_registry"
    }  # fmt: skip
    # zync's automation evaluates zync's assets, never the host's.
    automation = merged.resolve_sensor_def(AUTOMATION_SENSOR).asset_selection
    assert automation is not None
    selected = {k.to_user_string() for k in automation.resolve(graph)}
    assert "revenue_report" not in selected
    assert {"raw/OrdersRaw", "staging/OrdersStaging", "table/orders_current"} <= selected
    # The sensor's runs carry a change through every stage in one process, although the
    # host's executor is the multiprocess one.
    sensor = merged.resolve_sensor_def("raw_OrdersRaw_kafka_sensor")
    assert sensor.job_name is not None, "the sensor targets no job"
    carrier = merged.resolve_job_def(sensor.job_name)
    assert carrier.executor_def.name == in_process_executor.name
    assert merged.resolve_implicit_global_asset_job_def().executor_def.name == "multiprocess"


def test_an_executor_given_to_zync_is_zyncs_own_code_location_and_clashes_with_a_hosts(
    tmp_path: Path,
) -> None:
    """Why the default is none: two executors cannot merge (what build_definitions did)."""
    spec = tmp_path / "orders.yaml"
    spec.write_text(SPEC % "in.key AS key")
    own = build_zync_definitions([load_spec(spec)], executor=in_process_executor)
    assert own.resolve_implicit_global_asset_job_def().executor_def.name == "in_process"
    try:
        Definitions.merge(host_defs(), own)
    except Exception as exc:  # Dagster's DagsterInvariantViolationError
        assert "executor" in str(exc)
    else:
        raise AssertionError("two executors merged")


def test_a_changed_rule_marks_only_the_assets_it_writes_as_changed(tmp_path: Path) -> None:
    before = zync_defs(tmp_path).resolve_asset_graph()
    after = zync_defs(tmp_path, "in.key AS key, in.before AS value").resolve_asset_graph()

    def version(graph, key: str) -> str | None:
        return graph.get(AssetKey(key.split("/"))).code_version

    for changed in ("staging/OrdersStaging", "done/OrdersStaging"):
        assert version(before, changed) != version(after, changed), changed
    for same in ("raw/OrdersRaw", "table/orders_current", "kafka/orders_out"):
        assert version(before, same) == version(after, same) is not None, same
    kinds = {key: before.get(AssetKey(key.split("/"))).kinds
             for key in ("raw/OrdersRaw", "kafka/orders", "kafka/orders_out")}  # fmt: skip
    assert kinds == {"raw/OrdersRaw": {"spark", "delta"}, "kafka/orders": {"kafka"},
                     "kafka/orders_out": {"kafka"}}  # fmt: skip


def test_importing_the_builder_reads_no_spec_folder(tmp_path: Path) -> None:
    """A host imports the builder; only zync's own code location reads ZYNC_SPECS."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "broken.yaml").write_text("inputs: [")
    checkout = Path(__file__).resolve().parent.parent  # the code under test, wherever it is
    env = {**os.environ, "ZYNC_SPECS": str(specs), "PYTHONPATH": str(checkout)}

    def imports(module: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", f"import {module}"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip

    assert imports("zync_assets.orchestration.definitions").returncode == 0
    location = imports("zync_assets.definitions")  # the fault lands where it should
    assert location.returncode != 0 and "broken.yaml" in location.stderr


def test_a_defs_yaml_naming_a_folder_of_specs_is_all_a_dg_project_needs() -> None:
    from dagster.components.testing import create_defs_folder_sandbox

    from zync_assets.orchestration.component import ZyncComponent

    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "zync"
        (folder / "specs").mkdir(parents=True)
        (folder / "specs" / "orders.yaml").write_text(SPEC % "in.key AS key")
        (folder / "defs.yaml").write_text(
            "type: zync_assets.ZyncComponent\n"  # the package's short name, as the README gives it
            "attributes:\n  specs: specs\n  sensor_interval_s: 5\n  key_prefix: shop\n"
            "  lake: /srv/shop-lake\n  kafka_bootstrap_servers: broker.shop:9092\n"
        )
        with sandbox.load_component_and_build_defs(defs_path=folder) as (component, defs):
            assert isinstance(component, ZyncComponent)
            keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
            assert {"shop/kafka/orders", "shop/raw/OrdersRaw", "shop/staging/OrdersStaging",
                    "shop/kafka/orders_out", "shop/table/orders_current"} <= keys  # fmt: skip
            sensor = defs.resolve_sensor_def("shop_raw_OrdersRaw_kafka_sensor")
            assert sensor.minimum_interval_seconds == 5
            resources = defs.resources or {}
            assert resources["shop_zync_lake"].location == "/srv/shop-lake"
            assert resources["shop_zync_kafka"].bootstrap_servers == "broker.shop:9092"


def test_a_defs_yaml_whose_specs_folder_is_missing_says_which_and_what_to_give() -> None:
    from dagster.components.testing import create_defs_folder_sandbox

    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "zync"
        folder.mkdir()
        (folder / "defs.yaml").write_text(
            "type: zync_assets.orchestration.component.ZyncComponent\n"
            "attributes:\n  specs: nowhere\n"
        )
        try:
            with sandbox.load_component_and_build_defs(defs_path=folder):
                pass
        except Exception as exc:  # Dagster wraps the component's error in its own
            chain: list[BaseException] = [exc]
            while chain[-1].__cause__ is not None:
                chain.append(chain[-1].__cause__)
            assert isinstance(chain[-1], ZyncError), chain
            assert "specs folder" in str(chain[-1]) and "nowhere" in str(chain[-1])
        else:
            raise AssertionError("a missing specs folder loaded")


class TeamNames(ZyncTranslator):
    """A host's own names: its topics under cdc/topics, one group, an owner and a tag."""

    def asset_key(self, asset: ZyncAsset) -> AssetKey:
        if asset.kind == "topic":
            return AssetKey(["cdc", "topics", asset.name])
        return super().asset_key(asset)

    def group_name(self, asset: ZyncAsset) -> str:
        return "cdc"

    def owners(self, asset: ZyncAsset) -> list[str]:
        return ["team:data-platform"]

    def tags(self, asset: ZyncAsset) -> dict[str, str]:
        return {"domain": "shop"}


def test_a_translator_and_a_key_prefix_name_every_asset_sensor_and_job(tmp_path: Path) -> None:
    spec = tmp_path / "orders.yaml"
    spec.write_text(SPEC % "in.key AS key, in.after AS value")
    zync = build_zync_definitions([load_spec(spec)], key_prefix="shop", translator=TeamNames())

    @asset(deps=[AssetKey(["shop", "cdc", "topics", "orders_out"])])
    def revenue() -> None: ...

    merged = Definitions.merge(zync, Definitions(assets=[revenue]))
    Definitions.validate_loadable(merged)
    graph = merged.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {
        "shop/cdc/topics/orders", "shop/raw/OrdersRaw", "shop/staging/OrdersStaging",
        "shop/done/OrdersStaging", "shop/cdc/topics/orders_out", "shop/table/orders_current",
        "revenue",
    }  # fmt: skip
    raw = graph.get(AssetKey(["shop", "raw", "OrdersRaw"]))
    assert raw.parent_keys == {AssetKey(["shop", "cdc", "topics", "orders"])}
    assert raw.group_name == "cdc" and raw.owners == ["team:data-platform"]
    assert raw.tags["domain"] == "shop" and raw.tags["zync/stage"] == "raw"
    assert graph.get(AssetKey("revenue")).parent_keys == {
        AssetKey(["shop", "cdc", "topics", "orders_out"])
    }
    # Sensors and jobs are named under the prefix, carry the renamed assets, and the run
    # config a sensor asks for fits its job's renamed op.
    sensor = merged.resolve_sensor_def("shop_raw_OrdersRaw_kafka_sensor")
    assert sensor.job_name is not None, "the sensor targets no job"
    job = merged.resolve_job_def(sensor.job_name)
    assert sensor.job_name == "shop_raw_OrdersRaw_run"
    assert {k.to_user_string() for k in job.asset_layer.selected_asset_keys} == {
        "shop/raw/OrdersRaw", "shop/staging/OrdersStaging", "shop/done/OrdersStaging",
        "shop/cdc/topics/orders_out", "shop/table/orders_current",
    }  # fmt: skip
    validate_run_config(job, ingest_run_config(AssetKey(["shop", "raw", "OrdersRaw"]), ""))
    automation = merged.resolve_sensor_def("shop_" + AUTOMATION_SENSOR).asset_selection
    assert automation is not None and AssetKey("revenue") not in automation.resolve(graph)


def test_a_specs_freshness_is_dagsters_policy_on_its_assets(tmp_path: Path) -> None:
    """Each spec's assets get its time window; a raw pool two specs read, the shorter one."""
    (tmp_path / "orders.yaml").write_text(
        SPEC % "in.key AS key" + "freshness: {fail: 1h, warn: 30m}\n"
    )
    (tmp_path / "audit.yaml").write_text(
        "inputs:\n  - {topic: orders, pool: OrdersRaw}\n"
        "tables:\n  - {name: orders_audit, source: orders, keys: [id], stored-as: scd2}\n"
        "freshness: 10m\n"
    )
    (tmp_path / "other.yaml").write_text("inputs:\n  - {topic: others, pool: OtherRaw}\n")
    graph = build_zync_definitions(load_specs(tmp_path)).resolve_asset_graph()

    def window(key: str) -> tuple[float, float | None] | None:
        # A time-window policy (Dagster exports only its base class, which has no windows).
        policy: Any = graph.get(AssetKey(key.split("/"))).freshness_policy
        if policy is None:
            return None
        warn = policy.warn_window.to_timedelta().total_seconds() if policy.warn_window else None
        return policy.fail_window.to_timedelta().total_seconds(), warn

    for key in ("staging/OrdersStaging", "done/OrdersStaging", "kafka/orders_out",
                "table/orders_current"):  # fmt: skip
        assert window(key) == (3600, 1800), key
    assert window("table/orders_audit") == (600, None)
    assert window("raw/OrdersRaw") == (600, None)  # the stricter spec that reads it
    assert window("raw/OtherRaw") is None  # no spec sets one
