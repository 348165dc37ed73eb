"""Where the lake lives: a local folder, or a bucket on S3 or an S3-compatible server.

The lake is the configuration's (core/config.py; `ZYNC_LAKE` for the CLI): a folder
(default `./.zync/lake`) or `s3a://BUCKET/PREFIX`. Spark reaches
an S3 lake through hadoop-aws (the `s3a` file system); zync's own small reads outside
Spark (a table's newest version, a commit's metadata, the pipeline leases) go through
pyarrow's file systems, the same code for both kinds of lake.

An S3 lake takes the AWS SDK's usual variables — `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_REGION` — and `ZYNC_S3_ENDPOINT` for a server other than
AWS (`http://127.0.0.1:9000`: path-style requests, TLS only for https).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

from pyarrow import fs as pafs

from zync_assets.core.config import S3_SCHEMES, current
from zync_assets.core.errors import Unavailable, ZyncError


def lake_uri() -> str:
    """The lake in force: an absolute folder, or an `s3a://bucket/prefix` URL (no
    trailing slash)."""
    return current().lake.uri()


def is_object_store(location: str) -> bool:
    return location.startswith(S3_SCHEMES)


def join(base: str, *parts: str) -> str:
    return (
        "/".join([base.rstrip("/"), *parts])
        if is_object_store(base)
        else str(Path(base).joinpath(*parts))
    )


@functools.cache
def _s3(
    endpoint: str, access_key: str | None, secret_key: str | None, region: str
) -> pafs.FileSystem:
    options: dict[str, object] = {"region": region}
    if endpoint:
        # The AWS SDK's default since 2025 sends each upload with a streamed checksum
        # trailer, which S3-compatible servers (S3Proxy among them) refuse with a 400;
        # checksums only where an operation requires them, as before.
        os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "WHEN_REQUIRED")
        parsed = urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
        options |= {"endpoint_override": parsed.netloc, "scheme": parsed.scheme}
    if access_key and secret_key:
        options |= {"access_key": access_key, "secret_key": secret_key}
    return pafs.S3FileSystem(**options)


def s3_settings() -> tuple[str, str | None, str | None, str]:
    lake = current().lake
    return lake.s3_endpoint, lake.aws_access_key_id, lake.aws_secret_access_key, lake.aws_region


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's file system for `location` and the path within it."""
    if is_object_store(location):
        return _s3(*s3_settings()), location.split("://", 1)[1]
    return pafs.LocalFileSystem(), location


def read_text(location: str) -> str | None:
    """A file's text; None if there is no such file."""
    store, path = filesystem(location)
    try:
        with store.open_input_stream(path) as stream:
            return stream.read().decode()
    except FileNotFoundError:
        return None
    except OSError as error:
        if _missing(error):
            return None
        raise storage_error(location, error) from error


def lines(location: str) -> Iterator[str]:
    """A text file's lines, read as they are needed (a commit's first line is often all a
    caller wants); FileNotFoundError if there is no such file."""
    if not is_object_store(location):
        with open(location) as local:
            yield from local
        return
    text = read_text(location)
    if text is None:
        raise FileNotFoundError(location)
    yield from text.splitlines(keepends=True)


def _missing(error: OSError) -> bool:
    text = str(error)
    return "NoSuchKey" in text or "Path does not exist" in text or "not found" in text.lower()


def names_in(location: str) -> list[str]:
    """The names directly inside a folder (or key prefix); [] if there is none."""
    if not is_object_store(location):  # a Delta log holds thousands: names only, no stat
        try:
            return [entry.name for entry in os.scandir(location)]
        except (FileNotFoundError, NotADirectoryError):
            return []
    store, path = filesystem(location)
    try:
        infos = store.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        if not infos:
            _require_bucket(store, location)
    except OSError as error:
        raise storage_error(location, error) from error
    return [info.base_name for info in infos]


def _require_bucket(store: pafs.FileSystem, location: str) -> None:
    """An empty listing of a bucket that does not exist is an error, not an empty lake."""
    bucket = location.split("://", 1)[1].split("/", 1)[0]
    if store.get_file_info(bucket).type == pafs.FileType.NotFound:
        raise OSError(f"NoSuchBucket: {bucket}")


def is_file(location: str) -> bool:
    if not is_object_store(location):
        return os.path.isfile(location)
    store, path = filesystem(location)
    try:
        return store.get_file_info(path).type == pafs.FileType.File
    except OSError as error:
        raise storage_error(location, error) from error


def write_text(location: str, text: str) -> None:
    """Replace a small file whole: readers see the old text or the new, never half (an S3
    PUT is atomic; locally a temporary file is renamed over it)."""
    store, path = filesystem(location)
    if not is_object_store(location):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        temporary = Path(f"{path}.{os.getpid()}.tmp")
        temporary.write_text(text)
        temporary.replace(path)
        return
    with store.open_output_stream(path) as stream:
        stream.write(text.encode())


def delete_file(location: str) -> None:
    """Delete a file; nothing to do if there is none."""
    store, path = filesystem(location)
    _unless_missing(location, lambda: store.delete_file(path))


def delete_tree(location: str) -> None:
    """Delete a folder (or every object under a prefix); nothing to do if there is none."""
    store, path = filesystem(location)
    _unless_missing(location, lambda: store.delete_dir(path))


def _unless_missing(location: str, delete: Callable[[], None]) -> None:
    try:
        delete()
    except FileNotFoundError:
        pass
    except OSError as error:
        if not _missing(error):
            raise storage_error(location, error) from error


_REFUSED = ("ACCESS_DENIED", "SIGNATURE_DOES_NOT_MATCH", "InvalidAccessKeyId", "AccessDenied",
            "SignatureDoesNotMatch", "403")  # fmt: skip
_UNREACHABLE = ("NETWORK_CONNECTION", "Could not connect", "Connection refused", "timed out")


def storage_error(location: str, error: OSError) -> ZyncError:
    """One line for a failed read or write of the lake outside Spark, naming the cause."""
    detail = str(error).splitlines()[0] if str(error) else type(error).__name__
    if not is_object_store(location):
        return ZyncError(f"the lake could not be read at {location} ({detail})")
    endpoint = current().lake.s3_endpoint or "AWS S3"
    lake = lake_uri()
    location = lake if location.startswith(lake) else location  # the lake, not one object
    if any(word in detail for word in _UNREACHABLE):
        return Unavailable(
            f"the lake's object store at {endpoint} does not answer; start it (or set "
            "ZYNC_S3_ENDPOINT to where it listens) and run again"
        )
    if "NoSuchBucket" in detail or "NO_SUCH_BUCKET" in detail:
        bucket = location.split("://", 1)[1].split("/", 1)[0]
        return ZyncError(f"the lake's bucket {bucket!r} does not exist at {endpoint}; create "
                         "it or correct ZYNC_LAKE")  # fmt: skip
    if any(word in detail for word in _REFUSED):
        return ZyncError(
            f"the lake's object store at {endpoint} refused the credentials for {location}; "
            "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    return ZyncError(f"the lake's object store failed for {location} ({detail})")


# --- Spark's side ------------------------------------------------------------------------


def spark_conf_for_lake(location: str) -> dict[str, str]:
    """hadoop-aws settings for an S3 lake (none for a folder), without the keys: these
    settings go on a JVM's command line. See `lake_keys`."""
    if not is_object_store(location):
        return {}
    endpoint, _, _, region = s3_settings()
    conf = {
        "spark.hadoop.fs.s3a.endpoint.region": region,
        # Fewer, shorter retries than hadoop-aws's defaults (minutes), so a lake that is
        # away is an error within seconds, as a broker that is away is.
        "spark.hadoop.fs.s3a.attempts.maximum": "3",
        "spark.hadoop.fs.s3a.retry.limit": "3",
        "spark.hadoop.fs.s3a.connection.establish.timeout": "5s",
        # Delta's log store for s3a is S3SingleDriverLogStore: see docs/SCALING.md.
    }
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
        conf |= {
            "spark.hadoop.fs.s3a.endpoint": f"{parsed.scheme}://{parsed.netloc}",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": str(parsed.scheme == "https").lower(),
        }
    return conf


def lake_keys(location: str) -> dict[str, str]:
    """The S3 keys as Hadoop properties, for a running driver's Hadoop configuration (never
    a command line, where `ps` shows them); tasks get them with the configuration their
    job ships. A Spark Connect server reads them from its environment instead."""
    _, access_key, secret_key, _ = s3_settings()
    if not is_object_store(location) or not (access_key and secret_key):
        return {}
    return {"fs.s3a.access.key": access_key, "fs.s3a.secret.key": secret_key}
