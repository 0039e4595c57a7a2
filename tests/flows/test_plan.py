"""plan / --only / --from / --force semantics on a three-stage pipeline (corpus -> lengths -> histogram)."""

from __future__ import annotations

import os

import pytest

from storage import ArtifactStore
from tests.flows.toy_pipeline import actions, build, plan_for, write_config


def test_fresh_pipeline_computes_everything_then_nothing(toy_pipeline: dict, toy_stages: dict) -> None:
    first = plan_for(toy_pipeline["config"], toy_stages)
    assert actions(first) == {"corpus": "compute", "lengths": "compute", "histogram": "compute"}
    assert first["corpus"].reasons == ["never built by pipeline 'toy'"]
    build(toy_pipeline["config"], toy_stages)
    again = plan_for(toy_pipeline["config"], toy_stages)
    assert actions(again) == {"corpus": "cached", "lengths": "cached", "histogram": "cached"}
    assert {s.key for s in again.values()} == {s.key for s in first.values()}


def test_editing_one_stage_recomputes_it_and_downstream_only(toy_pipeline: dict, toy_stages: dict) -> None:
    build(toy_pipeline["config"], toy_stages)
    write_config(toy_pipeline["config"], toy_pipeline["root"], toy_pipeline["text"], unit="bytes")
    plan = plan_for(toy_pipeline["config"], toy_stages)
    assert actions(plan) == {"corpus": "cached", "lengths": "compute", "histogram": "compute"}
    assert plan["lengths"].reasons == ["lengths.unit: 'chars' -> 'bytes'"]
    assert plan["histogram"].reasons == ["input lengths changed"]

    build(toy_pipeline["config"], toy_stages)
    write_config(toy_pipeline["config"], toy_pipeline["root"], toy_pipeline["text"], unit="bytes", bucket=5)
    plan = plan_for(toy_pipeline["config"], toy_stages)
    assert actions(plan) == {"corpus": "cached", "lengths": "cached", "histogram": "compute"}
    assert plan["histogram"].reasons == ["histogram.bucket: 10 -> 5"]


def test_fields_that_cannot_change_output_do_not_invalidate(toy_pipeline: dict, toy_stages: dict) -> None:
    build(toy_pipeline["config"], toy_stages)
    text = (
        toy_pipeline["config"].read_text().replace("seed = 7", 'seed = 7\nread_batch_lines = 17\ndownload_dir = "/tmp/elsewhere"')
    )
    toy_pipeline["config"].write_text(text)
    assert actions(plan_for(toy_pipeline["config"], toy_stages))["corpus"] == "cached"


def test_changed_source_file_recomputes_corpus(toy_pipeline: dict, toy_stages: dict) -> None:
    build(toy_pipeline["config"], toy_stages)
    for path in toy_pipeline["text"].values():
        with open(path, "a", encoding="utf-8") as f:
            f.write("one more line\n")
    plan = plan_for(toy_pipeline["config"], toy_stages)
    assert actions(plan) == {"corpus": "compute", "lengths": "compute", "histogram": "compute"}
    text = toy_pipeline["text"]
    assert plan["corpus"].reasons == [
        f"source pairs.en: {text['en'].resolve()} changed",
        f"source pairs.kk: {text['kk'].resolve()} changed",
    ]


def test_only_builds_missing_inputs_and_nothing_downstream(toy_pipeline: dict, toy_stages: dict) -> None:
    plan = build(toy_pipeline["config"], toy_stages, only="lengths")
    assert actions(plan) == {"corpus": "compute", "lengths": "compute", "histogram": "skip"}
    assert plan["corpus"].reasons[0].startswith("needed as input")
    plan = plan_for(toy_pipeline["config"], toy_stages, only="histogram")
    assert actions(plan) == {"corpus": "cached", "lengths": "cached", "histogram": "compute"}


def test_from_runs_a_stage_and_everything_downstream(toy_pipeline: dict, toy_stages: dict) -> None:
    build(toy_pipeline["config"], toy_stages)
    write_config(toy_pipeline["config"], toy_pipeline["root"], toy_pipeline["text"], unit="bytes")
    plan = plan_for(toy_pipeline["config"], toy_stages, from_stage="histogram")
    # histogram's input (lengths with the new unit) is not built, so it is built as an input
    assert actions(plan) == {"corpus": "cached", "lengths": "compute", "histogram": "compute"}
    plan = plan_for(toy_pipeline["config"], toy_stages, from_stage="lengths")
    assert actions(plan) == {"corpus": "cached", "lengths": "compute", "histogram": "compute"}


def test_force_recomputes_a_cached_stage(toy_pipeline: dict, toy_stages: dict) -> None:
    build(toy_pipeline["config"], toy_stages)
    store = ArtifactStore(toy_pipeline["root"])
    corpus = plan_for(toy_pipeline["config"], toy_stages)["corpus"]
    before = store.manifest("corpus", corpus.key)
    plan = build(toy_pipeline["config"], toy_stages, force=["corpus"])
    # a new version beside the cached one, and everything downstream rebuilt on it
    assert actions(plan) == {"corpus": "compute", "lengths": "compute", "histogram": "compute"}
    assert plan["corpus"].reasons == ["forced (--force): a new version beside the current one"]
    rebuilt = store.manifest("corpus", plan["corpus"].key)
    assert rebuilt.rebuild_of == corpus.key and rebuilt.attempt == 1
    assert store.manifest("corpus", corpus.key) == before  # the cached version is kept as it was
    assert [f.sha256 for f in rebuilt.files] == [f.sha256 for f in before.files]  # deterministic


def test_bad_options_are_rejected(toy_pipeline: dict, toy_stages: dict) -> None:
    with pytest.raises(ValueError, match="--only"):
        plan_for(toy_pipeline["config"], toy_stages, only="translate")
    with pytest.raises(ValueError, match="cannot be combined"):
        plan_for(toy_pipeline["config"], toy_stages, only="lengths", from_stage="corpus")


def test_plan_writes_nothing(toy_pipeline: dict, toy_stages: dict) -> None:
    plan_for(toy_pipeline["config"], toy_stages)
    root = toy_pipeline["root"]
    assert not root.exists() or not any(p.is_file() for p in root.rglob("*"))
    assert os.listdir(toy_pipeline["tmp"]) != []


def test_optional_input_joins_the_key_only_when_the_pipeline_has_that_stage(
    toy_pipeline: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage with an optional input (align reads `translate` when present) is keyed on it
    only when the pipeline includes it, and is rebuilt when that input comes or goes."""
    monkeypatch.setenv("XLEMBED_STAGES", "tests.flows.toy_stages:OPTIONAL_INPUT_STAGES")
    from flows.stages import stage_registry

    stages = stage_registry()
    config = toy_pipeline["config"]
    with_lengths = build(config, stages)
    assert set(with_lengths["histogram"].input_keys) == {"corpus", "lengths"}

    text = config.read_text(encoding="utf-8").replace('name = "toy"', 'name = "toy"\nstages = ["corpus", "histogram"]')
    config.write_text(text, encoding="utf-8")
    without = build(config, stages)
    assert set(without["histogram"].input_keys) == {"corpus"}
    assert without["histogram"].key != with_lengths["histogram"].key
    assert without["histogram"].action == "compute"
    store = ArtifactStore(str(toy_pipeline["root"]))
    a = store.read_table("histogram", with_lengths["histogram"].key).sort_by("bucket")
    b = store.read_table("histogram", without["histogram"].key).sort_by("bucket")
    assert a.equals(b)  # the same lengths either way, so the same histogram
