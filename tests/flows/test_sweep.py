"""Sweeps: grid parsing, variant configs, deduplicated plans, and the xlembed-sweep flow on the toy stages."""

from __future__ import annotations

import json
import threading
import time
import tomllib
from pathlib import Path

import pytest
from conftest import write_config
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from flows.config import load_config
from flows.plan import make_plan
from flows.sweep import (
    GridError,
    SweepPlan,
    VariantPlan,
    apply_override,
    load_grid,
    parse_key,
    pipeline_name,
    plan_sweep,
    run_variants,
    toml_document,
    variant_configs,
)
from storage import ArtifactStore


def write_grid(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- grid files


def test_grid_product_named_variants_seeds_and_groups(tmp_path: Path) -> None:
    grid = load_grid(
        write_grid(
            tmp_path / "g.toml",
            """
baseline = "small_bucket-5"
seeds = [1, 2]
seed_keys = ["corpus.seed"]
[common]
lengths.shards = 1
[grid]
"histogram.bucket" = [5, 10]
[[variants]]
name = "small"
[[variants]]
name = "Bytes!"
"lengths.unit" = "bytes"
""",
        )
    )
    names = [v.name for v in grid.variants]
    assert names == [
        "small_bucket-5_seed-1", "small_bucket-5_seed-2", "small_bucket-10_seed-1", "small_bucket-10_seed-2",
        "bytes_bucket-5_seed-1", "bytes_bucket-5_seed-2", "bytes_bucket-10_seed-1", "bytes_bucket-10_seed-2",
    ]
    first = grid.variants[0]
    assert first.overrides == {"lengths.shards": 1, "histogram.bucket": 5, "corpus.seed": 1}
    assert first.group == "small_bucket-5" and first.seeds == {"corpus.seed": 1}
    assert grid.variant("bytes_bucket-10_seed-2").overrides["lengths.unit"] == "bytes"
    assert grid.baseline == "small_bucket-5" and grid.name == "g"


def test_seed_keys_in_the_grid_are_found_by_name(tmp_path: Path) -> None:
    grid = load_grid(write_grid(tmp_path / "g.toml", '[grid]\n"corpus.seed" = [1, 2]\n"histogram.bucket" = [5]\n'))
    assert grid.seed_keys == ("corpus.seed",)
    assert {v.group for v in grid.variants} == {"bucket-5"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[grid]\n"histogram.bucket" = 5\n', "[grid] histogram.bucket: expected a non-empty list"),
        ('[grid]\n"histogram.bucket" = []\n', "expected a non-empty list"),
        ('seeds = [1]\n[grid]\n"histogram.bucket" = [5]\n', "seeds needs seed_keys"),
        ('[grid]\n"pipeline.name" = ["a"]\n', "pipeline.name is set by the sweep"),
        ('gird = 1\n', "unknown key(s) ['gird']"),
        ('baseline = "nope"\n[grid]\n"histogram.bucket" = [5]\n', "baseline 'nope' is neither a variant nor a seed group"),
        ('[[variants]]\nname = "a"\n[[variants]]\nname = "A"\n', "variant names collide"),
        ('[[variants]]\n"histogram.bucket" = 3\n', "needs name"),
        ('[grid]\n"histogram..bucket" = [1]\n', "malformed config key"),
        ("[grid\n", "malformed TOML"),
    ],
)
def test_bad_grid_files_name_the_file_and_problem(tmp_path: Path, text: str, message: str) -> None:
    path = write_grid(tmp_path / "bad.toml", text)
    with pytest.raises(GridError) as error:
        load_grid(path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_keys_and_overrides() -> None:
    assert parse_key("corpus.sources[1].sample") == ("corpus", "sources", 1, "sample")
    assert parse_key("corpus.sources.1.files.en") == ("corpus", "sources", 1, "files", "en")
    raw = {"corpus": {"sources": [{"name": "a"}, {"name": "b"}]}}
    apply_override(raw, "corpus.sources[1].sample", 10)
    apply_override(raw, "evaluate.encoder.pooling", "cls")
    assert raw == {"corpus": {"sources": [{"name": "a"}, {"name": "b", "sample": 10}]}, "evaluate": {"encoder": {"pooling": "cls"}}}
    with pytest.raises(KeyError, match=r"only 2 items"):
        apply_override(raw, "corpus.sources[2].sample", 1)
    with pytest.raises(KeyError, match=r"is a str in the config"):
        apply_override(raw, "corpus.sources[0].name.x", 1)
    assert pipeline_name("toy", "bucket-5") == "toy--bucket-5"
    long = pipeline_name("toy", "x" * 80)
    assert len(long) <= 64 and long != pipeline_name("toy", "x" * 81)


TOML_SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=12),
)
TOML_VALUES = st.recursive(
    TOML_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=3),
    max_leaves=12,
)


@settings(deadline=None, max_examples=60)
@given(st.dictionaries(st.text(min_size=1, max_size=8), st.dictionaries(st.text(min_size=1, max_size=8), TOML_VALUES, max_size=4), max_size=3))
def test_variant_configs_survive_the_toml_round_trip(raw: dict) -> None:
    assert tomllib.loads(toml_document(raw)) == raw


# ----------------------------------------------------------------------------- variant configs and plans


def test_variant_configs_validate_like_config_files_and_errors_name_variant_and_key(toy_pipeline: dict) -> None:
    tmp = toy_pipeline["tmp"]
    grid = load_grid(write_grid(tmp / "g.toml", '[grid]\n"histogram.bucket" = [5, 10]\n'))
    configs = variant_configs(toy_pipeline["config"], grid)
    assert {n: c.name for n, c in configs.items()} == {"bucket-5": "toy--bucket-5", "bucket-10": "toy--bucket-10"}
    assert configs["bucket-5"].stage_configs["histogram"].bucket == 5
    assert configs["bucket-5"].settings.root == str(toy_pipeline["root"])

    bad = load_grid(write_grid(tmp / "bad.toml", '[[variants]]\nname = "typo"\n"histogram.buckets" = 5\n[[variants]]\nname = "word"\n"histogram.bucket" = "five"\n'))
    with pytest.raises(GridError) as error:
        variant_configs(toy_pipeline["config"], bad)
    text = str(error.value)
    assert str(tmp / "bad.toml") in text and "variant 'typo'" in text and "histogram.buckets: unknown key" in text
    unknown = load_grid(write_grid(tmp / "unknown.toml", '[grid]\n"nosuch.x" = [1]\n'))
    with pytest.raises(GridError, match=r"unknown section\(s\) \[nosuch\]"):
        variant_configs(toy_pipeline["config"], unknown)
    index = load_grid(write_grid(tmp / "index.toml", '[grid]\n"corpus.sources[3].sample" = [1]\n'))
    with pytest.raises(GridError, match=r"variant 'sample-1': corpus\.sources\[3\]: the config's corpus\.sources has only 1 items"):
        variant_configs(toy_pipeline["config"], index)


def test_variant_keys_equal_a_hand_written_config_with_the_same_values(toy_pipeline: dict) -> None:
    """A variant is cached under the key a plain config with its values gets: `xlembed run` reuses it."""
    tmp = toy_pipeline["tmp"]
    grid = load_grid(write_grid(tmp / "g.toml", '[grid]\n"histogram.bucket" = [5, 10]\n"lengths.unit" = ["chars", "bytes"]\n'))
    store = ArtifactStore(toy_pipeline["root"])
    plan = plan_sweep(toy_pipeline["config"], grid, store, toy_pipeline_stages())
    by_name = {p.variant.name: p for p in plan.variants}
    hand = write_config(tmp / "hand.toml", toy_pipeline["root"], toy_pipeline["text"], unit="bytes", bucket=5)
    expected = {s.stage: s.key for s in make_plan(load_config(hand), store, toy_pipeline_stages())}
    assert by_name["bucket-5_unit-bytes"].keys() == expected

    counts = plan.counts()
    # corpus is shared by all 4 variants, lengths by 2 each, histogram is per variant
    assert len(plan.distinct()) == 1 + 2 + 4
    assert counts["distinct_compute"] == 7 and counts["distinct_cached"] == 0
    assert counts["stage_runs"] == counts["compute_without_sharing"] == 12
    assert counts["variants"]["bucket-5_unit-chars"] == {"cached": 0, "compute": 3, "shared": 2}


def toy_pipeline_stages() -> dict:
    from flows.stages import stage_registry

    return stage_registry()


def test_shared_steps_compute_once_even_when_variants_reach_them_together(toy_pipeline: dict) -> None:
    tmp = toy_pipeline["tmp"]
    grid = load_grid(write_grid(tmp / "g.toml", '[grid]\n"histogram.bucket" = [2, 3, 4, 5, 6, 7]\n'))
    store = ArtifactStore(toy_pipeline["root"])
    plan = plan_sweep(toy_pipeline["config"], grid, store, toy_pipeline_stages())
    calls: list[tuple[str, str]] = []
    lock = threading.Lock()

    def run_step(config, store, step) -> None:
        from tasks.stage import run_stage

        with lock:
            calls.append((step.stage, step.key))
        time.sleep(0.05)  # let every variant's driver arrive at the shared step meanwhile
        run_stage(store, toy_pipeline_stages()[step.stage], config.stage_configs[step.stage], step.input_keys)

    outcomes = run_variants(plan, store, run_step)
    assert all(o.ok for o in outcomes.values()), outcomes
    assert sorted(calls) == sorted(set(calls))  # no (stage, key) twice
    assert [stage for stage, _ in calls].count("corpus") == 1 and [stage for stage, _ in calls].count("histogram") == 6
    refs = {(r.pipeline, r.stage): r.key for r in store.list_refs()}
    for vplan in plan.variants:
        assert {stage: refs[(vplan.pipeline, stage)] for stage in vplan.keys()} == vplan.keys()
    # planned again, everything is cached
    again = plan_sweep(toy_pipeline["config"], grid, store, toy_pipeline_stages())
    assert again.counts()["distinct_compute"] == 0


def test_a_failing_variant_does_not_stop_the_others(toy_pipeline: dict) -> None:
    tmp = toy_pipeline["tmp"]
    grid = load_grid(write_grid(tmp / "g.toml", '[grid]\n"histogram.bucket" = [5, 10]\n'))
    store = ArtifactStore(toy_pipeline["root"])
    plan = plan_sweep(toy_pipeline["config"], grid, store, toy_pipeline_stages())

    def run_step(config, store, step) -> None:
        from tasks.stage import run_stage

        if step.stage == "histogram" and config.stage_configs["histogram"].bucket == 10:
            raise ValueError("bucket 10 is broken")
        run_stage(store, toy_pipeline_stages()[step.stage], config.stage_configs[step.stage], step.input_keys)

    outcomes = run_variants(plan, store, run_step)
    assert outcomes["bucket-5"].ok and set(outcomes["bucket-5"].keys) == {"corpus", "lengths", "histogram"}
    assert outcomes["bucket-10"].error == "ValueError: bucket 10 is broken"
    assert set(outcomes["bucket-10"].keys) == {"corpus", "lengths"}
    # nothing may compute in a run that computes nothing
    fresh = SweepPlan(grid, [VariantPlan(p.variant, p.config, p.steps) for p in plan.variants])
    assert "is not cached" in (run_variants(fresh, store, None)["bucket-10"].error or "")


# ----------------------------------------------------------------------------- the flow and the CLI


@pytest.mark.slow
def test_sweep_flow_builds_each_shared_artifact_once_and_writes_the_report(toy_pipeline: dict, prefect_server: None) -> None:
    from prefect.client.orchestration import get_client

    from flows.sweep import sweep_flow

    tmp = toy_pipeline["tmp"]
    grid_path = write_grid(
        tmp / "toy-grid.toml",
        'baseline = "unit-chars_bucket-5"\n[grid]\n"lengths.unit" = ["chars", "bytes"]\n"histogram.bucket" = [5, 10]\n',
    )
    state = sweep_flow(config_path=str(toy_pipeline["config"]), grid_path=str(grid_path), return_state=True)
    result = state.result()
    assert set(result) == {"unit-chars_bucket-5", "unit-chars_bucket-10", "unit-bytes_bucket-5", "unit-bytes_bucket-10"}
    assert len({keys["corpus"] for keys in result.values()}) == 1
    assert len({keys["lengths"] for keys in result.values()}) == 2
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    this_run = FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))

    def shard_runs() -> list[str]:
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(flow_run_filter=this_run, limit=200)
        return [r.name for r in runs if r.name.startswith(("corpus:", "lengths:", "histogram:")) and not r.name.endswith(":commit")]

    # task runs reach the API asynchronously (events): wait until the last ones are recorded
    deadline = time.monotonic() + 60
    while sum(n.startswith("histogram:") for n in shard_runs()) < 4 and time.monotonic() < deadline:
        time.sleep(0.5)
    names = shard_runs()
    store = ArtifactStore(toy_pipeline["root"])
    corpus_shards = len(store.manifest("corpus", result["unit-chars_bucket-5"]["corpus"]).shards)
    assert sum(n.startswith("corpus:") for n in names) == corpus_shards  # once, not once per variant
    assert sum(n.startswith("lengths:") for n in names) == 2 * 2  # two keys, two shards each
    assert sum(n.startswith("histogram:") for n in names) == 4

    folder = toy_pipeline["root"] / "sweeps" / "toy-grid"
    summary = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    assert [v["name"] for v in summary["variants"]] == list(result)
    assert (folder / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert "unit-bytes_bucket-10" in (folder / "report.md").read_text(encoding="utf-8")
    assert tomllib.loads((folder / "variants" / "unit-bytes_bucket-10.toml").read_text(encoding="utf-8"))["histogram"]["bucket"] == 10
    with get_client(sync_client=True) as client:
        keys = {a.key for a in client.read_artifacts()}
    assert {"toy-grid-sweep", "toy-grid-sweep-report"} <= keys

    # the CLI's plan over the same grid: everything is cached now
    shown = CliRunner().invoke(app(), ["plan", str(toy_pipeline["config"]), "--grid", str(grid_path)])
    assert shown.exit_code == 0, shown.output
    assert "7 distinct stage runs: 7 cached, 0 to compute" in " ".join(shown.output.split())


def app():
    from flows.cli import app as cli_app

    return cli_app


def test_cli_plan_and_dry_run_count_shared_stage_runs_once(toy_pipeline: dict) -> None:
    tmp = toy_pipeline["tmp"]
    grid_path = write_grid(tmp / "g.toml", '[grid]\n"lengths.unit" = ["chars", "bytes"]\n"histogram.bucket" = [5, 10]\n')
    shown = CliRunner().invoke(app(), ["plan", str(toy_pipeline["config"]), "--grid", str(grid_path)])
    assert shown.exit_code == 0, shown.output
    flat = " ".join(shown.output.split())
    assert "4 variants" in flat and "7 distinct stage runs: 0 cached, 7 to compute (12 without sharing)" in flat
    dry = CliRunner().invoke(app(), ["sweep", str(toy_pipeline["config"]), "--grid", str(grid_path), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "7 to compute" in " ".join(dry.output.split())
    assert not (toy_pipeline["root"] / "corpus").exists()  # a dry run computes nothing
    bad = CliRunner().invoke(app(), ["sweep", str(toy_pipeline["config"]), "--grid", str(grid_path), "--baseline", "nope", "--dry-run"])
    assert bad.exit_code == 2 and "baseline 'nope'" in bad.output
