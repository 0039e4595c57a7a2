"""`xlembed artifacts gc --config`: a version that a pipeline's current plan would use is kept,
though no ref points to it now (the config was changed and changed back)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore
from storage.refs import read_ref
from tests.flows.toy_pipeline import build, plan_for, write_config


@pytest.fixture(autouse=True)
def plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("XLEMBED_ROOT", raising=False)


def gc(root: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, ["artifacts", "gc", "--grace", "0", *args, "--root", str(root)])
    assert result.exit_code == code and "Traceback" not in result.output, result.output
    return result.output


def test_gc_keeps_the_versions_a_pipelines_current_plan_would_use(toy_pipeline: dict, toy_stages: dict) -> None:
    config, root, text = toy_pipeline["config"], toy_pipeline["root"], toy_pipeline["text"]
    first = build(config, toy_stages)["histogram"].key
    write_config(config, root, text, bucket=20)
    second = build(config, toy_stages)["histogram"].key
    write_config(config, root, text, bucket=10)  # back: the plan reuses the first build, no ref points to it yet
    assert plan_for(config, toy_stages)["histogram"].key == first
    store = ArtifactStore(root)
    assert read_ref(store, "toy", "histogram").key == second

    assert f"would delete histogram/{first[:12]}" in gc(root)  # without the config gc cannot know
    kept = gc(root, "--config", str(config), "--yes")
    assert store.is_committed("histogram", first), kept
    assert f"histogram/{first[:12]} kept: the current plan of pipeline toy would use it" in kept
    assert "1 a pipeline's current plan would use it" in kept and "nothing to collect" in kept

    write_config(config, root, text, bucket=30)  # a plan that uses neither: the first is garbage again
    assert f"delete histogram/{first[:12]}" in gc(root, "--config", str(config), "--yes")
    assert not store.is_committed("histogram", first) and store.is_committed("histogram", second)
    missing = gc(root, "--config", str(config.with_name("nosuch.toml")), code=2)
    assert "no such config file" in missing and store.is_committed("histogram", second)
