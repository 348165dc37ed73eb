"""Sessions on a Spark Connect server (`ZYNC_SPARK_MASTER=sc://host:port`), such as the
one `zync stack up` starts: every run shares its warm JVM instead of starting its own.

A server that is down gives a one-line error naming its URL within seconds (PySpark's
client would otherwise retry for ten minutes); one that restarts is waited for briefly.
"""

from __future__ import annotations

import socket
import warnings
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from zync_assets.core.config import current
from zync_assets.core.errors import ZyncError

if TYPE_CHECKING:  # PySpark is imported where a session is made: the CLI imports this early
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import RetryPolicy

# Retries of a lost connection: 0.05, 0.2, 0.8, 3.2 s, then 5 s each, about 25 s in all:
# long enough for a server restart to go unnoticed by a run, short enough to be an error.
_RETRIES = 8
_MAX_BACKOFF_MS = 5000
SPARK_CONNECT_PORT = 15002  # Spark Connect's own default
START_HINT = "start it with `zync stack up`, or unset ZYNC_SPARK_MASTER to run Spark locally"


def server_address(url: str) -> tuple[str, int]:
    """Host and port of an `sc://host:port[/;params]` URL (Spark Connect's port by default)."""
    parsed = urlparse(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise ZyncError(f"ZYNC_SPARK_MASTER={url!r} is not a Spark Connect URL (sc://host:port)")
    return parsed.hostname, parsed.port or SPARK_CONNECT_PORT


def server_answers(url: str, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection(server_address(url), timeout=timeout):
            return True
    except OSError:
        return False


def server_down(url: str) -> ZyncError:
    return ZyncError(f"no Spark Connect server answers at {url}: {START_HINT}")


def connect_session(url: str, app_name: str, new: bool = False) -> SparkSession:
    """A session on the server at `url`, with zync's functions registered in it: the
    process's (or, `new`, one of its own, with its own SQL conf)."""
    from pyspark.sql import SparkSession

    from zync_assets.spark.functions import quiet_query_errors, register_functions

    if not server_answers(url):
        raise server_down(url)
    # Our error says it once; PySpark's warning would add a second, less helpful line.
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
    builder = SparkSession.builder.remote(url).appName(app_name)
    session = builder.create() if new else builder.getOrCreate()
    session.client.set_retry_policies([_retries_until_lost()])
    try:
        register_functions(session)
    except Exception as exc:
        if (failure := connect_failure(exc, url)) is not None:
            raise failure from exc
        if "Can not load class" in str(exc):  # Spark's words for a jar missing on the server
            raise ZyncError(
                f"the Spark Connect server at {url} lacks zync's functions "
                "(zync_assets/jars/zync-spark.jar): start it with `zync stack up`, or "
                "pass that jar to your server's --jars"
            ) from exc
        raise
    quiet_query_errors()
    return session


def _retries_until_lost() -> RetryPolicy:
    """PySpark's default policy over _RETRIES tries, until one call has spent them all:
    from then on a call that fails is not retried. A server that went away was waited for
    once; without this, each call after the lost one (the `finally` that unpersists a
    cache, PySpark's own clean-up at exit) waited as long again: an ingest whose server
    was killed took 78 s to end, and its test ran 59 s longer (115 s, now 56 s; 2026-12-04)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy, RetryPolicyState

    class UntilLost(DefaultPolicy):
        lost = False

        def to_state(self) -> RetryPolicyState:
            return _StateUntilLost(self)

    class _StateUntilLost(RetryPolicyState):
        def next_attempt(self, exception: BaseException | None = None) -> int | None:
            policy = self.policy
            assert isinstance(policy, UntilLost)
            wait = None if policy.lost else super().next_attempt(exception)
            if wait is None:
                policy.lost = True
            return wait

    return UntilLost(max_retries=_RETRIES, max_backoff=_MAX_BACKOFF_MS)


def connect_failure(exc: BaseException, url: str | None = None) -> ZyncError | None:
    """The one-line error for a Spark Connect server that went away, if `exc` is one."""
    import grpc
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    # PySpark re-raises the last gRPC error once its retries are spent.
    lost = isinstance(exc, SparkConnectGrpcException | grpc.RpcError) and (
        "StatusCode.UNAVAILABLE" in str(exc)
    )
    if not lost:
        return None
    return server_down(url or current().spark_master)
