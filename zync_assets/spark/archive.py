"""A class-data archive for the local Spark driver JVM (Java's AppCDS).

A local driver spends most of its start-up loading and verifying the classes of Spark,
Delta and zync's functions. `scripts/install.sh` runs one small Delta workload with
`-XX:ArchiveClassesAtExit` (`python -m zync_assets.spark.archive_build`); every later driver
maps those classes, already parsed and verified, from the archive: a one-pass command
starts in a little over half the time (bench/startup_bench.py, docs/BENCHMARKS.md).

An archive belongs to one Java and one set of jars, so its file name is a digest of them:
a new jar or another Java finds no archive and starts as before until install builds one.
Java's own CDS messages are off: an archive it cannot map costs time, never a failure.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from zync_assets.core.locations import jars_dir

_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def java_binary() -> Path | None:
    """The `java` PySpark starts: `$JAVA_HOME/bin/java`, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _pyspark_jars() -> list[Path]:
    import pyspark

    return sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))


def archive_path(spark_jars: list[str]) -> Path | None:
    """Where the archive for this Java, PySpark's jars and `spark_jars` lives (None: no Java)."""
    java = java_binary()
    if java is None:
        return None
    digest = hashlib.sha256()
    for path in [java, *_pyspark_jars(), *map(Path, spark_jars)]:
        stat = path.stat() if path.exists() else None
        digest.update(f"{path}\0{stat and stat.st_size}\0{stat and stat.st_mtime_ns}\n".encode())
    return jars_dir() / "class-data" / f"spark-{digest.hexdigest()[:16]}.jsa"


def java_options(spark_jars: list[str]) -> str:
    """The driver's options to map its archive, if install has built one."""
    archive = archive_path(spark_jars)
    return f"-XX:SharedArchiveFile={archive} {_QUIET}" if archive and archive.is_file() else ""


def dump_options(target: Path) -> str:
    """The driver's options to write the archive of every class it loads to `target` on exit."""
    return f"-XX:ArchiveClassesAtExit={target} {_QUIET}"
