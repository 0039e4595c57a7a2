"""Sweeps: grid parsing, variant configs, deduplicated plans, and the xlembed-sweep flow on the toy stages."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import tomllib
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from flows.config import PipelineConfig, PipelineSettings, load_config
from flows.plan import make_plan
from flows.sweep import (
    GridError,
    SweepPlan,
    VariantOutcome,
    VariantPlan,
    apply_override,
    load_grid,
    parse_key,
    pipeline_name,
    plan_sweep,
    resolve_seeds,
    run_variants,
    toml_document,
    variant_configs,
    write_report,
)
from storage import ArtifactStore
from storage.refs import list_refs
from tasks.evaluate.schema import ITEMS_SCHEMA, METRICS_SCHEMA
from tasks.stage import ShardSpec, Stage, run_stage
from tasks.stage_config import StageConfig
from tests.flows.toy_pipeline import write_config


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
        "small_bucket-5_seed-1",
        "small_bucket-5_seed-2",
        "small_bucket-10_seed-1",
        "small_bucket-10_seed-2",
        "bytes_bucket-5_seed-1",
        "bytes_bucket-5_seed-2",
        "bytes_bucket-10_seed-1",
        "bytes_bucket-10_seed-2",
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


TRAINING_CONFIG = """
[pipeline]
name = "p"
stages = ["corpus", "train", "evaluate"]
[corpus]
seed = 7
[train]
seed = 0
"""
SEEDLESS_GRID = """
baseline = "tr"
[[variants]]
name = "base"
"pipeline.stages" = ["corpus", "evaluate"]
[[variants]]
name = "tr"
"train.objectives" = ["tr"]
[[variants]]
name = "fixed"
"train.seed" = 5
"""


def test_grids_without_seeds_run_each_training_variant_on_three_seeds(tmp_path: Path) -> None:
    config = write_grid(tmp_path / "train.toml", TRAINING_CONFIG)
    path = write_grid(tmp_path / "g.toml", SEEDLESS_GRID)
    grid = load_grid(path, config=config)
    assert grid.seeding == "default" and grid.seed_keys == ("train.seed",)
    # base trains nothing (no seed to vary); fixed sets its seed itself; tr runs seeds 1, 2, 3
    assert [(v.name, v.group, v.seeds) for v in grid.variants] == [
        ("base", "base", {}),
        ("tr_seed-1", "tr", {"train.seed": 1}),
        ("tr_seed-2", "tr", {"train.seed": 2}),
        ("tr_seed-3", "tr", {"train.seed": 3}),
        ("fixed", "fixed", {}),
    ]
    assert grid.variant("tr_seed-2").overrides == {"train.objectives": ["tr"], "train.seed": 2}
    assert grid.baseline == "tr"  # the variant's name is now its seed group's
    # read before the config: the default waits for it, and every later step applies it
    pending = load_grid(path)
    assert pending.seeding == "pending" and [v.name for v in pending.variants] == ["base", "tr", "fixed"]
    assert resolve_seeds(pending, config).variants == grid.variants
    assert pending.check_baseline("tr_seed-2") == "tr_seed-2"  # `--baseline` may name a seeded variant before the config is read
    assert resolve_seeds(grid, tmp_path / "nonexistent.toml") is grid  # nothing pending: the config is not read
    # opting out, a seed axis, explicit seeds, or a config without [train]: no default
    opt_out = load_grid(write_grid(tmp_path / "one.toml", "seeds = []\n" + SEEDLESS_GRID), config=config)
    assert opt_out.seeding == "none" and [v.name for v in opt_out.variants] == ["base", "tr", "fixed"]
    axis = load_grid(write_grid(tmp_path / "axis.toml", '[grid]\n"train.seed" = [4, 5]\n'), config=config)
    assert axis.seeding == "grid" and [v.name for v in axis.variants] == ["seed-4", "seed-5"]
    explicit = load_grid(write_grid(tmp_path / "explicit.toml", 'seeds = [8, 9]\nseed_keys = ["corpus.seed"]\n'), config=config)
    assert [(v.name, v.seeds) for v in explicit.variants] == [("seed-8", {"corpus.seed": 8}), ("seed-9", {"corpus.seed": 9})]
    untrained = write_grid(tmp_path / "untrained.toml", TRAINING_CONFIG.replace("[train]\nseed = 0\n", ""))
    assert [v.name for v in load_grid(path, config=untrained).variants] == ["base", "tr", "fixed"]
    # explicit train seeds: the untrained base still runs once (a train seed means nothing to it)
    seeded = load_grid(
        write_grid(tmp_path / "seeded.toml", 'seed_keys = ["train.seed"]\nseeds = [42, 1]\n' + SEEDLESS_GRID), config=config
    )
    assert [v.name for v in seeded.variants if v.group == "base"] == ["base"]
    assert [v.name for v in seeded.variants if v.group == "tr"] == ["tr_seed-42", "tr_seed-1"]


def test_only_cuts_the_grid_to_named_variants_and_keeps_the_baseline(tmp_path: Path) -> None:
    config = write_grid(tmp_path / "train.toml", TRAINING_CONFIG)
    grid = load_grid(write_grid(tmp_path / "g.toml", SEEDLESS_GRID), config=config)
    assert grid.select([]) is grid
    # a [[variants]] name keeps all its seeds; the grid's baseline (tr) comes along for the report
    cut = grid.select(["fixed"])
    assert [v.name for v in cut.variants] == ["tr_seed-1", "tr_seed-2", "tr_seed-3", "fixed"]
    assert cut.name == "g-only-fixed" and cut.baseline == "tr"
    assert [v.overrides for v in cut.variants] == [
        grid.variant(v.name).overrides for v in cut.variants
    ]  # same keys as in the whole grid
    # a --baseline given on the command line replaces the grid's; one seeded run can be named alone
    assert [v.name for v in grid.select(["tr_seed-2"], baseline="base").variants] == ["base", "tr_seed-2"]
    with pytest.raises(GridError, match=r"g.toml: --only 'nope': no such variant; the grid has base, tr, fixed"):
        grid.select(["nope", "base"])
    with pytest.raises(GridError, match="after the pipeline config decided the seeds"):
        load_grid(tmp_path / "g.toml").select(["tr"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[grid]\n"histogram.bucket" = 5\n', "[grid] histogram.bucket: expected a non-empty list"),
        ('[grid]\n"histogram.bucket" = []\n', "expected a non-empty list"),
        ('seeds = [1]\n[grid]\n"histogram.bucket" = [5]\n', "seeds needs seed_keys"),
        ("seeds = 3\n", "seeds must be a list (empty: one run per variant)"),
        ('[grid]\n"pipeline.name" = ["a"]\n', "pipeline.name is set by the sweep"),
        ("gird = 1\n", "unknown key(s) ['gird']"),
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
    assert raw == {
        "corpus": {"sources": [{"name": "a"}, {"name": "b", "sample": 10}]},
        "evaluate": {"encoder": {"pooling": "cls"}},
    }
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


@pytest.mark.slow
@settings(deadline=None, max_examples=60)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8), st.dictionaries(st.text(min_size=1, max_size=8), TOML_VALUES, max_size=4), max_size=3
    )
)
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

    bad = load_grid(
        write_grid(
            tmp / "bad.toml",
            '[[variants]]\nname = "typo"\n"histogram.buckets" = 5\n[[variants]]\nname = "word"\n"histogram.bucket" = "five"\n',
        )
    )
    with pytest.raises(GridError) as error:
        variant_configs(toy_pipeline["config"], bad)
    text = str(error.value)
    assert str(tmp / "bad.toml") in text and "variant 'typo'" in text and "histogram.buckets: unknown key" in text
    unknown = load_grid(write_grid(tmp / "unknown.toml", '[grid]\n"nosuch.x" = [1]\n'))
    with pytest.raises(GridError, match=r"unknown section\(s\) \[nosuch\]"):
        variant_configs(toy_pipeline["config"], unknown)
    index = load_grid(write_grid(tmp / "index.toml", '[grid]\n"corpus.sources[3].sample" = [1]\n'))
    with pytest.raises(
        GridError, match=r"variant 'sample-1': corpus\.sources\[3\]: the config's corpus\.sources has only 1 items"
    ):
        variant_configs(toy_pipeline["config"], index)


def test_variants_are_validated_in_memory_with_paths_from_the_base_config_folder(
    toy_pipeline: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No variant file is written and read back (they used to go through a temporary folder);
    relative paths of the base config still resolve against its own folder."""
    import tempfile

    tmp = toy_pipeline["tmp"]
    folder = tmp / "configs"
    folder.mkdir()
    base = folder / "relative.toml"
    base.write_text(
        toy_pipeline["config"].read_text(encoding="utf-8").replace(f'root = "{toy_pipeline["root"]}"', 'root = "../store"')
        .replace(str(toy_pipeline["text"]["en"]), "../data/train.en").replace(str(toy_pipeline["text"]["kk"]), "../data/train.kk"),
        encoding="utf-8",
    )  # fmt: skip
    grid = load_grid(write_grid(tmp / "g.toml", '[grid]\n"histogram.bucket" = [5, 10]\n'))
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp / "no-temporary-files-here"))  # a temporary file would fail
    configs = variant_configs(base, grid)
    assert {c.settings.root for c in configs.values()} == {str(tmp / "store")}
    files = {name: c.stage_configs["corpus"].sources[0].files for name, c in configs.items()}
    assert files["bucket-5"] == files["bucket-10"] == {"en": str(tmp / "data" / "train.en"), "kk": str(tmp / "data" / "train.kk")}
    assert (
        configs["bucket-10"].raw["histogram"]["bucket"] == 10 and configs["bucket-10"].raw["pipeline"]["name"] == "toy--bucket-10"
    )
    assert not list(tmp.rglob("*bucket-*.toml"))


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
    refs = {(r.pipeline, r.stage): r.key for r in list_refs(store)}
    for vplan in plan.variants:
        assert {stage: refs[(vplan.pipeline, stage)] for stage in vplan.keys()} == vplan.keys()
    # planned again, everything is cached
    again = plan_sweep(toy_pipeline["config"], grid, store, toy_pipeline_stages())
    assert again.counts()["distinct_compute"] == 0


def test_distinct_stage_runs_are_bounded_by_the_pipelines_max_workers(toy_pipeline: dict) -> None:
    tmp = toy_pipeline["tmp"]
    grid = load_grid(write_grid(tmp / "g.toml", '[grid]\n"histogram.bucket" = [2, 3, 4, 5, 6, 7]\n'))
    store = ArtifactStore(toy_pipeline["root"])
    plan = plan_sweep(toy_pipeline["config"], grid, store, toy_pipeline_stages())
    assert plan.variants[0].config.settings.max_workers == 2
    lock = threading.Lock()
    running = [0]
    most = [0]

    def run_step(config, store, step) -> None:
        from tasks.stage import run_stage

        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)  # six histogram runs arrive together: at most two may be inside
        run_stage(store, toy_pipeline_stages()[step.stage], config.stage_configs[step.stage], step.input_keys)
        with lock:
            running[0] -= 1

    outcomes = run_variants(plan, store, run_step)
    assert all(o.ok for o in outcomes.values()), outcomes
    assert most[0] == 2


@pytest.mark.parametrize("max_workers", [1, 2])
def test_a_variant_finishes_its_steps_before_later_variants_start_theirs(toy_pipeline: dict, max_workers: int) -> None:
    """Each variant computes lengths and a histogram of its own after a shared corpus: with the
    slots taken, a variant keeps its slot from its first computed step to its last, so a sweep
    stopped part-way leaves whole variants (trained and evaluated), not every training and no
    evaluation. With one slot, the computations come out variant by variant, in grid order once
    the shared step is done."""
    tmp = toy_pipeline["tmp"]
    config = write_config(tmp / "toy1.toml", toy_pipeline["root"], toy_pipeline["text"], max_workers=max_workers)
    grid = load_grid(write_grid(tmp / "g.toml", '[grid]\n"lengths.shards" = [1, 2, 3, 4]\n'))
    store = ArtifactStore(toy_pipeline["root"])
    plan = plan_sweep(config, grid, store, toy_pipeline_stages())
    owner = {(step.stage, step.key): vplan.variant.name for vplan in plan.variants for step in vplan.steps}
    assert len({key for (stage, key) in owner if stage != "corpus"}) == 8  # nothing shared but the corpus
    lock = threading.Lock()
    events: list[tuple[str, str, str]] = []  # (start|end, variant, stage)
    running = [0]
    most = [0]

    def run_step(config, store, step) -> None:
        with lock:
            events.append(("start", owner[(step.stage, step.key)], step.stage))
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)  # every driver is waiting for a slot meanwhile
        run_stage(store, toy_pipeline_stages()[step.stage], config.stage_configs[step.stage], step.input_keys)
        with lock:
            running[0] -= 1
            events.append(("end", owner[(step.stage, step.key)], step.stage))

    outcomes = run_variants(plan, store, run_step)
    assert all(o.ok for o in outcomes.values()), outcomes
    assert most[0] <= max_workers
    computed = [(variant, stage) for kind, variant, stage in events if kind == "start" and stage == "histogram"]
    assert len(computed) == 4
    if max_workers == 1:
        # one slot: the starts come in runs, one variant's steps together (shared ones excepted)
        own = [variant for kind, variant, stage in events if kind == "start" and stage != "corpus"]
        runs = [v for i, v in enumerate(own) if i == 0 or own[i - 1] != v]
        assert len(runs) == len(set(runs)), own
        # and in grid order after the variant that computed the shared corpus (it keeps its slot)
        order = [vplan.variant.name for vplan in plan.variants]
        assert runs[1:] == sorted(runs[1:], key=order.index), runs


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


# ----------------------------------------------------------------------------- the report's intervals


QUERIES = 200  # per direction and language pair


def outcomes(rate: float, shift: int = 0) -> pa.Table:
    """Per-query outcomes (ITEMS_SCHEMA) for kaz-eng and tel-eng retrieval: a `rate` share right, which
    queries depending on `shift` (seeds of one variant are right on different sentences)."""
    n = 2 * QUERIES
    right = (np.arange(n) + shift) % 100 < round(rate * 100)
    return pa.table(
        {
            "benchmark": ["retrieval"] * (2 * n),
            "dataset": ["corpus-dev"] * (2 * n),
            "src_lang": ["kaz_Cyrl"] * n + ["tel_Telu"] * n,
            "tgt_lang": ["eng_Latn"] * (2 * n),
            "direction": (["src_tgt"] * QUERIES + ["tgt_src"] * QUERIES) * 2,
            "item": np.tile(np.arange(QUERIES, dtype=np.int32), 4),
            "correct": np.tile(right, 2),
            "margin": np.zeros(2 * n, dtype=np.float32),
        },
        schema=ITEMS_SCHEMA,
    )


def metrics_of(items: pa.Table) -> pa.Table:
    from tasks.evaluate.groups import LANGUAGE_GROUPS, group_average_rows, rows_table

    per_pair = (
        pl.from_arrow(items)
        .group_by(["benchmark", "dataset", "src_lang", "tgt_lang"], maintain_order=True)
        .agg(pl.col("correct").mean().alias("value"), (pl.len() // 2).alias("n"))
    )
    rows = [r | {"metric": "accuracy_mean"} for r in per_pair.iter_rows(named=True)]
    return rows_table(group_average_rows(rows, [LANGUAGE_GROUPS["wacse-4"]]))


class FakeEvaluateConfig(StageConfig):
    variant: str


def commit_evaluations(store: ArtifactStore, evaluations: dict[str, dict[str, pa.Table]]) -> dict[str, str]:
    """Variant -> key of an evaluate artifact committed through the real store: `metrics` as its rows,
    every other entry as an attached Parquet file of that name (items.parquet, ...)."""

    def build(config: FakeEvaluateConfig, inputs, shard, context):
        tables = evaluations[config.variant]
        for name, table in tables.items():
            if name != "metrics":
                local = context.workdir / name.replace("/", "--")
                pq.write_table(table, local)
                context.attach(name, local)
        yield tables["metrics"]

    stage = Stage("evaluate", "1", FakeEvaluateConfig, METRICS_SCHEMA, lambda config, inputs: [ShardSpec("all")], build)
    return {name: run_stage(store, stage, FakeEvaluateConfig(variant=name), {})[1].key for name in evaluations}


REPORT_GRID = """
baseline = "tr"
[[variants]]
name = "base"
"pipeline.stages" = ["corpus", "evaluate"]
[[variants]]
name = "tr"
[[variants]]
name = "awp"
"train.objectives" = ["tr", "awp"]
[[variants]]
name = "old"
"""


@pytest.mark.slow
def test_report_has_paired_intervals_the_untrained_base_and_a_figure(tmp_path: Path) -> None:
    config = write_grid(tmp_path / "train.toml", TRAINING_CONFIG)
    grid = load_grid(write_grid(tmp_path / "g.toml", REPORT_GRID), config=config)
    assert [v.name for v in grid.variants] == ["base"] + [f"{n}_seed-{s}" for n in ("tr", "awp", "old") for s in (1, 2, 3)]
    untrained = outcomes(0.5)
    beside = {"items/base_items.parquet": untrained, "report/base_metrics.parquet": metrics_of(untrained)}
    evaluations = {"base": {"metrics": metrics_of(untrained), "items.parquet": untrained}}
    for seed in (1, 2, 3):
        tr, awp = outcomes(0.6, shift=seed), outcomes(0.9, shift=seed)
        evaluations[f"tr_seed-{seed}"] = {"metrics": metrics_of(tr), "items.parquet": tr, **beside}
        evaluations[f"awp_seed-{seed}"] = {"metrics": metrics_of(awp), "items.parquet": awp, **beside}
        # evaluated before outcomes were recorded: metrics only, nothing attached
        evaluations[f"old_seed-{seed}"] = {"metrics": metrics_of(outcomes(0.61, shift=seed))}
    store = ArtifactStore(tmp_path / "artifacts")
    keys = commit_evaluations(store, evaluations)

    plans, outcomes_by_name = [], {}
    for variant in grid.variants:
        stages = ["corpus", "evaluate"] if variant.name == "base" else ["corpus", "train", "evaluate"]
        pipeline = pipeline_name("p", variant.name)
        plans.append(
            VariantPlan(
                variant, PipelineConfig(tmp_path / "none.toml", PipelineSettings(name=pipeline), dict.fromkeys(stages)), []
            )
        )
        outcomes_by_name[variant.name] = VariantOutcome(variant.name, pipeline, keys={"evaluate": keys[variant.name]})
    report = write_report(SweepPlan(grid, plans), store, outcomes_by_name)

    folder = tmp_path / "artifacts" / "sweeps" / "g"
    summary = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    assert summary["seeding"] == "default" and summary["variants"][1]["seeds"] == {"train.seed": 1}
    found = {(i["against"], i["row"], i["column"]): i for i in summary["intervals"]}
    mean = "retrieval/corpus-dev/mean/accuracy_mean"
    awp = found[("baseline", "awp", mean)]  # the awp seed group against the tr seed group: 90% vs 60%
    assert awp["delta"] == pytest.approx(30.0) and awp["significant"] is True and awp["low"] > 20
    assert awp["seeds"] == {"row": 3, "reference": 3} and awp["items"] == 2 * 2 * QUERIES
    old = found[("baseline", "old", mean)]
    assert old["delta"] == pytest.approx(1.0) and old["significant"] is None and old["low"] is None
    base_row = found[("baseline", "base", mean)]  # the untrained variant is a row like any other
    assert base_row["delta"] == pytest.approx(-10.0) and base_row["significant"] is True
    tr_vs_base = found[("untrained base", "tr", mean)]
    assert tr_vs_base["delta"] == pytest.approx(10.0) and tr_vs_base["significant"] is True
    assert ("untrained base", "base", mean) not in found  # the base is not compared with itself
    assert summary["untrained_base"][mean] == pytest.approx(0.5)

    md = (folder / "report.md").read_text(encoding="utf-8")
    assert md == report.markdown and "## Against the untrained base" in md and "variant base, whose pipeline trains nothing" in md
    assert "one seed" not in md.splitlines()[0]
    assert "+1.0 (no CI)" in next(line for line in md.splitlines() if line.startswith("| old |"))
    assert (folder / "intervals.png").read_bytes().startswith(b"\x89PNG")
    assert 'src="data:image/png;base64,' in (folder / "report.html").read_text(encoding="utf-8")

    # the same grid with seeds = []: one run per variant, said in the title
    single = dataclasses.replace(grid, seeding="none")
    again = write_report(SweepPlan(single, plans), store, outcomes_by_name)
    assert again.markdown.splitlines()[0].endswith("(one seed: differences are not claims)")


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
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey, FlowRunFilter, FlowRunFilterId

    this_run = FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))

    def shard_runs() -> list[str]:
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(flow_run_filter=this_run, limit=200)
        return [
            r.name for r in runs if r.name.startswith(("corpus:", "lengths:", "histogram:")) and not r.name.endswith(":commit")
        ]

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
    assert (
        tomllib.loads((folder / "variants" / "unit-bytes_bucket-10.toml").read_text(encoding="utf-8"))["histogram"]["bucket"]
        == 10
    )
    with get_client(sync_client=True) as client:
        keys = {a.key for a in client.read_artifacts()}
        links = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["toy-grid-sweep-store-index"])))
    assert {"toy-grid-sweep", "toy-grid-sweep-report"} <= keys
    # the store's index page, rewritten at the end: every variant's refs and the sweep's report
    index = toy_pipeline["root"] / "index.html"
    page = index.read_text(encoding="utf-8")
    assert all(f'<h3 id="pipeline-toy--{name}">' in page for name in result) and 'href="sweeps/toy-grid/report.html"' in page
    assert [(link.flow_run_id, link.data) for link in links] == [
        (state.state_details.flow_run_id, f"[{index.as_uri()}]({index.as_uri()})")
    ]

    # a cut of the same grid reuses every artifact and writes its report beside the whole grid's
    cut = sweep_flow(config_path=str(toy_pipeline["config"]), grid_path=str(grid_path), only=["unit-bytes_bucket-10"])
    assert cut == {name: result[name] for name in ("unit-chars_bucket-5", "unit-bytes_bucket-10")}
    cut_report = (toy_pipeline["root"] / "sweeps" / "toy-grid-only-unit-bytes-bucket-10" / "report.md").read_text(
        encoding="utf-8"
    )
    assert "unit-bytes_bucket-10" in cut_report and "unit-chars_bucket-10" not in cut_report
    assert "unit-chars_bucket-10" in (folder / "report.md").read_text(encoding="utf-8")  # the whole grid's report is untouched

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
    bad = CliRunner().invoke(
        app(), ["sweep", str(toy_pipeline["config"]), "--grid", str(grid_path), "--baseline", "nope", "--dry-run"]
    )
    assert bad.exit_code == 2 and "baseline 'nope'" in bad.output
    # --only: the named variants plus the baseline, repeated or comma-separated
    only = CliRunner().invoke(
        app(),
        [
            "sweep",
            str(toy_pipeline["config"]),
            "--grid",
            str(grid_path),
            "--only",
            "unit-bytes_bucket-10,unit-chars_bucket-10",
            "--baseline",
            "unit-chars_bucket-5",
            "--dry-run",
        ],
    )
    assert only.exit_code == 0, only.output
    flat = " ".join(only.output.split())
    assert (
        "sweep g-only-unit-bytes-bucket-10-unit-chars-bucket-10" in flat
        and "3 variants" in flat
        and "unit-bytes_bucket-5" not in flat
    )
    unknown = CliRunner().invoke(
        app(), ["sweep", str(toy_pipeline["config"]), "--grid", str(grid_path), "--only", "bucket-7", "--dry-run"]
    )
    assert unknown.exit_code == 2 and "--only 'bucket-7': no such variant" in unknown.output


def test_sweep_plan_notes_are_said_once_for_all_variants(toy_pipeline: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The notes of `xlembed plan` (hashing cost, key-scheme change) once per sweep, not per variant."""
    from flows.plan import Plan
    from storage import content_hash

    monkeypatch.setattr(content_hash, "RACY_NS", 0)  # files written a moment ago count as settled
    tmp = toy_pipeline["tmp"]
    grid = load_grid(write_grid(tmp / "g.toml", '[grid]\n"lengths.unit" = ["chars", "bytes"]\n"histogram.bucket" = [5, 10]\n'))
    store = ArtifactStore(toy_pipeline["root"])
    plan = plan_sweep(toy_pipeline["config"], grid, store, toy_pipeline_stages())
    # four variants planned in turn: the two source files are read once, then come from the index
    assert plan.notes() == [plan.notes()[0]] and plan.notes()[0].startswith("hashed 2 files (0.0 MB) in ")
    assert plan.notes()[0].endswith("; 6 unchanged from the index")

    # as if every variant's refs pointed at artifacts of key scheme 1: the 7 distinct stage runs
    # (corpus shared by all four variants, lengths by two each) are counted once each
    old = SweepPlan(
        grid,
        [
            VariantPlan(v.variant, v.config, Plan([dataclasses.replace(s, rekeyed=True) for s in v.steps], v.steps.hashing))
            for v in plan.variants
        ],
    )
    assert old.notes()[0] == (
        "key scheme v2 (content keys): 7 artifacts built under the old scheme will be rebuilt (once; see docs/operations.md, 'Content keys')"
    )

    shown = CliRunner().invoke(app(), ["sweep", str(toy_pipeline["config"]), "--grid", str(tmp / "g.toml"), "--dry-run"])
    assert shown.exit_code == 0, shown.output
    assert (
        shown.output.count("hashed ") == 1 and "0 files (0.0 MB)" in shown.output and "8 unchanged from the index" in shown.output
    )


def test_nested_tables_are_written_as_sections_a_person_can_edit() -> None:
    raw = {"pipeline": {"name": "p"}, "train": {"steps": 10, "objectives": {"translation_ranking": {"weight": 1.0}}}}
    text = toml_document(raw)
    assert "[train.objectives.translation_ranking]\nweight = 1.0" in text and "{" not in text
    assert tomllib.loads(text) == raw
