"""Keeping a test worker's SparkSession usable after a test is stopped mid-call.

pytest-timeout stops a test by raising inside whatever it is doing, most often py4j's
wait for the JVM's answer. py4j closes its connection only for its own network errors,
so after any other exception the thread keeps a connection one answer behind: every
later call reads the answer to the call before it ("... does not exist in the JVM",
`KeyError: 'm'`), and every later test of the worker fails (CI: one timeout, 118
failures). Dropping the connection makes py4j open a fresh one on the next call.
"""

from __future__ import annotations

from typing import Any


def drop_thread_connection(session: Any) -> None:
    """Close this thread's py4j connection (the next call opens a new one) and cancel the
    Spark jobs a stopped call may have left running."""
    client = session.sparkContext._gateway._gateway_client
    connection = client.get_thread_connection()
    if connection is not None:
        connection.close()
    session.sparkContext.cancelAllJobs()
