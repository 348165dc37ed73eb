"""`zync` run in the test worker's own process, over the worker's warm SparkSession.

A `zync` subprocess that touches Spark starts a driver JVM of its own: 10-25 s of CPU on
two loaded cores, for a command that then works for a second or two. Most CLI tests ask
what the command printed and how it exited, not how its process started: for those the
CLI's own `main` (what the console script calls) runs here, with the command's
environment, working directory and output streams swapped in for the call.

What stays a subprocess (`needs_a_process`): a call that reads stdin, one with its own
Spark master (a Connect server, a cluster) or lake on S3 (the worker's session has
neither), or one that sets Spark's own start-up (ZYNC_SPARK_CONF, ...). Tests of the
process itself (kills, the terminal's quiet, Ctrl-C) start the real console script.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

# Variables that shape the driver JVM when it starts: a call that changes one needs a
# JVM of its own.
# ZYNC_METASTORE too: a catalog is a static property of the session (spark/catalog.py).
_JVM_SHAPING = ("ZYNC_SPARK_", "JAVA_HOME", "PYSPARK_", "SPARK_", "ZYNC_METASTORE")


def needs_a_process(env: dict[str, str], stdin: str | None) -> str | None:
    """Why a `zync` call with `env` (and `stdin`) cannot run in this process, if it can't."""
    if stdin is not None:
        return "it reads stdin"
    for key, value in env.items():
        if key.startswith(_JVM_SHAPING) and os.environ.get(key) != value:
            return f"it sets {key}, which shapes its own JVM"
    if "://" in env.get("ZYNC_LAKE", ""):
        return "its lake is on an object store"
    return None


def run_in_process(
    args: list[str], env: dict[str, str], cwd: Path | None
) -> subprocess.CompletedProcess[str]:
    """`zync *args` through the CLI's `main`, as the console script runs it: its exit
    code, and what it wrote to stdout and stderr (Python's: the JVM's own lines go to the
    worker's stderr, so a test of those runs the console script)."""
    from zync_assets.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    # A command that starts the worker's Spark starts it as the `spark` fixture does
    # (worker_session), a `zync run --follow` too.
    with (
        _environment({**env, "ZYNC_SPARK_FAST_START": "always"}),
        _directory(cwd),
        _logging(),
        _streams(out, err),
    ):
        try:
            main(args)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        except Exception:  # ZYNC_DEBUG=1 re-raises: the traceback, as Python prints it
            traceback.print_exc(file=err)
            code = 1
    return subprocess.CompletedProcess(["zync", *args], code, out.getvalue(), err.getvalue())


def worker_session():  # -> SparkSession (PySpark imported lazily: unit tests skip it)
    """The worker's SparkSession, started as the `spark` fixture starts it if no test has
    yet: kept for the whole run, with C1's code only and the serial collector. Against C2
    (with G1 or serial), test_etl.py and test_views.py took 167-171 s against 206-217 s on
    2 workers, 303-315 CPU-seconds against 394-413: C2 kept compiling the new code every
    test's plans make (110-120 CPU-s a worker over a full run)."""
    from zync_assets.spark.session import spark_session

    return spark_session("zync-tests", long_lived=True, fast_start=True)


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _directory(cwd: Path | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    saved = Path.cwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def _logging() -> Iterator[None]:
    """The root logger as a fresh process has it, so the CLI's `basicConfig` sets its
    handler on the call's stderr; pytest's handlers back after."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    root.handlers = []
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers, root.level = saved_handlers, saved_level


@contextlib.contextmanager
def _streams(out: io.StringIO, err: io.StringIO) -> Iterator[None]:
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO("")  # a subprocess's stdin is empty too (capture_output)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield
    finally:
        sys.stdin = saved_stdin
