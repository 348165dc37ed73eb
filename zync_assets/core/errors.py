"""The one exception type users see: a message that says what went wrong and what to do."""

import re


class ZyncError(Exception):
    """A failure explained in one line; front ends print it without a traceback."""


class ConcurrentWriter(ZyncError):
    """Another writer (a second pipeline, a Dagster run) committed or took over first;
    this one wrote nothing, and running again continues from the new state."""


class Unavailable(ZyncError):
    """A service (Kafka, the schema registry) did not answer. Nothing was committed: the
    same pass can run again once it is back, which continuous modes do, for a while."""


_STORAGE_FAILURE = re.compile(r"No space left on device|Read-only file system|Disk quota exceeded")


def storage_failure(exc: BaseException) -> str | None:
    """One line for a lake write the file system refused (from Python, Spark or Delta), or
    None. A Delta commit is atomic: the pool is as its last whole commit left it."""
    found = _STORAGE_FAILURE.search(str(exc))
    if found is None:
        return None
    return (
        f"the lake could not be written ({found.group(0)}); every pool is as its last "
        "whole commit left it: free space or make $ZYNC_LAKE writable, then run again"
    )


def first_line(exc: BaseException) -> str:
    """An exception's message without a JVM's stack trace (py4j puts it in the message)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    head = [line for line in lines if not line.lstrip().startswith("at ")][:2]
    return " ".join(line.strip() for line in head)


def innermost_cause(exc: BaseException) -> str:
    """The deepest cause a JVM's stack trace names ("Caused by: …", py4j puts the trace in
    the message), else the message's first line: a failed Spark job's own first line says
    only which call failed."""
    causes = re.findall(r"^Caused by: (.+)$", str(exc), re.MULTILINE)
    return causes[-1].strip() if causes else first_line(exc)
