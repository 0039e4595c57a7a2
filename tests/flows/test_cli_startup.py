"""`xlembed --help` and shell completion start the CLI, which must not import the heavy stacks:
torch, transformers, Prefect, polars and matplotlib are imported only inside the commands
that use them (each such import inside a function says why with `# lazy: <reason>`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "prefect", "polars", "matplotlib")


@pytest.mark.slow
def test_importing_the_cli_imports_no_heavy_stack() -> None:
    code = (
        "import sys, flows.cli\n"
        f"loaded = sorted({{m.partition('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
        "assert not loaded, loaded\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
