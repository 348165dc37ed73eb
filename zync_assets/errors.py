"""The one exception type users see: a message that says what went wrong and what to do."""


class ZyncError(Exception):
    """A failure explained in one line; front ends print it without a traceback."""
