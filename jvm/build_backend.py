"""The package's build backend: setuptools, after zync's Spark functions jar is built.

A wheel carries zync-spark.jar (zync_assets/jars/), so nothing compiles when it is
installed; so does an sdist, beside the Java sources it was built from, so a wheel made
from it needs no Maven unless those sources are newer. Before setuptools builds either
(or an editable install), this runs jvm/build.sh — Maven, with the Java unit tests —
unless the jar is newer than every Java source, test and the Maven build. pyproject.toml names this module
(`backend-path = ["jvm"]`); everything else is setuptools' own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import (  # noqa: F401  (the rest of the backend interface)
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

JVM = Path(__file__).resolve().parent
JAR = JVM.parent / "zync_assets" / "jars" / "zync-spark.jar"


def jar_is_stale() -> bool:
    """The jar is missing, or older than a Java source, test or the Maven build."""
    if not JAR.is_file():
        return True
    sources = [JVM / "pom.xml", *JVM.glob("src/**/*.java"), *JVM.glob("test/**/*.java")]
    built = JAR.stat().st_mtime
    return any(source.stat().st_mtime > built for source in sources)


def build_functions_jar() -> None:
    if jar_is_stale():
        subprocess.run(["bash", str(JVM / "build.sh")], check=True)


def build_wheel(wheel_directory: str, config_settings: Any = None,
                metadata_directory: str | None = None) -> str:  # fmt: skip
    build_functions_jar()
    return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Any = None) -> str:
    build_functions_jar()
    return build_meta.build_sdist(sdist_directory, config_settings)


def build_editable(wheel_directory: str, config_settings: Any = None,
                   metadata_directory: str | None = None) -> str:  # fmt: skip
    build_functions_jar()
    return build_meta.build_editable(wheel_directory, config_settings, metadata_directory)


if __name__ == "__main__":  # scripts/install.sh: the checkout's jar, when it is stale
    build_functions_jar()
