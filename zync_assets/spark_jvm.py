"""The driver JVM of a local Spark session, started with its stderr passed through a filter.

PySpark starts the JVM with the terminal as its stderr, and the JVM writes there before
any logging configuration can act: `WARNING: Using incubator modules: jdk.incubator.vector`
(Spark's launcher always adds that module). Those start-up lines mean nothing to a
zync user; everything else the JVM writes (log4j's errors) is passed on as it comes.
After Python has exited the pipe is closed, so nothing the JVM writes while being torn
down (e.g. a `Broken pipe` trace from an accumulator update) reaches the terminal.
`zync -v` and ZYNC_DEBUG=1 pass everything.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from typing import IO

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway

from zync_assets.settings import verbose

# Lines the JVM writes at start-up that zync's users have no use for.
JVM_START_NOISE = re.compile(rb"^WARNING: Using incubator modules: ")


def start_driver_jvm(conf: dict[str, str]) -> None:
    """Start the driver JVM for a session with `conf` (the properties its launcher
    needs: master, jars, Java options), unless this process has one already."""
    if SparkContext._gateway is not None:  # type: ignore[attr-defined]
        return
    spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
    gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
    stderr = gateway.proc.stderr
    threading.Thread(
        target=forward_lines, args=(stderr, 2, not verbose()), name="spark-jvm-stderr",
        daemon=True,
    ).start()  # fmt: skip
    SparkContext._ensure_initialized(gateway=gateway)  # type: ignore[attr-defined]


def forward_lines(source: IO[bytes], fd: int, drop_noise: bool) -> None:
    """Copy `source`'s lines to file descriptor `fd`, less the start-up noise."""
    for line in iter(source.readline, b""):
        if drop_noise and JVM_START_NOISE.match(line):
            continue
        try:
            os.write(fd, line)
        except OSError:
            return
