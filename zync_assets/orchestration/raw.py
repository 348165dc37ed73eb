"""`kafka/<topic>` external assets, `raw/<pool>` assets and the sensor that starts them.

(No `from __future__ import annotations` here: Dagster reads the asset functions' type
hints at definition time.)
"""

import json
import time
from collections.abc import Sequence
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    AssetSpec,
    Config,
    DagsterRunStatus,
    DefaultSensorStatus,
    MaterializeResult,
    MetadataValue,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    asset,
    define_asset_job,
    in_process_executor,
    sensor,
)
from pyspark.sql import SparkSession

from zync_assets.codec.formats import WireFormat
from zync_assets.core.offsets import (
    OffsetRange,
    Offsets,
    lag,
    offsets_from_json,
    offsets_from_metadata,
    offsets_to_json,
)
from zync_assets.core.settings import KafkaSettings
from zync_assets.ingest.discovery import PoolInputs
from zync_assets.ingest.ingest import IngestResult, ingest
from zync_assets.kafka.offsets import high_marks, watermarks
from zync_assets.lake.lease import pipeline_feeding
from zync_assets.orchestration.conditions import freshness_policy
from zync_assets.orchestration.naming import DEFAULT_NAMING, Naming
from zync_assets.orchestration.resources import resource_keys, zync_step
from zync_assets.orchestration.versions import POOL_KINDS, TOPIC_KINDS, code_version
from zync_assets.pipeline.status import raw_dead_letters
from zync_assets.specs.model import Freshness
from zync_assets.specs.patterns import TopicPattern

WATCH_S = 4.0  # how long a sensor evaluation watches for new offsets (of the daemon's 5 s)
POLL_S = 0.5  # how often it looks meanwhile
# An observation's data version (dagster's own tag name: observable source assets set it).
DATA_VERSION_TAG = "dagster/data_version"
PROGRESS_KEY = "progress"  # materialization metadata: per topic-partition end offsets (JSON)
POOL_TAG = "zync/pool"
ACTIVE_RUN_STATUSES = [  # a run in one of these may still write
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


def topic_key(topic: str) -> AssetKey:
    """A topic's key as zync's own code location names it (no translator, no prefix)."""
    return DEFAULT_NAMING.key("topic", topic)


def raw_key(pool: str) -> AssetKey:
    return DEFAULT_NAMING.key("raw", pool)


_FORMAT_NAMES = {"avro": "Avro", "json": "Kafka Connect JSON"}


def topic_assets(
    topics: list[str], formats: dict[str, WireFormat], naming: Naming = DEFAULT_NAMING
) -> list[AssetSpec]:
    def described(topic: str) -> str:
        wire = formats.get(topic, WireFormat())
        key = "" if wire.key == wire.value else f", keys as {wire.key}"
        return f"Kafka topic {topic} ({_FORMAT_NAMES[wire.value]}{key})."

    return [
        AssetSpec(**naming.attributes("topic", t), description=described(t), kinds=TOPIC_KINDS)
        for t in topics
    ]


def pattern_name(pattern: TopicPattern, patterns: Sequence[TopicPattern]) -> str:
    """A pattern's asset name, `<pool>_topics` (`<pool>_topics_2`, … for a pool's later
    patterns): a regular expression is no name Dagster takes for an asset its pool reads."""
    mine = [p for p in patterns if p.pool == pattern.pool]
    number = mine.index(pattern) + 1
    return f"{pattern.pool}_topics" + (f"_{number}" if number > 1 else "")


def pattern_assets(
    patterns: list[TopicPattern], naming: Naming = DEFAULT_NAMING
) -> list[AssetSpec]:
    """One asset per input pattern (`kafka/<pool>_topics`): the topics it takes, new ones
    included, without a definition each; their high-water marks are its observations."""

    def described(pattern: TopicPattern) -> str:
        but = f", except {', '.join(pattern.exclude)}" if pattern.exclude else ""
        return (
            f"Every Kafka topic whose name matches {pattern.pattern}{but}, now or later "
            f"({_FORMAT_NAMES[pattern.format.value]}): read into raw/{pattern.pool}."
        )

    return [
        AssetSpec(
            **naming.attributes("topic", pattern_name(p, patterns)),
            description=described(p),
            kinds=TOPIC_KINDS,
        )
        for p in patterns
    ]


def input_key(topic: str, inputs: PoolInputs, naming: Naming = DEFAULT_NAMING) -> AssetKey:
    """The asset a raw pool's input topic is shown as: its own, or its pattern's."""
    if topic in inputs.named:
        return naming.key("topic", topic)
    taken = next((p for p in inputs.patterns if p.matches(topic)), None)
    name = pattern_name(taken, inputs.patterns) if taken is not None else topic
    return naming.key("topic", name)


class IngestConfig(Config):
    """End offsets to ingest up to, as JSON {topic: {partition: offset}}; empty = current end."""

    end_offsets: str = ""


def describe_range(r: OffsetRange) -> str:
    return f"{r.topic}[{r.partition}] {r.start}..{r.end - 1}"


def ingest_metadata(result: IngestResult) -> dict[str, Any]:
    return {
        PROGRESS_KEY: MetadataValue.json(offsets_to_json(result.progress)),
        "rows_written": result.rows,
        "dead_letters": result.dead_letters,
        "lag": lag(result.progress, result.end_offsets),
        "ranges": [describe_range(r) for r in result.ranges],
        "run": result.run if result.run is not None else "nothing new",
        **({"note": result.note} if result.note else {}),
    }


def dead_letter_check(key: AssetKey, name: str, pool: str, count: int) -> AssetCheckResult:
    """WARN (not fail): dead letters are kept safely, but someone should look at them."""
    return AssetCheckResult(
        asset_key=key,
        check_name=name,
        passed=count == 0,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "count": count,
            "inspect": f'zync query "SELECT * FROM {pool}_dlq"',
        },
    )


def raw_pool_asset(
    pool: str, inputs: PoolInputs, formats: dict[str, WireFormat] | None = None,
    naming: Naming = DEFAULT_NAMING, freshness: Freshness | None = None,
) -> AssetsDefinition:  # fmt: skip
    named = naming.attributes("raw", pool, tags={"zync/stage": "raw"})
    key = named["key"]
    sources = [*inputs.named, *(pattern_name(p, inputs.patterns) for p in inputs.patterns)]

    @asset(
        **named,
        check_specs=[AssetCheckSpec("no_dead_letters", asset=key)],
        deps=[naming.key("topic", source) for source in sources],
        kinds=POOL_KINDS,
        code_version=code_version(  # as before patterns for a pool without them
            list(inputs.named),
            [(formats or {}).get(t) for t in inputs.named],
            *([list(inputs.patterns)] if inputs.patterns else []),
        ),
        required_resource_keys=resource_keys(naming),
        freshness_policy=freshness_policy(freshness),
        description=f"Raw pool {pool}: every event of {', '.join(sources)}, exactly once.",
    )
    def raw_pool(
        context: AssetExecutionContext,
        config: IngestConfig,
    ) -> MaterializeResult:
        end = offsets_from_json(json.loads(config.end_offsets)) if config.end_offsets else None
        with zync_step(context, naming) as step:
            session = step.session()
            # A pattern's topics as Kafka has them now, and those the sensor saw.
            topics = [*inputs.topics_now(step.config.kafka)]
            topics += [t for t in sorted(end or {}) if t not in topics]
            result = ingest(
                session, pool, topics, step.config.kafka, step.registry(), end,
                missing_ok=True, formats=inputs.formats(topics, formats or {}),
            )  # fmt: skip
            if result.run is None:
                context.log.info(
                    f"pool {pool}: nothing new in Kafka beyond its progress; wrote nothing"
                )
            else:
                context.log.info(
                    f"pool {pool}: read {', '.join(describe_range(r) for r in result.ranges)}; "
                    f"wrote {result.rows} rows, {result.dead_letters} dead letters "
                    f"(ingest run {result.run})"
                )
            return raw_pool_materialization(session, result, naming)

    return raw_pool


def raw_pool_materialization(
    session: SparkSession, result: IngestResult, naming: Naming = DEFAULT_NAMING
) -> MaterializeResult:
    """What an ingest commit records in Dagster, from a run or from `zync run`."""
    key = naming.key("raw", result.pool)
    dead = raw_dead_letters(lambda: session, result.pool)
    return MaterializeResult(
        asset_key=key,
        metadata={**ingest_metadata(result), "dead_letters_total": dead},
        check_results=[dead_letter_check(key, "no_dead_letters", result.pool, dead)],
    )


def recorded_progress(context: SensorEvaluationContext, key: AssetKey) -> Offsets:
    """Cursors from the pool's last materialization metadata (empty if none yet)."""
    event = context.instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return {}
    entry = event.asset_materialization.metadata.get(PROGRESS_KEY)
    return offsets_from_metadata(entry.value) if entry is not None else {}


def topic_observations(
    end: Offsets, naming: Naming = DEFAULT_NAMING, inputs: PoolInputs | None = None
) -> list[AssetObservation]:
    """Each input topic's high-water marks, observed when its sensor sees new offsets: the
    marks are `kafka/<topic>`'s data version, so Dagster shows `raw/<pool>` behind its
    topic until the run the sensor starts has ingested them. A pattern's topics are
    observed together, as its asset's: `{topic: {partition: mark}}`."""
    by_key: dict[AssetKey, dict[str, dict[int, int]]] = {}
    for topic, parts in sorted(end.items()):
        key = input_key(topic, inputs, naming) if inputs else naming.key("topic", topic)
        by_key.setdefault(key, {})[topic] = parts
    observations = []
    for key, topics in by_key.items():
        if len(topics) == 1 and key == naming.key("topic", next(iter(topics))):
            (parts,) = topics.values()
            marks: dict = {str(p): o for p, o in parts.items()}
            version = ",".join(f"{p}:{o}" for p, o in sorted(parts.items()))
        else:
            marks = offsets_to_json(topics)
            version = ",".join(
                f"{t}[{p}]:{o}" for t, ps in topics.items() for p, o in sorted(ps.items())
            )
        observations.append(AssetObservation(
            key, metadata={"high_water_marks": MetadataValue.json(marks)},
            tags={DATA_VERSION_TAG: version},
        ))  # fmt: skip
    return observations


def new_data(progress: Offsets, end: Offsets) -> bool:
    return any(
        offset > progress.get(topic, {}).get(partition, 0)
        for topic, parts in end.items()
        for partition, offset in parts.items()
    )


def watch_for_new_data(
    kafka: KafkaSettings, topics: list[str], progress: Offsets,
    watch_s: float = WATCH_S, poll_s: float = POLL_S,
) -> Offsets | None:  # fmt: skip
    """The topics' end offsets as soon as they go beyond `progress`, looking every `poll_s`
    for up to `watch_s`; None if they did not.

    Dagster's sensor daemon starts an evaluation at most every 5 s: a sensor that looked
    once would notice a change up to 5 s after it arrived. Watching for most of the
    interval notices it within `poll_s` (each look is three small requests to the broker).
    """
    deadline = time.monotonic() + watch_s
    while True:
        end = high_marks(watermarks(kafka, topics, missing_ok=True))
        if new_data(progress, end):
            return end
        if time.monotonic() + poll_s > deadline:
            return None
        time.sleep(poll_s)


def ingest_run_config(key: AssetKey, end_offsets: str) -> dict[str, Any]:
    """A run's config for raw pool asset `key`: ingest up to `end_offsets` (JSON)."""
    config = IngestConfig(end_offsets=end_offsets).model_dump()
    return {"ops": {key.to_python_identifier(): {"config": config}}}


def raw_pool_sensor(
    pool: str, inputs: PoolInputs, minimum_interval_seconds: int,
    carries: Sequence[AssetKey] = (), naming: Naming = DEFAULT_NAMING,
) -> SensorDefinition:  # fmt: skip
    """`carries`: the assets downstream of the pool that its runs materialize too (staging,
    done, output topics): one run carries a change from Kafka to the output topic, where
    a run per stage would pay a run's start and a sensor tick again at each stage. The
    runs are of job `raw_<pool>_run`, in-process whatever the Definitions' executor: the
    stages share the run's one Spark session."""
    key = naming.key("raw", pool)
    carrier = define_asset_job(
        naming.definition_name(f"raw_{pool}_run"),
        selection=[key, *carries],
        executor_def=in_process_executor,
        description=f"raw/{pool} and what it feeds, in one process: started by its sensor.",
    )

    @sensor(
        name=naming.definition_name(f"raw_{pool}_kafka_sensor"),
        job=carrier,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,  # `dagster dev` starts it: no click needed
        required_resource_keys=resource_keys(naming),
        description=f"Starts raw/{pool} when its topics have offsets beyond the pool's cursors.",
    )
    def kafka_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        active = context.instance.get_run_records(
            RunsFilter(tags={POOL_TAG: pool}, statuses=ACTIVE_RUN_STATUSES), limit=1
        )
        if active:
            return SkipReason(f"a run for pool {pool} is already in progress")
        with zync_step(context, naming) as step:
            if (feeder := pipeline_feeding(pool)) is not None:
                return SkipReason(
                    f"{feeder.describe()} ingests pool {pool}; its commits appear as "
                    "materializations"
                )
            progress = recorded_progress(context, key)
            topics = inputs.topics_now(step.config.kafka)  # a new topic a pattern takes too
            end = watch_for_new_data(step.config.kafka, topics, progress)
        if end is None:
            return SkipReason(f"nothing beyond the cursors of pool {pool}")
        observed = json.dumps(offsets_to_json(end))
        context.update_cursor(observed)
        request = RunRequest(run_config=ingest_run_config(key, observed), tags={POOL_TAG: pool})
        observed_topics = topic_observations(end, naming, inputs)
        return SensorResult(run_requests=[request], asset_events=observed_topics)

    return kafka_sensor
