"""-q / -v / --json after every command, as before it; and typer's shell completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from flows.cli import app

REPO = Path(__file__).resolve().parents[2]
OWN_FLAGS = {("plan",), ("run",), ("evaluate",), ("artifacts", "ls")}  # the commands that declare -q/-v/--json themselves


def commands(group, path=()):
    """Every command and group under `group` as its argument path: ("sweep",), ("artifacts",), ("artifacts", "gc"), ..."""
    for name, command in group.commands.items():
        yield (*path, name)
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))


@pytest.fixture(autouse=True)
def no_debug_left():
    yield
    os.environ.pop("XLEMBED_DEBUG", None)  # -v sets it for the process


def test_every_command_takes_the_global_flags_after_it():
    runner = CliRunner()
    paths = list(commands(typer.main.get_command(app)))
    assert {("sweep",), ("align",), ("deploy",), ("serve",), ("export",), ("artifacts",), ("artifacts", "gc")} <= set(paths)
    for path in paths:
        # parsed (not "No such option"); --help, eager, then answers
        result = runner.invoke(app, [*path, "-q", "--json", "--help"], prog_name="xlembed")
        assert result.exit_code == 0, (path, result.output)
        assert "-q, --quiet" in result.output and "-v, --verbose" in result.output and "--json" in result.output, path
        if path in OWN_FLAGS:
            continue  # they read their own flags in their body, after their arguments (tests/flows/test_terminal.py)
        # the added flags reach the output mode as they are parsed: -q with -v is the usage error it is before the command
        both = runner.invoke(app, [*path, "-q", "-v"], prog_name="xlembed")
        assert both.exit_code == 2 and "-q and -v ask for opposite things" in both.output, (path, both.output)


def test_flags_after_a_command_act_as_before_it(tmp_path: Path):
    (tmp_path / "store").mkdir()
    runner = CliRunner()
    for flag in ("--json", "-q"):
        before = runner.invoke(app, [flag, "artifacts", "refs", "--root", str(tmp_path / "store")], prog_name="xlembed")
        after = runner.invoke(app, ["artifacts", "refs", "--root", str(tmp_path / "store"), flag], prog_name="xlembed")
        assert after.exit_code == before.exit_code == 0, after.output
        assert after.stdout == before.stdout, flag
    # --json keeps stdout for JSON: the refs table is not printed there
    assert (
        runner.invoke(app, ["artifacts", "refs", "--root", str(tmp_path / "store"), "--json"], prog_name="xlembed").stdout == ""
    )
    assert "refs" in runner.invoke(app, ["artifacts", "refs", "--root", str(tmp_path / "store")], prog_name="xlembed").stdout


def test_shell_completion_completes_commands_and_prints_its_script():
    runner = CliRunner()
    for words, cword, expected in (
        ("xlembed art", 1, "artifacts"),
        ("xlembed artifacts s", 2, "show"),
        ("xlembed sw", 1, "sweep"),
    ):
        env = {"_XLEMBED_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        result = runner.invoke(app, [], prog_name="xlembed", env=env)
        assert result.exit_code == 0 and expected in result.stdout.split(), (words, result.output)
    help_text = runner.invoke(app, ["--help"], prog_name="xlembed").output
    assert "--install-completion" in help_text and "--show-completion" in help_text


@pytest.mark.slow
def test_the_installed_command_prints_a_bash_completion_script():
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "flows.cli", "--show-completion", "bash"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert (
        "_XLEMBED_COMPLETE=complete_bash" in result.stdout
        and "complete -o default -F _xlembed_completion xlembed" in result.stdout
    )
