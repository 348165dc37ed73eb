"""zync-assets: CDC from Kafka into Delta Lake pools, orchestrated by Dagster.

Data flows ingest → raw pool → etl → staging pool → to-kafka; each stage is a
module of plain functions, with the `zync` CLI and the Dagster definitions as two
thin front ends over them.

In a Dagster project of your own:

    from zync_assets import build_zync_definitions, load_specs

    defs = build_zync_definitions(load_specs("specs"))

or, in a `dg` project, a `defs.yaml` of type `zync_assets.ZyncComponent`. The names
below are imported when first used, so `import zync_assets` (and the CLI) stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name → the module that defines it
_PUBLIC = {
    "build_zync_definitions": "zync_assets.orchestration.definitions",
    "ZyncComponent": "zync_assets.orchestration.component",
    "ZyncTranslator": "zync_assets.orchestration.naming",
    "ZyncAsset": "zync_assets.orchestration.naming",
    "load_spec": "zync_assets.specs.model",
    "load_specs": "zync_assets.specs.model",
    "Spec": "zync_assets.specs.model",
    "ZyncError": "zync_assets.core.errors",
    "ZyncConfig": "zync_assets.core.config",
    "LakeSettings": "zync_assets.core.config",
    "KafkaSettings": "zync_assets.core.settings",
    "RegistrySettings": "zync_assets.core.settings",
}
__all__ = [
    "KafkaSettings",
    "LakeSettings",
    "RegistrySettings",
    "Spec",
    "ZyncAsset",
    "ZyncComponent",
    "ZyncConfig",
    "ZyncError",
    "ZyncTranslator",
    "__version__",
    "build_zync_definitions",
    "load_spec",
    "load_specs",
]

if TYPE_CHECKING:
    from zync_assets.core.config import LakeSettings, ZyncConfig
    from zync_assets.core.errors import ZyncError
    from zync_assets.core.settings import KafkaSettings, RegistrySettings
    from zync_assets.orchestration.component import ZyncComponent
    from zync_assets.orchestration.definitions import build_zync_definitions
    from zync_assets.orchestration.naming import ZyncAsset, ZyncTranslator
    from zync_assets.specs.model import Spec, load_spec, load_specs


def __dir__() -> list[str]:
    """The lazy names too: `dg` finds the Component by listing this module."""
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'zync_assets' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
