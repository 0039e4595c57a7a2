"""Helpers for the flow tests that run a toy pipeline (tests/flows/toy_stages.py): its config
and corpus files, in-process plans and builds, and the environment of a CLI subprocess. Tests
import them from here by their full name; the fixtures that use them are in conftest.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from flows.config import load_config
from flows.plan import StepPlan, make_plan
from storage import ArtifactStore
from storage.refs import set_ref
from tasks.stage import run_stage

REPO = Path(__file__).resolve().parents[2]
TOY_STAGES = "tests.flows.toy_stages:PIPELINE_STAGES"


def write_corpus_text(directory: Path, lines: int = 60) -> dict[str, Path]:
    """A small line-aligned English/Kazakh text pair (synthetic but well-formed)."""
    directory.mkdir(parents=True, exist_ok=True)
    en = directory / "train.en"
    kk = directory / "train.kk"
    en.write_text("".join(f"sentence number {i} is about the river {i % 7}\n" for i in range(lines)), encoding="utf-8")
    kk.write_text("".join(f"{i} нөмірлі сөйлем {i % 7} өзен туралы\n" for i in range(lines)), encoding="utf-8")
    return {"en": en, "kk": kk}


def write_config(
    path: Path, root: Path, text: dict[str, Path], *, unit: str = "chars", bucket: int = 10, shards: int = 2, max_workers: int = 2
) -> Path:
    path.write_text(
        f"""
[pipeline]
name = "toy"
root = "{root}"
max_workers = {max_workers}

[corpus]
seed = 7
[[corpus.sources]]
name = "pairs"
kind = "text"
files = {{ en = "{text["en"]}", kk = "{text["kk"]}" }}

[lengths]
shards = {shards}
unit = "{unit}"

[histogram]
bucket = {bucket}
""",
        encoding="utf-8",
    )
    return path


def plan_for(config_path: Path, stages: dict, **options) -> dict[str, StepPlan]:
    config = load_config(config_path)
    store = ArtifactStore(config.settings.root)
    return {step.stage: step for step in make_plan(config, store, stages, **options)}


def build(config_path: Path, stages: dict, **options) -> dict[str, StepPlan]:
    """Execute a plan in-process (what the Prefect flow does, minus Prefect)."""
    config = load_config(config_path)
    store = ArtifactStore(config.settings.root)
    plan = make_plan(config, store, stages, **options)
    for step in plan:
        if step.action == "compute":
            run_stage(store, stages[step.stage], config.stage_configs[step.stage], step.input_keys, force=step.forced)
        if step.action != "skip":
            set_ref(store, config.name, step.stage, step.key)
    return {step.stage: step for step in plan}


def actions(plan: dict[str, StepPlan]) -> dict[str, str]:
    return {name: step.action for name, step in plan.items()}


def subprocess_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / f"prefect-home-{len(list(tmp_path.glob('prefect-home-*')))}"
    home.mkdir(parents=True)
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(REPO),
        XLEMBED_STAGES=TOY_STAGES,
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        XLEMBED_PROGRESS="0",
    )
    env.pop("PREFECT_API_URL", None)
    env.update(extra)
    return env


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "flows.cli", *args]
