"""The jars zync's Spark sessions load, and where they come from.

- zync's own Spark functions (`zync-spark.jar`, Avro / Connect JSON ↔ VARIANT and the
  to-kafka sender) ship inside the package: jvm/build.sh builds them into this folder
  before a wheel is made.
- Delta Lake, Spark's Kafka source and Avro module (and, for a lake on S3, hadoop-aws with
  the AWS SDK) are fetched by `zync jars` with Maven, from the poms in this folder, into
  the jar cache (`locations.jars_dir()`), minus every jar PySpark already ships, so ours
  never shadow Spark's own jackson / hadoop / parquet / log4j.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from zync_assets.core.errors import ZyncError

HERE = Path(__file__).resolve().parent
FUNCTIONS_JAR = HERE / "zync-spark.jar"
# The jar sets `zync jars` fetches: cache folder → the pom naming them.
SETS = {
    "spark": HERE / "spark.pom.xml",
    "s3": HERE / "s3.pom.xml",
    "catalog": HERE / "catalog.pom.xml",
}
FETCH_HINT = "fetch them with `zync jars` (in a checkout: scripts/install.sh)"


def functions_jar() -> Path:
    """zync's Spark functions jar, inside the installed package."""
    if not FUNCTIONS_JAR.is_file():
        raise ZyncError(
            f"zync's Spark functions jar is missing from the package ({FUNCTIONS_JAR}): build it "
            "with jvm/build.sh (Maven) in a checkout, or install zync-assets from a wheel"
        )
    return FUNCTIONS_JAR


def fetch(name: str, cache: Path, *, maven_repo: Path | None = None) -> bool:
    """Fill `cache/<name>` with the jar set `name`, unless it already holds that pom's
    jars; True when it fetched. Maven resolves them (its settings, mirrors and
    credentials apply), into `maven_repo` if given, else Maven's own local repository."""
    pom = SETS[name]
    target = cache / name
    stamp = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    if (target / ".stamp").is_file() and (target / ".stamp").read_text().strip() == stamp:
        return False
    staging = cache / f"{name}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    _copy_dependencies(pom, staging, maven_repo)
    _drop_shipped(staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    (target / ".stamp").write_text(stamp + "\n")
    return True


def _copy_dependencies(pom: Path, into: Path, maven_repo: Path | None) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ZyncError(
            "Maven (mvn) is missing: `zync jars` fetches Delta Lake's and Spark's Kafka jars "
            "with it; install it (Debian: apt-get install maven), or set ZYNC_JARS to a "
            "folder that holds them"
        )
    command = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom),
               "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={into}"]  # fmt: skip
    if maven_repo is not None:
        command.insert(1, f"-Dmaven.repo.local={maven_repo}")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        log = into.parent / f"maven-{pom.stem}.log"
        log.write_text(done.stdout + done.stderr)
        raise ZyncError(
            f"Maven could not fetch the jars of {pom.name} (log: {log}); check Maven's access "
            "to its repository (its settings.xml) and run `zync jars` again"
        )


def artifact(jar_name: str) -> str:
    """A jar's artifact name without its version: `jackson-core-2.21.2.jar` → `jackson-core`."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar_name)


def _drop_shipped(folder: Path) -> None:
    """Remove the jars PySpark ships (same artifact, any version): Spark's own win."""
    import pyspark

    shipped = {artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    for jar in folder.glob("*.jar"):
        if artifact(jar.name) in shipped:
            jar.unlink()
