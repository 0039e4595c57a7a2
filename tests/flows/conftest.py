"""Fixtures of the flow tests; the helpers they share with the tests are in toy_pipeline.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.flows.toy_pipeline import TOY_STAGES, write_config, write_corpus_text


@pytest.fixture
def toy_stages(monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("XLEMBED_STAGES", TOY_STAGES)
    from flows.stages import stage_registry

    return stage_registry()


@pytest.fixture
def toy_pipeline(tmp_path: Path, toy_stages: dict) -> dict:
    text = write_corpus_text(tmp_path / "data")
    root = tmp_path / "artifacts"
    config = write_config(tmp_path / "toy.toml", root, text)
    return {"config": config, "root": root, "text": text, "tmp": tmp_path}


@pytest.fixture(scope="session")
def prefect_server():
    """One temporary Prefect server (SQLite) for the in-process flow tests."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
