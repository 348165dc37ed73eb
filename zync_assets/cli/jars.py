"""`zync jars`: fetch the jars zync's Spark sessions load into the jar cache."""

from __future__ import annotations

from pathlib import Path

import click

from zync_assets import jars
from zync_assets.core.locations import jars_dir


@click.command("jars")
@click.option("--s3", is_flag=True, help="Also fetch hadoop-aws and the AWS SDK (a lake on S3).")
@click.option(
    "--catalog", is_flag=True,
    help="Also fetch Derby's network client and server (the catalog's metastore).",
)  # fmt: skip
@click.option(
    "--into", type=click.Path(file_okay=False, path_type=Path),
    help="The jar cache to fill (default: $ZYNC_JARS, else ~/.cache/zync-assets/jars).",
)  # fmt: skip
@click.option(
    "--maven-repo", type=click.Path(file_okay=False, path_type=Path),
    help="Maven's local repository to resolve into (default: Maven's own, ~/.m2/repository).",
)  # fmt: skip
def jars_command(s3: bool, catalog: bool, into: Path | None, maven_repo: Path | None) -> None:
    """Fetch Delta Lake, Spark's Kafka source and Avro (with --s3, hadoop-aws and the AWS SDK;
    with --catalog, Derby's network client and server) with Maven into the jar cache, once.

    Maven's own settings apply (mirrors, credentials). zync's own Spark functions ship in
    the package; Spark's jars that PySpark already has are left out."""
    cache = (into or jars_dir()).resolve()
    chosen = ["spark", *(["s3"] if s3 else []), *(["catalog"] if catalog else [])]
    for name in chosen:
        fetched = jars.fetch(name, cache, maven_repo=maven_repo.resolve() if maven_repo else None)
        click.echo(
            f"{name} jars {'fetched into' if fetched else 'are up to date in'} {cache / name}"
        )
    click.echo(f"zync's Spark functions: {jars.functions_jar()}")
