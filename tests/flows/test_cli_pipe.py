"""A reader that stops reading is not a failure: `xlembed artifacts ls | head -1` exits 0, quietly."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args", [["--help"], ["artifacts", "ls"]])
def test_a_closed_pipe_ends_the_command_quietly_with_exit_0(tmp_path, args):
    root = tmp_path / "artifacts"
    root.mkdir()
    command = [sys.executable, "-c", "from flows.cli import entrypoint; entrypoint()", *args]
    if args[0] == "artifacts":
        command += ["--root", str(root)]
    # the reader is gone before the command writes its first line: every write meets a closed pipe
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr and b"BrokenPipe" not in stderr and b"Exception ignored" not in stderr
