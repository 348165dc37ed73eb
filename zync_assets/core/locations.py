"""Where zync keeps its files: the working directory's `.zync/` and the jar cache."""

from __future__ import annotations

import os
from pathlib import Path

# The folder that holds the package: a checkout's root (resources/, etl_specs/, .zync/),
# or site-packages for an installed wheel, where none of those are.
CHECKOUT_ROOT = Path(__file__).resolve().parents[2]


def state_dir() -> Path:
    """Per-working-directory state: stack data, logs, PIDs (`$ZYNC_HOME`, default `.zync`)."""
    return Path(os.environ.get("ZYNC_HOME", ".zync")).resolve()


def jars_dir() -> Path:
    """The jar cache: `$ZYNC_JARS`; else a checkout's `.zync/jars` (scripts/install.sh
    fills it), or the working directory's; else the user's cache,
    `~/.cache/zync-assets/jars` (`zync jars` fills it)."""
    if "ZYNC_JARS" in os.environ:
        return Path(os.environ["ZYNC_JARS"]).resolve()
    for candidate in (CHECKOUT_ROOT / ".zync" / "jars", state_dir() / "jars"):
        if candidate.is_dir():
            return candidate
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "zync-assets" / "jars"


# The local stack's servers (Kafka, the registry, Connect, S3Proxy) come with a checkout.
INSTALL_HINT = "run scripts/install.sh"


def connect_configs_dir() -> Path:
    """The Kafka Connect connector configurations (`resources/connect/` of the checkout)."""
    return CHECKOUT_ROOT / "resources" / "connect"
