"""Idempotent Delta appends: each tagged with an application id and a run number.

Delta records (app id, version) in the commit; a later append with a version it
has already recorded writes nothing, and two writers racing with the same version
conflict instead of both committing. Every zync write goes through here.
"""

from __future__ import annotations

import delta.exceptions as delta_errors
from pyspark.sql import DataFrame

from zync_assets.core.errors import ConcurrentWriter

CONCURRENT_WRITE = (
    delta_errors.DeltaConcurrentModificationException,
    delta_errors.ConcurrentWriteException,
    delta_errors.MetadataChangedException,
    delta_errors.ProtocolChangedException,
    delta_errors.ConcurrentAppendException,
    delta_errors.ConcurrentDeleteReadException,
    delta_errors.ConcurrentDeleteDeleteException,
    delta_errors.ConcurrentTransactionException,
)


def append_once(
    frame: DataFrame,
    path: str,
    app_id: str,
    run: int,
    metadata: str | None = None,
    partition_by: str | None = None,
    conflict: str = "",
    merge_schema: bool = False,
) -> None:
    """Append `frame` as run `run` of `app_id` (a no-op if that run is already committed).

    A concurrent writer's commit surfaces as one ConcurrentWriter with `conflict` as its message.
    """
    writer = frame.write.format("delta").mode("append")
    if partition_by:
        writer = writer.partitionBy(partition_by)
    writer = writer.option("txnAppId", app_id).option("txnVersion", run)
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    if metadata is not None:
        writer = writer.option("userMetadata", metadata)
    try:
        writer.save(path)
    except CONCURRENT_WRITE as exc:
        raise ConcurrentWriter(
            conflict or f"another writer committed to {path} at the same time"
        ) from exc
