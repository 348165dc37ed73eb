"""The one exception type users see: a message that says what went wrong and what to do."""


class ZyncError(Exception):
    """A failure explained in one line; front ends print it without a traceback."""


class ConcurrentWriter(ZyncError):
    """Another writer (a second pipeline, a Dagster run) committed or took over first;
    this one wrote nothing, and running again continues from the new state."""


class Unavailable(ZyncError):
    """A service (Kafka, the schema registry) did not answer. Nothing was committed: the
    same pass can run again once it is back, which continuous modes do, for a while."""
