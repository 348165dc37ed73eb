"""A staging pool's rows: what the ETL writes, and what to-kafka, the lake tables,
maintenance and `zync status` read. Each row is of one kind (the `kind` column, by which
the pool is partitioned):

    output  a record for an output topic: `kafka.topic`/`kafka.offset` its place in the
            topic, `key` and `value` the record, `run` the ETL pass that wrote it
    done    an input event the ETL consumed: `kafka` its place in the raw pool's topic,
            `status` done, unmatched or expired
    view    a version of a view's input row (etl/views.py): `status` names the view

Each ETL commit also records its pass's state in the commit's metadata (etl/state.py,
under lake/commits.py's ETL_STATE_KEY): among it `next`, per output topic the spec ever
wrote, the offset its next record gets. So the pool's output topics are known without a
scan.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

KIND = "kind"
OUTPUT = "output"
DONE = "done"
VIEW = "view"


def of_kind(kind: str) -> Column:
    """The staging rows of `kind`."""
    return F.col(KIND) == kind
