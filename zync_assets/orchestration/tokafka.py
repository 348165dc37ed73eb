"""`kafka/<output topic>` per spec output: staging → Kafka, after staging gains records.

(No `from __future__ import annotations`: Dagster reads the asset functions' type hints.)
"""

import json
from typing import Any

from dagster import AssetExecutionContext, AutomationCondition, MaterializeResult, asset

from zync_assets.etl.state import read_state
from zync_assets.orchestration.raw import topic_key
from zync_assets.orchestration.resources import KafkaResource, SchemaRegistryResource, SparkResource
from zync_assets.orchestration.staging import done_key, staging_key
from zync_assets.pools import pool_path
from zync_assets.spec import Spec
from zync_assets.tokafka.sync import SyncResult, sync_topic


def sync_metadata(result: SyncResult) -> dict[str, Any]:
    return {
        "records_sent": result.sent,
        "staging_offsets": (
            f"{result.first_offset}..{result.next_offset - 1}" if result.sent else "none new"
        ),
        "next_staging_offset": result.next_offset,
        "high_water_mark_before": json.dumps(result.high_water_before),
        "high_water_mark_after": json.dumps(result.high_water_after),
        "schema_subjects": json.dumps(result.subjects),
    }


def output_topic_assets(spec: Spec) -> list:
    return [
        _topic_asset(spec, route.topic, route.pool, route.format.value) for route in spec.outputs
    ]


def _topic_asset(spec: Spec, topic: str, pool: str, wire_format: str):
    @asset(
        key=topic_key(topic),
        deps=[staging_key(pool), done_key(pool)],  # both live in the staging pool
        group_name="kafka_out",
        automation_condition=AutomationCondition.eager(),
        description=(
            f"Output topic {topic}: staging pool {pool}'s records, exactly once, "
            + ("Avro." if wire_format == "avro" else "Kafka Connect JSON.")
        ),
        tags={"zync/stage": "to-kafka"},
    )
    def output_topic(
        context: AssetExecutionContext,
        spark: SparkResource,
        kafka: KafkaResource,
        schema_registry: SchemaRegistryResource,
    ) -> MaterializeResult:
        result = sync_topic(
            spark.session(), pool, topic, kafka.settings(), schema_registry.registry(),
            wire_format=wire_format,
        )  # fmt: skip
        context.log.info(
            f"{pool} → {topic}: sent {result.sent} records from staging offset "
            f"{result.first_offset}; high-water marks {result.high_water_before} → "
            f"{result.high_water_after}"
        )
        return output_topic_materialization(spec, result)

    return output_topic


def output_topic_materialization(spec: Spec, result: SyncResult) -> MaterializeResult:
    """What a to-kafka sync records in Dagster, from a run or from `zync run`."""
    state = read_state(pool_path(result.pool), spec.name)
    staged = state.next_offsets.get(result.topic, 0)
    return MaterializeResult(
        asset_key=topic_key(result.topic),
        metadata={
            **sync_metadata(result),
            "staging_records": staged,
            "unsent": max(staged - result.next_offset, 0),
        },
    )
