"""Fixtures of the fault and bad-input suite.

Long variants (20+ kills, CLI kills through Prefect, more S3 fault seeds) run with
`pytest tests/reliability --long-faults` or `XLEMBED_LONG_FAULTS=1`; the default is the short,
CI-sized variant. Every test reports what it tried through `record`, which appends JSON lines
to $XLEMBED_RELIABILITY_RESULTS when set: `python -m tests.reliability.report` turns them
into docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.storage.conftest import S3Server, s3_server  # noqa: F401 - the moto fixture, shared

REPO = Path(__file__).resolve().parents[2]
LONG_ENV = "XLEMBED_LONG_FAULTS"
RESULTS_ENV = "XLEMBED_RELIABILITY_RESULTS"
_lock = threading.Lock()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long-faults", action="store_true", default=False, help="run the long fault-injection variants")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "long_faults: only with --long-faults or XLEMBED_LONG_FAULTS=1")


def long_mode(config: pytest.Config) -> bool:
    return bool(config.getoption("--long-faults", default=False)) or os.environ.get(LONG_ENV, "") not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if long_mode(config):
        return
    skip = pytest.mark.skip(reason=f"long fault variant: pass --long-faults or set {LONG_ENV}=1")
    for item in items:
        if "long_faults" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def long_faults(request: pytest.FixtureRequest) -> bool:
    return long_mode(request.config)


def record_result(category: str, name: str, outcome: str, detail: str = "", **extra: Any) -> None:
    """Append one tried fault or bad input and what happened to the results file (if any)."""
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    line = json.dumps({"category": category, "name": name, "outcome": outcome, "detail": detail, **extra}, ensure_ascii=False)
    with _lock, open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


@pytest.fixture
def record() -> Callable[..., None]:
    return record_result


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared by every scenario: the tiny model is built once per session."""
    return tmp_path_factory.mktemp("reliability-cache")


def driver_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(REPO),
        TMPDIR=str(tmp),  # the store stages part files in the temp dir for remote roots
        XLEMBED_PROGRESS="0",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
    )
    env.pop("XLEMBED_STAGES", None)
    env.update(extra)
    return env


def driver_command(spec: Path) -> list[str]:
    return [sys.executable, "-m", "tests.reliability.driver", str(spec)]


@pytest.fixture
def clean_s3fs() -> Iterator[None]:
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()
