"""Find a Java runtime of a required version (Kafka needs 17+, Apicurio 3.3 needs 21+)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from functools import cache

from zync_assets.core.errors import ZyncError

JVM_DIRS = "/usr/lib/jvm/*/bin/java"  # where Debian and Temurin packages put JDKs


@cache
def java_version(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)', out.stderr + out.stdout)
    return int(match.group(1)) if match else None


def _candidates(env_var: str) -> list[str]:
    found = []
    if os.environ.get(env_var):
        found.append(os.path.join(os.environ[env_var], "bin", "java"))
    if os.environ.get("JAVA_HOME"):
        found.append(os.path.join(os.environ["JAVA_HOME"], "bin", "java"))
    on_path = shutil.which("java")
    if on_path:
        found.append(on_path)
    found += sorted(glob.glob(JVM_DIRS))
    return [j for j in dict.fromkeys(found) if os.access(j, os.X_OK)]


def find_java(minimum: int, purpose: str, env_var: str) -> str:
    """The first Java ≥ `minimum`: `$env_var`, `$JAVA_HOME`, PATH, then /usr/lib/jvm/*."""
    candidates = _candidates(env_var)
    if not candidates:
        raise ZyncError(
            f"Java is not installed: {purpose} needs Java {minimum}+ "
            "(Debian: apt-get install openjdk-17-jdk-headless)"
        )
    for java in candidates:
        version = java_version(java)
        if version is not None and version >= minimum:
            return java
    seen = ", ".join(f"{j} ({java_version(j)})" for j in candidates)
    raise ZyncError(
        f"{purpose} needs Java {minimum}+, found only {seen}; install a newer JDK "
        f"or point {env_var} at one"
    )
