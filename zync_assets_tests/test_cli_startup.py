"""The CLI starts without PySpark where a command needs no Spark (1.5-3 s of imports)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from zync_assets.cli.main import COMMANDS, zync
from zync_assets_tests.support.imports import modules_of


def test_help_and_a_status_outside_a_project_import_no_pyspark(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ZYNC_SPECS"}
    code, modules = modules_of(["--help"], env, tmp_path)
    assert code == 0 and "click" in modules and "pyspark" not in modules
    code, modules = modules_of(["status"], env, tmp_path)  # no project here: one line
    assert code == 1 and "zync_assets" in modules and "pyspark" not in modules


def test_a_lazy_command_runs_as_itself_and_is_listed_by_its_own_help() -> None:
    context = click.Context(zync)
    for name, lazy in COMMANDS.items():
        command = lazy.load()
        assert command.name == name and zync.get_command(context, name) is command
        first_paragraph = (command.help or "").split("\n\n")[0]
        assert " ".join(first_paragraph.split()) == lazy.summary, name
    listed = zync.get_help(context)
    for name in COMMANDS:
        assert f"\n  {name} " in listed, name
