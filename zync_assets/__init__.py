"""zync-assets: CDC from Kafka into Delta Lake pools, orchestrated by Dagster.

Data flows ingest → raw pool → etl → staging pool → to-kafka; each stage is a
module of plain functions, with the `zync` CLI and the Dagster definitions as two
thin front ends over them.
"""

__version__ = "0.1.0"
