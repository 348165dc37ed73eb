"""What marks a zync asset as changed in Dagster: its definition's hash and its kinds.

An asset's `code_version` is a hash of the spec entries that make it (a pool's rules, a
table's definition, a topic's route): edit a rule and Dagster shows the assets it writes
as changed since their last materialization, and only those.
"""

from __future__ import annotations

import hashlib

# The icons Dagster draws beside an asset (at most three each).
POOL_KINDS = {"spark", "delta"}  # raw and staging pools, lake tables
TOPIC_KINDS = {"kafka"}  # input and output topics


def code_version(*definitions: object) -> str:
    """A short, stable hash of `definitions` (spec dataclasses: their repr holds every
    field and no address)."""
    text = "\n".join(repr(d) for d in definitions)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
