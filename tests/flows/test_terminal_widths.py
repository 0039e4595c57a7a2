"""What a terminal shows of a run: the demo's corpus stage rendered by tmux at 80, 120 and 160
columns (no log line glued to a progress bar, the plan's notes once, no telemetry banner), and
the pieces that keep it so: every handler Prefect configures prints through the shared console,
and Prefect's telemetry notice stays off a terminal."""

from __future__ import annotations

import os
import pty
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOG_LINE = re.compile(r"\d\d:\d\d:\d\d\.\d{3} \| (DEBUG|INFO|WARNING|ERROR|CRITICAL) +\|")
TELEMETRY = "Prefect collects anonymous usage data"
TABLE_BORDERS = set("┏┳┓┡╇┩┃│└┴┘")  # the plan and artifacts tables draw with ━ too


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """This environment without Prefect, CI or tracking settings (a user's first run), Prefect's home in `tmp`."""
    env = {
        k: v for k, v in os.environ.items() if k != "DO_NOT_TRACK" and not k.startswith(("CI", "GITHUB_", "PREFECT_", "XLEMBED_"))
    }
    (tmp / "prefect-home").mkdir(parents=True, exist_ok=True)
    return {**env, "PREFECT_HOME": str(tmp / "prefect-home"), "PYTHONPATH": str(REPO), **extra}


def test_every_handler_prefect_configures_prints_through_the_shared_console(tmp_path: Path) -> None:
    """A handler holding the stderr it found at configuration writes under a live bar, not above it."""
    probe = (
        "import flows.cli, logging\n"
        "from prefect.logging.configuration import setup_logging\n"
        "setup_logging()\n"
        "for name in ['', *logging.root.manager.loggerDict]:\n"
        "    logger = logging.getLogger(name)\n"
        "    for handler in getattr(logger, 'handlers', []):\n"
        "        print(name or 'root', type(handler).__module__ + '.' + type(handler).__name__)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], env=clean_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    handlers = dict(line.split() for line in result.stdout.splitlines())
    assert handlers["root"] == handlers["prefect._internal"] == handlers["uvicorn"] == "flows.terminal.TerminalLogHandler"
    to_streams = {name: cls for name, cls in handlers.items() if not cls.endswith(("TerminalLogHandler", "APILogHandler"))}
    assert to_streams == {}


def run_in_pty(args: list[str], env: dict[str, str]) -> str:
    master, slave = pty.openpty()
    process = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert process.wait(timeout=120) == 0, out
    return out.decode("utf-8", "replace")


@pytest.mark.slow
def test_prefects_telemetry_notice_stays_off_a_terminal(tmp_path: Path) -> None:
    # a first import of Prefect on a terminal prints its notice unless DO_NOT_TRACK is set
    shown = run_in_pty([sys.executable, "-c", "import prefect"], clean_env(tmp_path / "plain"))
    assert TELEMETRY in shown  # what the command line would print without its default
    quiet = run_in_pty([sys.executable, "-c", "import flows.cli; import prefect"], clean_env(tmp_path / "xlembed"))
    assert TELEMETRY not in quiet, quiet
    # a user who wants Prefect's telemetry says so
    assert TELEMETRY in run_in_pty(
        [sys.executable, "-c", "import flows.cli; import prefect"], clean_env(tmp_path / "opted-in", DO_NOT_TRACK="0")
    )


def render_in_tmux(columns: int, tmp: Path) -> list[str]:
    """The demo's corpus stage run in a tmux window `columns` wide; the window's lines, wrapped ones joined."""
    session = f"xlembed-{os.getpid()}-{columns}"
    script = tmp / f"run-{columns}.sh"
    env = " ".join(f"{k}={v!r}" for k, v in clean_env(tmp, PREFECT_SERVER_ANALYTICS_ENABLED="false").items() if k != "TMUX")
    command = f"{sys.executable} -m flows.cli run configs/demo.toml --only corpus --root {tmp / f'root-{columns}'}"
    script.write_text(f"cd {REPO}\nenv -i {env} {command}\necho EXIT $?\nsleep 600\n", encoding="utf-8")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", str(columns), "-y", "50", f"bash {script}"], check=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            time.sleep(2)
            screen = subprocess.run(
                ["tmux", "capture-pane", "-t", session, "-p", "-J", "-S", "-"], capture_output=True, text=True, check=True
            ).stdout
            if re.search(r"^EXIT \d+$", screen, re.M):
                return screen.splitlines()
        raise AssertionError(f"the run did not end in 600 s at {columns} columns:\n{screen}")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux renders the terminal")
@pytest.mark.parametrize("columns", [80, 120, 160])
def test_the_demo_corpus_stage_reads_cleanly_at_any_width(columns: int, tmp_path: Path) -> None:
    lines = render_in_tmux(columns, tmp_path)
    text = "\n".join(lines)
    assert "EXIT 0" in lines, text
    for line in lines:
        found = LOG_LINE.search(line)
        assert found is None or found.start() == 0, f"a log line glued to other output at {columns} columns:\n{line}"
        if "━" in line and not set(line) & TABLE_BORDERS:  # a progress bar: its own row, starting with its shard's name
            assert re.match(r"^\s+\S*corpus:cldr-(lowres|major) ", line), f"a bar shares its row at {columns} columns:\n{line}"
    for source in ("cldr-major", "cldr-lowres"):  # each shard's log line whole, once
        shard = [line for line in lines if f"corpus shard {source}: " in line]
        assert len(shard) == 1 and shard[0].endswith("}"), (columns, shard)
    assert text.count("no local input files to hash") == 1, text  # the CLI's note; the flow's copy stays in the UI
    assert TELEMETRY not in text
