"""Pool upkeep under many small commits: compaction, carried state, vacuum.

A continuous pipeline commits to its pools every few seconds. Left alone, each
commit leaves a small file that every later read lists and opens, and Delta's log
retention eventually deletes the commits that hold a writer's state. Maintenance,
run by `zync run --follow` after the passes that committed, by `zync maintain`
and by Dagster's `pool_maintenance` job:

- deletes the view row versions a newer version replaced, where a staging pool keeps
  views (etl/view_state.py), before it compacts;
- compacts a pool once `compact_every` commits came since its last maintenance
  (Delta's OPTIMIZE: a rewrite with dataChange=false, which appends never conflict
  with, so it cannot race a writer into a lost or duplicated row);
- then writes a *carry* commit holding every writer's newest state (lake/commits.py),
  also whenever the last carry is older than `carry_every`, so log retention never
  takes the only copy of a state;
- vacuums the files compaction replaced once they are older than the time-travel
  window (`delta.deletedFileRetentionDuration`, see resources/spark.conf).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from zync_assets.etl.state import METADATA_KEY as ETL_STATE_KEY
from zync_assets.etl.view_state import prune_superseded
from zync_assets.lake.commits import CARRY_KEY, carry_metadata, commit_info, newest_states
from zync_assets.lake.delta_writes import CONCURRENT_WRITE
from zync_assets.lake.pools import TABLES_FOLDER, commit_file, pool_exists, pool_version
from zync_assets.spark.session import session_conf

DAY_S = 24 * 3600.0


@dataclass(frozen=True)
class MaintenancePolicy:
    compact_every: int = 100  # commits since the last maintenance
    carry_every_s: float = DAY_S  # the newest carry's greatest age; keep ≪ log retention
    vacuum_every_s: float = DAY_S  # per pool and process (a vacuum lists every file)


@dataclass(frozen=True)
class Maintained:
    pool: str
    pruned: int = 0  # superseded view row versions deleted
    files_removed: int = 0  # by compaction: small files now in `files_added`
    files_added: int = 0
    carried: int = 0  # states in the carry commit (0: none written)
    vacuumed: int = 0  # files deleted by vacuum
    seconds: float = 0.0

    def describe(self) -> str:
        done = []
        if self.pruned:
            done.append(f"deleted {self.pruned} superseded view row versions")
        if self.files_removed:
            done.append(f"compacted {self.files_removed} files into {self.files_added}")
        if self.carried:
            done.append(f"carried {self.carried} writer states")
        if self.vacuumed:
            done.append(f"vacuumed {self.vacuumed} replaced files")
        kind = "table" if Path(self.pool).parent.name == TABLES_FOLDER else "pool"
        return f"{kind} {Path(self.pool).name}: {', '.join(done) or 'nothing to do'}"


@dataclass(frozen=True)
class _LastCarry:
    version: int
    at_s: float  # commit timestamp, seconds since the epoch


class Maintenance:
    """Keeps pools fit; remembers, per process, where each pool's last carry is."""

    def __init__(self, spark: SparkSession, policy: MaintenancePolicy | None = None) -> None:
        self.session = spark
        self.policy = policy or MaintenancePolicy()
        self._carries: dict[str, _LastCarry | None] = {}
        self._vacuumed_at: dict[str, float] = {}

    def on(self, spark: SparkSession) -> Maintenance:
        """The same policy on another session (a lane of its own: run.py), for other
        paths than this one keeps."""
        return Maintenance(spark, self.policy)

    def run_due(self, path: str) -> Maintained | None:
        """What is due for the pool at `path`, done; None when nothing was."""
        newest = pool_version(path)
        if newest is None:
            return None
        last = self._last_carry(path, newest)
        compact = _commits_since(last, newest) >= self.policy.compact_every
        carry = compact or _age_s(last, path) >= self.policy.carry_every_s
        if not carry:
            return None
        return self.maintain(path, compact=compact)

    def maintain(self, path: str, compact: bool = True, vacuum: bool | None = None) -> Maintained:
        """Compact (if asked), vacuum (if due or asked), carry the writers' states."""
        started = time.monotonic()
        pruned = self._prune_views(path) if compact else 0
        removed, added = self._compact(path) if compact else (0, 0)
        if vacuum is None:
            vacuum = time.time() - self._vacuumed_at.get(path, 0.0) >= self.policy.vacuum_every_s
        vacuumed = self._vacuum(path) if vacuum else 0  # VACUUM commits too: carry after it
        carried = self._carry(path)
        return Maintained(
            path, pruned, removed, added, carried, vacuumed, time.monotonic() - started
        )

    def _prune_views(self, path: str) -> int:
        """Superseded view row versions deleted, where an ETL state of the pool names views."""
        read = pool_version(path)
        states = newest_states(path, read) if read is not None else {}
        if not any(c.data.get("views") for c in states.get(ETL_STATE_KEY, [])):
            return 0
        try:
            return prune_superseded(self.session, path)
        except CONCURRENT_WRITE:
            return 0  # a rewrite race (another maintenance): the next one deletes them

    def _compact(self, path: str) -> tuple[int, int]:
        try:
            metrics = self.session.sql(f"OPTIMIZE delta.`{path}`")
            row = metrics.select("metrics.numFilesRemoved", "metrics.numFilesAdded").first()
        except CONCURRENT_WRITE:
            return 0, 0  # a rare rewrite race (another compaction): the next one redoes it
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def _carry(self, path: str) -> int:
        read = pool_version(path)
        assert read is not None
        states = newest_states(path, read)
        frame = self.session.read.format("delta").load(path).limit(0)
        writer = frame.write.format("delta").mode("append")
        # An append of no rows (one empty file): a commit whose metadata is the carry.
        # Delta records an empty append only when told to; other writes keep the default.
        with session_conf(
            self.session, {"spark.databricks.delta.skipRecordingEmptyCommits": "false"}
        ):
            writer.option("userMetadata", carry_metadata(read, states)).save(path)
        self._carries.pop(path, None)  # found again (with its timestamp) on the next check
        return sum(len(commits) for commits in states.values())

    def _vacuum(self, path: str) -> int:
        """VACUUM LITE (replaced files found in the log: seconds, not a listing of the pool),
        or a full VACUUM where the log no longer holds them all (Delta says which).
        Returns how many files it deleted, from the VACUUM END commit's metrics."""
        try:
            self.session.sql(f"VACUUM delta.`{path}` LITE").collect()
        except Exception as exc:  # Delta's DeltaIllegalStateException, via py4j or Connect
            if "VACUUM FULL" not in str(exc):
                raise
            self.session.sql(f"VACUUM delta.`{path}`").collect()
        self._vacuumed_at[path] = time.time()
        return _vacuum_deleted(path)

    def _last_carry(self, path: str, newest: int) -> _LastCarry | None:
        """The newest carry within `compact_every` commits (None: none that recent)."""
        known = self._carries.get(path)
        if known is not None and newest - known.version < self.policy.compact_every:
            return known
        oldest = max(-1, newest - self.policy.compact_every)
        for version in range(newest, oldest, -1):
            info = commit_info(commit_file(path, version))
            if info is None:
                break
            if f'"{CARRY_KEY}"' in (info.get("userMetadata") or ""):
                self._carries[path] = _LastCarry(version, info.get("timestamp", 0) / 1000)
                return self._carries[path]
        return None


def maintain_pools(
    spark: SparkSession, paths: list[str], policy: MaintenancePolicy | None = None
) -> list[Maintained]:
    """`zync maintain` and the Dagster job: every existing pool, compacted and vacuumed."""
    upkeep = Maintenance(spark, policy)
    return [upkeep.maintain(path, vacuum=True) for path in paths if pool_exists(path)]


def _commits_since(last: _LastCarry | None, newest: int) -> int:
    return newest + 1 if last is None else newest - last.version


def _age_s(last: _LastCarry | None, path: str) -> float:
    """Seconds since the last carry, or, with none yet, since the table's first commit."""
    if last is not None:
        return time.time() - last.at_s
    first = commit_info(commit_file(path, 0))
    if first is None:  # the log was already trimmed and has no carry: carry now
        return float("inf")
    return time.time() - first.get("timestamp", time.time() * 1000) / 1000


def _vacuum_deleted(path: str) -> int:
    """Files deleted by the pool's latest VACUUM END commit (0 if it recorded none)."""
    newest = pool_version(path)
    info = commit_info(commit_file(path, newest)) if newest is not None else None
    if not info or info.get("operation") != "VACUUM END":
        return 0
    return int((info.get("operationMetrics") or {}).get("numDeletedFiles", 0))
