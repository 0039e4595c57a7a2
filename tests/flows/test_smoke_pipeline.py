"""`xlembed run configs/smoke.toml`: every stage, translate included, through the real Prefect
flow, on tiny models built on the spot; then the trained model loads in sentence-transformers
and a second run computes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from storage import ArtifactStore
from storage.refs import read_ref
from tests.flows.toy_pipeline import REPO, cli, subprocess_env

STAGES = ["corpus", "translate_model", "translate", "base_model", "align", "train", "evaluate"]


@pytest.mark.slow
def test_smoke_profile_runs_every_stage_end_to_end(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    env = subprocess_env(tmp_path, XLEMBED_STAGES="")
    env.pop("XLEMBED_STAGES")
    run = subprocess.run(
        cli("run", str(REPO / "configs/smoke.toml"), "--root", str(root)), env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    store = ArtifactStore(str(root))
    refs = {stage: read_ref(store, "smoke", stage) for stage in STAGES}
    assert all(ref is not None for ref in refs.values()), refs
    manifests = {stage: store.manifest(stage, ref.key) for stage, ref in refs.items()}
    # the translate artifact is a multi-way corpus: each English row plus k=3 translations
    translated = store.read_table("translate", refs["translate"].key).to_pylist()
    per_group: dict[str, set[str]] = {}
    for row in translated:
        per_group.setdefault(row["group_id"], set()).add(row["lang"])
    assert per_group and all("eng_Latn" in langs and len(langs) == 4 for langs in per_group.values())
    # align read the translations, train read both, evaluate scored the trained model beside the base
    assert manifests["align"].input_keys["translate"] == refs["translate"].key
    assert manifests["train"].input_keys["align"] == refs["align"].key
    assert manifests["evaluate"].input_keys["train"] == refs["train"].key
    assert "base_headline" in manifests["evaluate"].metrics
    report = Path(store.artifact_dir("evaluate", refs["evaluate"].key)) / "files/report/report.md"
    assert "Δ vs untrained base" in report.read_text(encoding="utf-8")

    from sentence_transformers import SentenceTransformer

    model_dir = store.attached_dir("train", refs["train"].key) / "model"
    # the run's last lines say where the model is and how to get it out (issue 36)
    last = run.stdout.strip().splitlines()[-2:]
    assert last[0] == f"model: {store.uri('train', refs['train'].key)}/files/model", last
    assert last[1] == f"export it: xlembed export train smoke-model --pipeline smoke --root {store.root_uri}", last
    vectors = SentenceTransformer(str(model_dir), device="cpu").encode(["a short test", "ein kurzer Test"])
    assert vectors.shape[0] == 2 and vectors.shape[1] == manifests["base_model"].metrics["dim"]

    again = subprocess.run(
        cli("plan", str(REPO / "configs/smoke.toml"), "--root", str(root)), env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("cached") == len(STAGES) and "compute" not in again.stdout, again.stdout
