"""Schema registry access: one client per settings, errors that name the registry URL."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import urlsplit

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from zync_assets.core.errors import Unavailable, ZyncError
from zync_assets.core.settings import RegistrySettings
from zync_assets.core.tls_probe import speaks_tls

T = TypeVar("T")
SCHEMA_NOT_FOUND = 40403


def _plaintext_to_tls(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "http" and speaks_tls(f"{parts.hostname}:{parts.port or 80}")


class UnknownSchemaId(LookupError):
    pass


class Registry:
    """The registry calls zync makes, with parsed-schema caching by id."""

    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self.client = SchemaRegistryClient(settings.client_config())
        self.schema_by_id = lru_cache(maxsize=4096)(self._fetch_schema)

    def _call(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except SchemaRegistryError as exc:
            if exc.http_status_code in (401, 403):
                raise ZyncError(
                    f"schema registry at {self.settings.url} refused the credentials while "
                    f"{what} (HTTP {exc.http_status_code}); check ZYNC_SCHEMA_REGISTRY_USER "
                    "and ZYNC_SCHEMA_REGISTRY_PASSWORD (or user/password in schema_registry.json)"
                ) from exc
            raise
        except Exception as exc:  # transport errors come from httpx; name the URL instead
            if "CERTIFICATE_VERIFY_FAILED" in str(exc) or "SSL" in type(exc).__name__:
                raise ZyncError(
                    f"TLS with the schema registry at {self.settings.url} failed while {what} "
                    f"({exc}); set ZYNC_SCHEMA_REGISTRY_CA to the CA that signed its certificate"
                ) from exc
            if _plaintext_to_tls(self.settings.url):
                raise ZyncError(
                    f"schema registry at {self.settings.url} answers only TLS; "
                    "use https:// in ZYNC_SCHEMA_REGISTRY_URL"
                ) from exc
            raise Unavailable(
                f"schema registry unreachable at {self.settings.url} while {what} ({exc}); "
                "check ZYNC_SCHEMA_REGISTRY_URL or start the local stack with `zync stack up`"
            ) from exc

    def register(self, subject: str, schema: Any) -> int:
        text = json.dumps(schema)
        try:
            return self._call(
                f"registering {subject}",
                lambda: self.client.register_schema(subject, Schema(text, "AVRO")),
            )
        except SchemaRegistryError as exc:
            raise ZyncError(
                f"schema registry refused the schema for subject {subject!r}: {exc.error_message}"
            ) from exc

    def _fetch_schema(self, schema_id: int) -> Any:
        try:
            schema = self._call(
                f"looking up schema id {schema_id}", lambda: self.client.get_schema(schema_id)
            )
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise UnknownSchemaId(f"schema id {schema_id} is not in the registry") from exc
            raise ZyncError(
                f"schema registry at {self.settings.url} failed looking up schema id "
                f"{schema_id}: {exc.error_message}"
            ) from exc
        return json.loads(schema.schema_str or "null")

    def subjects(self) -> list[str]:
        return self._call("listing subjects", self.client.get_subjects)

    def latest_schema(self, subject: str) -> Any | None:
        """The parsed latest schema of `subject`, None if the subject does not exist."""
        try:
            registered = self.latest(subject)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                return None
            raise ZyncError(
                f"schema registry at {self.settings.url} failed reading {subject}: "
                f"{exc.error_message}"
            ) from exc
        return json.loads(registered.schema.schema_str or "null")

    def versions(self, subject: str) -> list[Any]:
        """Every parsed schema of `subject`, oldest first ([] if the subject does not exist).
        One listing per call; each version is fetched once (a version never changes)."""
        try:
            numbers = self._call(f"listing {subject}", lambda: self.client.get_versions(subject))
            return [self._version(subject, n) for n in sorted(numbers)]
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                return []
            raise ZyncError(
                f"schema registry at {self.settings.url} failed reading {subject}: "
                f"{exc.error_message}"
            ) from exc

    @lru_cache(maxsize=4096)  # noqa: B019  # a process keeps its few registries; versions never change
    def _version(self, subject: str, number: int) -> Any:
        registered = self._call(
            f"reading {subject}", lambda: self.client.get_version(subject, number)
        )
        return json.loads(registered.schema.schema_str or "null")

    def latest(self, subject: str) -> Any:
        return self._call(f"reading {subject}", lambda: self.client.get_latest_version(subject))
