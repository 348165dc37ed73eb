"""The driver JVM of a local Spark session, started with its output passed through a filter.

PySpark starts the JVM with the terminal as its stderr, and the JVM writes there before
any logging configuration can act: `WARNING: Using incubator modules: jdk.incubator.vector`
(Spark's launcher always adds that module). Those start-up lines mean nothing to a
zync user; everything else the JVM writes (log4j's errors) is passed on as it comes.
After Python has exited the pipe is closed, so nothing the JVM writes while being torn
down (e.g. a `Broken pipe` trace from an accumulator update) reaches the terminal.
The JVM's stdout is not zync's: zync prints its results from Python, and a command's
stdout may be piped (JSON). What the JVM prints there (Delta's VACUUM counts its files on
the console) goes to stderr, and that count only with `-v`.
`zync -v` and ZYNC_DEBUG=1 pass everything.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import threading
from typing import IO

from zync_assets.core.settings import verbose

# Lines the JVM writes at start-up that zync's users have no use for.
JVM_START_NOISE = re.compile(rb"^WARNING: Using incubator modules: ")
# Lines the JVM prints on its stdout that zync reports in its own words (or not at all).
JVM_STDOUT_NOISE = re.compile(rb"^Deleted \d+ files and directories in a total of \d+ director")


def start_driver_jvm(conf: dict[str, str]) -> None:
    """Start the driver JVM for a session with `conf` (the properties its launcher
    needs: master, jars, Java options), unless this process has one already."""
    from pyspark import SparkConf, SparkContext  # here: the CLI imports this module early
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    gateway = launch_gateway(spark_conf, popen_kwargs=pipes)
    for source, noise in (
        (gateway.proc.stdout, JVM_STDOUT_NOISE),
        (gateway.proc.stderr, JVM_START_NOISE),
    ):
        threading.Thread(
            target=forward_lines, args=(source, 2, None if verbose() else noise),
            name="spark-jvm-output", daemon=True,
        ).start()  # fmt: skip
    SparkContext._ensure_initialized(gateway=gateway)


def forward_lines(source: IO[bytes], fd: int, noise: re.Pattern[bytes] | None) -> None:
    """Copy `source`'s lines to file descriptor `fd`, less the lines `noise` matches."""
    for line in iter(source.readline, b""):
        if noise is not None and noise.match(line):
            continue
        try:
            os.write(fd, line)
        except OSError:
            return


def jvm_lost(exc: BaseException) -> str | None:
    """One line for a local Spark whose driver JVM died mid-pass (killed, out of memory),
    if `exc` says so. Every commit is atomic: the pools are as their last commit left them."""
    from py4j.protocol import Py4JError, Py4JJavaError

    # A Py4JJavaError carries a Java exception: the JVM is alive. Any other Py4JError is
    # py4j losing its connection; so is an OSError from connecting to the gateway again.
    gone = isinstance(exc, Py4JError) and not isinstance(exc, Py4JJavaError)
    gone = gone or (isinstance(exc, ConnectionError) and _raised_in_py4j(exc))
    if not gone:
        return None
    return (
        "Spark's driver JVM stopped during the pass (killed, or out of memory: raise "
        "spark.driver.memory in resources/spark.conf if it recurs); every pool is as its "
        "last whole commit left it: run again"
    )


def _raised_in_py4j(exc: BaseException) -> bool:
    frame = exc.__traceback__
    while frame is not None:
        if "py4j" in frame.tb_frame.f_code.co_filename:
            return True
        frame = frame.tb_next
    return False


class QuietPy4J:
    """A logging filter that drops py4j's own error records (a traceback per failed call
    once the JVM is gone); zync reports the failure in one line. `zync -v` keeps them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "py4j" not in record.pathname
