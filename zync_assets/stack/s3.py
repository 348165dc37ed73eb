"""A local S3 API server as a stack service: S3Proxy (from the jar the installer fetched),
serving buckets kept as folders under `.zync/s3/data` through the S3 API with AWS
signatures. The lake can live there (`ZYNC_LAKE=s3a://zync/lake`) exactly as it would on
S3 or another S3-compatible store: Spark writes it through hadoop-aws, zync reads its
small files through pyarrow.

Its access key and a random secret are made once per stack home, owner-only in
`.zync/s3/credentials.json`; `s3_env` gives the variables a client needs.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from zync_assets.core.errors import ZyncError
from zync_assets.core.locations import INSTALL_HINT, jars_dir
from zync_assets.stack.java import find_java
from zync_assets.stack.process import Running, Service

S3_START_TIMEOUT_S = 60.0
S3_ACCESS_KEY = "zync"
LAKE_BUCKET = "zync"


def s3_service(home: Path) -> Service:
    return Service("s3", home / "run", stop_timeout=10.0)


def s3_endpoint(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def _folder(home: Path) -> Path:
    return home / "s3"


def s3_credentials_file(home: Path) -> Path:
    return _folder(home) / "credentials.json"


def _secret(home: Path) -> str:
    """The server's secret key, made on first use (owner-only)."""
    path = s3_credentials_file(home)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(json.dumps({"access_key": S3_ACCESS_KEY,
                                    "secret_key": secrets.token_urlsafe(24)}))  # fmt: skip
    return json.loads(path.read_text())["secret_key"]


def s3_env(home: Path, port: int) -> dict[str, str]:
    """What a zync command needs to reach this server (ZYNC_LAKE aside)."""
    return {
        "ZYNC_S3_ENDPOINT": s3_endpoint(port),
        "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": _secret(home),
        "AWS_REGION": "us-east-1",
    }


def _properties(home: Path, port: int) -> str:
    return "\n".join([
        f"s3proxy.endpoint={s3_endpoint(port)}",
        "s3proxy.authorization=aws-v2-or-v4",
        f"s3proxy.identity={S3_ACCESS_KEY}",
        f"s3proxy.credential={_secret(home)}",
        "jclouds.provider=filesystem",
        f"jclouds.filesystem.basedir={_folder(home) / 'data'}",
    ]) + "\n"  # fmt: skip


def _answers(port: int) -> bool:
    """Any HTTP answer (an anonymous request is refused with 403: that is an answer)."""
    try:
        with urllib.request.urlopen(s3_endpoint(port), timeout=1):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def launch_s3(home: Path, port: int) -> Callable[[], Running]:
    """Start S3Proxy (unless running) with the lake's bucket; returns a call that waits
    until it answers."""
    service = s3_service(home)
    if (running := service.running()) is not None:
        return lambda: running
    jars = sorted((jars_dir() / "s3proxy").glob("s3proxy-*.jar"))
    if not jars:
        raise ZyncError(f"the S3 server's jar is missing from {jars_dir() / 's3proxy'}; "
                        f"{INSTALL_HINT}")  # fmt: skip
    java = find_java(17, "the S3 server", "ZYNC_S3_JAVA_HOME")
    folder = _folder(home)
    (folder / "data" / LAKE_BUCKET).mkdir(parents=True, exist_ok=True)  # a folder: a bucket
    properties = folder / "s3proxy.properties"
    properties.touch(mode=0o600)
    properties.write_text(_properties(home, port))
    command = [java, "-Xmx256m", "-jar", str(jars[-1]), "--properties", str(properties)]
    proc = service.launch(command, port, cwd=folder)
    return lambda: service.wait_ready(proc, port, lambda: _answers(port), S3_START_TIMEOUT_S)
