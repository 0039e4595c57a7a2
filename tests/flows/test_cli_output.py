"""What `xlembed` prints, as a user sees it in 80 columns and in a pipe (issue 15, output and progress)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from rich.cells import cell_len

from storage.refs import list_refs
from tests.flows.toy_pipeline import cli, subprocess_env, write_config, write_corpus_text

BOX = set("┏┃┡│└┌┐┘╭╰━─═")


def _commands(group, path=()):
    """Every command of the CLI as its argument path: ("run",), ("artifacts", "show"), ..."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


@pytest.mark.slow
def test_every_help_text_reads_in_80_columns():
    import typer.main
    from typer.testing import CliRunner

    from flows.cli import app

    runner = CliRunner()
    commands = list(_commands(typer.main.get_command(app)))
    assert ("deploy",) in commands and ("artifacts", "show") in commands
    for path in [(), ("artifacts",), *commands]:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, prog_name="xlembed")
        assert result.exit_code == 0, (path, result.output)
        text = result.output
        for bad in ("<bool>", "<str>", "<path>", "<int>", "<float", "<list", "{", "…", "╭"):
            assert bad not in text, (path, bad, text)
        assert all(cell_len(line) <= 80 for line in text.splitlines()), (path, text)
    deploy = runner.invoke(app, ["deploy", "--help"], env={"COLUMNS": "80"}, prog_name="xlembed").output
    assert "XLEMBED_WORK_POOL" in deploy and "Usage: xlembed deploy [OPTIONS]" in deploy
    pool = next(line for line in deploy.splitlines() if "--pool POOL" in line)
    assert pool.index("work pool") <= 40  # descriptions get half the width, not a 17-character column
    run = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "80"}, prog_name="xlembed").output
    assert "Usage: xlembed run [OPTIONS] CONFIG" in run and "--only STAGE" in run and "--root URI" in run


@pytest.fixture(scope="module")
def piped_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A real `xlembed run` of the toy pipeline into a pipe, with a root path longer than 80 characters."""
    tmp = tmp_path_factory.mktemp("piped")
    root = tmp / ("a-long-folder-name-" * 4) / "artifacts"
    config = write_config(tmp / "toy.toml", root, write_corpus_text(tmp / "data"))
    env = subprocess_env(tmp, XLEMBED_PROGRESS="1", XLEMBED_PROGRESS_EVERY="0", COLUMNS="80")
    result = subprocess.run(cli("run", str(config)), env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return {"result": result, "root": root, "config": config, "env": env, "tmp": tmp}


@pytest.mark.slow
def test_a_run_into_a_pipe_prints_plain_lines_and_whole_uris(piped_run):
    from storage import ArtifactStore

    out = piped_run["result"].stdout
    assert not BOX & set(out), out
    store = ArtifactStore(piped_run["root"])
    uris = [store.uri(ref.stage, ref.key) for ref in list_refs(store)]
    assert uris and all(len(uri) > 80 for uri in uris)
    lines = out.splitlines()
    for uri in uris:  # each URI whole on one line, not wrapped or cut to "…"
        assert any(line.endswith(uri) for line in lines), (uri, out)
    plan = lines[lines.index("plan") + 1 :]
    assert plan[0].split() == ["stage", "action", "key", "why"] and plan[1].split()[:2] == ["corpus", "compute"]


@pytest.mark.slow
def test_a_run_into_a_pipe_shows_progress_lines_and_no_notice_noise(piped_run):
    err = piped_run["result"].stderr
    # progress of every shard in a log line, in its unit, with an end line
    assert "lengths:" in err and " rows" in err and "(done)" in err, err
    assert "temporary Prefect server for this run at http://127.0.0.1:" in err
    assert "See https://docs.prefect.io" not in err and "Stopping temporary server" not in err


def _tty_env(env: dict) -> dict:
    return {**env, "TTY_COMPATIBLE": "1", "COLUMNS": "80", "NO_COLOR": "1"}


@pytest.mark.slow
def test_artifacts_show_starts_with_a_summary_and_tables_fit_80_columns(piped_run):
    root = str(piped_run["root"])
    for command in (["artifacts", "show", "corpus"], ["artifacts", "head", "corpus"]):
        shown = subprocess.run(
            cli(*command, "--root", root), env=_tty_env(piped_run["env"]), capture_output=True, text=True, timeout=120
        )
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        table = [line for line in lines if line and line[0] in BOX | set("╞├")]
        assert table, shown.stdout
        # polars' table is drawn once, at the terminal's width: no line of it wrapped by rich
        assert all(cell_len(line) <= 80 for line in table), shown.stdout
        assert all(line[-1] in BOX | set("┤╡") for line in table), shown.stdout
        if command[1] == "show":
            assert lines[0].startswith("corpus ") and "{" not in shown.stdout
            assert any(line.strip().startswith("rows ") and " in, " in line for line in lines)
    as_json = subprocess.run(
        cli("artifacts", "show", "corpus", "--json", "--root", root),
        env=piped_run["env"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    import json

    assert json.loads(as_json.stdout)["stage"] == "corpus"


@pytest.mark.slow
def test_a_table_in_a_pipe_is_markdown_rows_one_line_each(piped_run):
    head = subprocess.run(cli("artifacts", "head", "corpus", "-n", "3", "--root", str(piped_run["root"])), env=piped_run["env"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    lines = head.stdout.splitlines()
    assert len(lines) == 2 + 3 and all(line.startswith("|") and line.endswith("|") for line in lines), head.stdout


def test_long_lines_are_never_wrapped_and_tables_in_a_pipe_are_never_cut():
    import io

    from rich.table import Table

    from flows.output import Output

    sink = io.StringIO()
    console = Output(file=sink, width=80)  # not a terminal, 80 columns: what rich used to wrap at
    report = "report: /data/" + "long-folder/" * 12 + "evaluate/" + "f" * 64 + "/files/report/report.html"
    console.print(report, highlight=False, markup=False)
    table = Table(title="artifacts")
    for column in ("stage", "uri"):
        table.add_column(column)
    table.add_row("[green]corpus[/]", "s3://bucket/prefix/corpus/" + "c" * 64)
    table.add_row("translate_model", "s3://bucket/prefix/translate_model/" + "d" * 64)
    console.print(table)
    assert sink.getvalue().splitlines() == [
        report,
        "artifacts",
        "stage            uri",
        "corpus           s3://bucket/prefix/corpus/" + "c" * 64,
        "translate_model  s3://bucket/prefix/translate_model/" + "d" * 64,
    ]


def test_an_error_about_a_long_path_is_one_line_in_a_pipe(tmp_path: Path) -> None:
    # stderr is a pipe here: the error names the whole absolute path on the line that starts with "error:"
    missing = tmp_path / ("a-long-folder-name-" * 5) / "config [v2].toml"
    env = subprocess_env(tmp_path, COLUMNS="80")
    result = subprocess.run(cli("plan", str(missing)), env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    line = next(line for line in result.stderr.splitlines() if line.startswith("error:"))
    assert str(missing) in line and len(line) > 80
