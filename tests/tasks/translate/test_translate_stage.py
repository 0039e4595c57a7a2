"""The translate stages end to end on a tiny random NLLB model converted with real CTranslate2."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError
from translate_testing import NO_FILTERS, POOL, SENTENCES, Setup, run_translate, translate_config

from flows.stages import stage_registry
from storage import ArtifactStore
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.stage import EmptyOutputError, run_shard, run_stage, stage_key
from tasks.translate import TRANSLATE_MODEL_STAGE, TRANSLATE_STAGE, engine
from tasks.translate import stage as translate_stage_module
from tasks.translate.config import TranslateConfig, TranslateModelConfig
from tasks.translate.layout import multiway_layout
from tasks.translate.model_stage import TranslationModelError

REPO = Path(__file__).resolve().parents[3]


def groups_of(table: pa.Table) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for row in table.to_pylist():
        assert row["lang"] not in out.setdefault(row["group_id"], {})
        out[row["group_id"]][row["lang"]] = row["text"]
    return out


def test_every_target_in_corpus_long_format(setup: Setup, tmp_path: Path) -> None:
    store = setup.store(tmp_path)
    manifest, table = run_translate(store, setup, translate_config())
    assert table.schema.names == CORPUS_SCHEMA.names
    rows = table.to_pylist()
    assert len(rows) == len(SENTENCES) * (1 + len(POOL)) == manifest.rows_out
    assert manifest.rows_in == len(SENTENCES)
    corpus = {r["group_id"]: r for r in store.read_table("corpus", setup.corpus_key).to_pylist() if r["lang"] == "eng_Latn"}
    groups = groups_of(table)
    assert sorted(groups) == sorted(corpus)  # kk rows of the corpus are not copied
    assert list(groups) == sorted(groups)  # group-id order
    for group_id, langs in groups.items():
        assert list(langs) == ["eng_Latn", *POOL]  # source first, then the pool's order
        assert langs["eng_Latn"] == corpus[group_id]["text"]
    for row in rows:
        assert row["id"] == f"{row['group_id']}:{row['lang']}"
        assert row["split"] == corpus[row["group_id"]]["split"]
        assert row["source"] == ("mono" if row["lang"] == "eng_Latn" else "nllb:tiny-random-d32-l1-s3")
        assert row["text"] == row["text"].strip()
    assert {r["split"] for r in rows} == {"train", "dev"}
    assert manifest.metrics["translations_requested"] == len(SENTENCES) * len(POOL)
    assert manifest.metrics["device"] == "cpu" and manifest.metrics["compute_type"] == "int8"
    assert manifest.shards == ["part-00000", "part-00001", "part-00002"]


@pytest.mark.slow
def test_one_translator_per_process_reused_across_shards_and_runs(setup: Setup, tmp_path: Path) -> None:
    engine.release_translators()
    store = setup.store(tmp_path)
    run_translate(store, setup, translate_config())
    assert engine.cached_translators() == 1
    run_translate(store, setup, translate_config(k=2))
    assert engine.cached_translators() == 1
    run_translate(store, setup, translate_config(compute_type="float32"))
    assert engine.cached_translators() == 2


@pytest.mark.slow
def test_k_of_pool_drawn_per_row_with_the_seed(setup: Setup, tmp_path: Path) -> None:
    store = setup.store(tmp_path)
    _, table = run_translate(store, setup, translate_config(k=3, seed=42))
    groups = groups_of(table)
    ids = list(groups)
    expected = multiway_layout(ids, POOL, 3, True, 42).targets
    for i, group_id in enumerate(ids):
        assert list(groups[group_id]) == ["eng_Latn", *(lang for j, lang in enumerate(POOL) if expected[i, j])]
    assert len({tuple(g) for g in groups.values()}) > 3  # the draw differs between rows
    # the same seed draws the same languages whatever the shard size; another seed differs
    _, resharded = run_translate(store, setup, translate_config(k=3, seed=42, shard_rows=5))
    assert {g: list(v) for g, v in groups_of(resharded).items()} == {g: list(v) for g, v in groups.items()}
    _, reseeded = run_translate(store, setup, translate_config(k=3, seed=7))
    assert {g: list(v) for g, v in groups_of(reseeded).items()} != {g: list(v) for g, v in groups.items()}


def test_en_ablate_draws_k_plus_one_including_english(setup: Setup, tmp_path: Path) -> None:
    store = setup.store(tmp_path)
    manifest, table = run_translate(store, setup, translate_config(k=3, include_source=False, seed=1))
    groups = groups_of(table)
    assert len(groups) == len(SENTENCES)
    assert all(len(langs) == 4 for langs in groups.values())
    with_english = sum("eng_Latn" in langs for langs in groups.values())
    assert 0 < with_english < len(SENTENCES)
    assert manifest.metrics["source_rows_not_drawn"] == len(SENTENCES) - with_english
    assert manifest.metrics["translations_requested"] == 4 * len(SENTENCES) - with_english
    assert manifest.dropped == {}


def test_shards_resume_after_partial_run_identically(setup: Setup, tmp_path: Path) -> None:
    config = translate_config(k=2, shard_rows=5)
    reference = setup.store(tmp_path / "a")
    ref_manifest, ref_table = run_translate(reference, setup, config)
    assert len(ref_manifest.shards) == 5

    store = setup.store(tmp_path / "b")
    key = ref_manifest.key  # the same config, inputs and library versions
    inputs = {name: translate_stage_module.InputArtifact(store, name, k) for name, k in setup.input_keys.items()}
    shards = TRANSLATE_STAGE.plan_shards(config, inputs)
    early = [run_shard(store, TRANSLATE_STAGE, key, config, setup.input_keys, shard) for shard in shards[:2]]
    assert not store.is_committed("translate", key)
    manifest, table = run_translate(store, setup, config)
    assert table.equals(ref_table)
    for record in early:  # finished shards were not built again
        assert store.completed_shard("translate", key, record.shard_id).wall_time_s == record.wall_time_s
    assert manifest.rows_out == ref_manifest.rows_out and manifest.dropped == ref_manifest.dropped


SLOW_RUN = """
import sys, time, dataclasses
from storage import ArtifactStore
from tasks.stage import run_stage
from tasks.translate import TRANSLATE_STAGE
from tasks.translate.config import TranslateConfig
def slow(config, inputs, shard, context):
    yield from TRANSLATE_STAGE.build_shard(config, inputs, shard, context)
    time.sleep(0.4)
stage = dataclasses.replace(TRANSLATE_STAGE, build_shard=slow)
config = TranslateConfig.model_validate_json(sys.argv[2])
run_stage(ArtifactStore(sys.argv[1]), stage, config, {"corpus": sys.argv[3], "translate_model": sys.argv[4]})
"""


@pytest.mark.slow
def test_sigkill_mid_stage_then_rerun_gives_identical_output(setup: Setup, tmp_path: Path) -> None:
    config = translate_config(k=3, shard_rows=3)
    reference = setup.store(tmp_path / "a")
    ref_manifest, ref_table = run_translate(reference, setup, config)
    n_shards = len(ref_manifest.shards)

    store = setup.store(tmp_path / "b")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = [sys.executable, "-c", SLOW_RUN, str(store.root_uri), config.model_dump_json(), setup.corpus_key, setup.model_key]
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = [s for s in ref_manifest.shards if store.completed_shard("translate", ref_manifest.key, s)]
            if len(done) >= 2 or process.poll() is not None:
                break
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL, process.stderr.read().decode() if process.stderr else ""
    done = [s for s in ref_manifest.shards if store.completed_shard("translate", ref_manifest.key, s)]
    assert 1 <= len(done) < n_shards
    assert not store.is_committed("translate", ref_manifest.key)
    manifest, table = run_translate(store, setup, config)
    assert table.equals(ref_table)
    assert manifest.shards == ref_manifest.shards


def test_filters_count_every_drop_in_the_manifest(setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hand-made translations through the real stage: each filter fires once and is counted."""
    real = translate_stage_module.translate_tokens
    made = {  # target -> output text for the first group
        "fra_Latn": "",
        "deu_Latn": "same",  # replaced by the source text below
        "spa_Latn": "la la la la la la la la la la la la",
        "jpn_Jpan": "Это текст на русском языке, а не японском.",
        "zho_Hans": "中国",  # two tokens for a ~40-token source: length ratio
        "hin_Deva": "यह एक अच्छा अनुवाद है और यह काफी लंबा भी है।",
    }

    def fake(translator, sources, prefixes, decoding, max_batch_tokens, progress=None):  # noqa: ANN001
        outputs = real(translator, sources, prefixes, decoding, max_batch_tokens)
        tokenizer = engine.NllbTokenizer(translator_dir / "tokenizer" / "tokenizer.json")
        first = sources[0]
        for i, (source, prefix) in enumerate(zip(sources, prefixes)):
            if source is first:
                text = made[prefix[0]]
                if text == "same":
                    text = SENTENCES_BY_TOKENS[tuple(source)]
                outputs[i] = tokenizer.tokenizer.encode(text, add_special_tokens=False).tokens
            else:
                outputs[i] = tokenizer.tokenizer.encode("Un texte correct en français.", add_special_tokens=False).tokens
        return outputs

    store = setup.store(tmp_path)
    translator_dir = store.attached_dir("translate_model", setup.model_key)
    tokenizer = engine.NllbTokenizer(translator_dir / "tokenizer" / "tokenizer.json")
    SENTENCES_BY_TOKENS = {tuple(t): s for s, t in zip(SENTENCES, tokenizer.encode(SENTENCES, "eng_Latn", 512))}
    monkeypatch.setattr(translate_stage_module, "translate_tokens", fake)
    filters = {
        "drop_identical": True,
        "repetition_max_ngram": 3,
        "repetition_min_repeats": 4,
        "min_length_ratio": 0.2,
        "max_length_ratio": 5.0,
        "min_script_share": 0.5,
    }
    config = translate_config(
        targets=["fra_Latn", "deu_Latn", "spa_Latn", "jpn_Jpan", "zho_Hans", "hin_Deva"], filters=filters, shard_rows=100
    )
    manifest, table = run_translate(store, setup, config)
    # every other row's outputs are Latin-script French: wrong script for jpn/zho/hin
    others = len(SENTENCES) - 1
    assert manifest.dropped == {
        "empty_translation": 1,
        "identical_to_source": 1,
        "repetition": 1,
        "wrong_script": 1 + 3 * others,
        "length_ratio": 1,
    }
    first = groups_of(table)[table["group_id"][0].as_py()]
    assert list(first) == ["eng_Latn", "hin_Deva"]


def test_lid_drops_are_counted_per_target_language(setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A German output in the Polish slot of the first row: dropped as lid_mismatch, counted for pol_Latn.
    (Polish, not French: CLD2 cannot keep 99.5% of French human translations, so French is exempt.)"""
    real = translate_stage_module.translate_tokens
    german = "Das Wetter in Berlin ist heute sehr schön und wir gehen spazieren."
    right = {"pol_Latn": "Pogoda jest dzisiaj bardzo ładna i idziemy na spacer po parku.", "deu_Latn": german}

    def fake(translator, sources, prefixes, decoding, max_batch_tokens, progress=None):  # noqa: ANN001
        outputs = real(translator, sources, prefixes, decoding, max_batch_tokens)
        tokenizer = engine.NllbTokenizer(translator_dir / "tokenizer" / "tokenizer.json")
        for i, prefix in enumerate(prefixes):
            text = german if i == 0 else right[prefix[0]]
            outputs[i] = tokenizer.tokenizer.encode(text, add_special_tokens=False).tokens
        return outputs

    store = setup.store(tmp_path)
    translator_dir = store.attached_dir("translate_model", setup.model_key)
    monkeypatch.setattr(translate_stage_module, "translate_tokens", fake)
    filters = {
        "drop_identical": False,
        "repetition_max_ngram": None,
        "min_length_ratio": None,
        "max_length_ratio": None,
        "min_script_share": None,
    }
    config = translate_config(
        targets=["pol_Latn", "deu_Latn"], filters={**filters, "lid": {"backend": "cld2"}}, shard_rows=100, min_rows_per_group=1
    )
    manifest, table = run_translate(store, setup, config)
    assert manifest.dropped == {"lid_mismatch": 1}
    assert manifest.metrics["dropped_by_lang"] == {"pol_Latn": {"lid_mismatch": 1}}
    assert manifest.metrics["lid"] == {"backend": "cld2", "not_identifiable": ["deu_Latn"]}  # exempt: CLD2 confuses it
    assert manifest.source_fingerprints["filters.lid"]["pycld2"] == "0.42"
    first = groups_of(table)[table["group_id"][0].as_py()]
    assert list(first) == ["eng_Latn", "deu_Latn"]


def test_group_incomplete_drops_whole_group(setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        translate_stage_module,
        "translate_tokens",
        lambda t, sources, prefixes, d, m, progress=None: [[] if i % 2 else ["▁a", "b"] for i in range(len(sources))],
    )
    store = setup.store(tmp_path)
    config = translate_config(targets=["fra_Latn", "deu_Latn"], min_rows_per_group=3, shard_rows=100)
    # the deu translation of every row is empty: each group keeps 2 < 3 rows and goes; an empty
    # output is an error naming the drops, unless the pipeline allows it
    with pytest.raises(EmptyOutputError, match=f"group_incomplete {2 * len(SENTENCES)}, empty_translation {len(SENTENCES)}"):
        run_translate(store, setup, config)
    manifest, table = run_translate(store, setup, config, allow_empty=True)
    assert table.num_rows == 0
    assert manifest.dropped == {"empty_translation": len(SENTENCES), "group_incomplete": 2 * len(SENTENCES)}


def test_config_errors_name_the_language() -> None:
    with pytest.raises(ValidationError, match="xyz_Latn"):
        translate_config(targets=["fra_Latn", "xyz_Latn"])
    with pytest.raises(ValidationError, match="arb_Latn"):  # a FLORES-200 code NLLB has no token for
        translate_config(targets=["arb_Latn"])
    with pytest.raises(ValidationError, match="listed twice"):
        translate_config(targets=["fra_Latn", "fr"])
    with pytest.raises(ValidationError, match="also a target"):
        translate_config(targets=["eng_Latn", "fra_Latn"])
    with pytest.raises(ValidationError, match="k = 7"):
        translate_config(k=7)
    with pytest.raises(ValidationError, match="set k"):
        translate_config(include_source=False)
    with pytest.raises(ValidationError, match="Extra inputs"):
        translate_config(beam_size=4)
    assert translate_config(targets=["fr", "hi"]).targets == ["fra_Latn", "hin_Deva"]
    assert translate_config(targets=["sat_Olck"]).targets == ["sat_Olck"]  # NLLB's token is sat_Beng
    with pytest.raises(ValidationError, match="required"):
        TranslateModelConfig(source="hub")
    with pytest.raises(ValidationError, match="tiny"):
        TranslateModelConfig(source="hub", model="facebook/nllb-200-3.3B", tiny={"seed": 1})
    with pytest.raises(ValidationError, match="compute_type"):
        TranslateModelConfig(source="ctranslate2", model="/x", quantization="int8")


def test_auto_device_and_compute_type_are_resolved_into_the_key() -> None:
    config = TranslateConfig.model_validate({"targets": ["fra_Latn"]})
    assert (config.device, config.compute_type) == ("cpu", "int8")
    explicit = TranslateConfig.model_validate({"targets": ["fra_Latn"], "device": "cpu", "compute_type": "int8"})
    assert stage_key(TRANSLATE_STAGE, config, {}, {}) == stage_key(TRANSLATE_STAGE, explicit, {}, {})
    other = TranslateConfig.model_validate({"targets": ["fra_Latn"], "compute_type": "float32"})
    assert stage_key(TRANSLATE_STAGE, config, {}, {}) != stage_key(TRANSLATE_STAGE, other, {}, {})
    threads = TranslateConfig.model_validate({"targets": ["fra_Latn"], "intra_threads": 3})
    assert stage_key(TRANSLATE_STAGE, config, {}, {}) == stage_key(TRANSLATE_STAGE, threads, {}, {})


def test_target_missing_from_the_model_vocabulary_fails_before_compute(setup: Setup, tmp_path: Path, model_dir: Path) -> None:
    """A converted model whose vocabulary lacks hin_Deva: the plan fails naming it, nothing is translated."""
    converted = tmp_path / "ct2"
    shutil.copytree(model_dir / "ctranslate2", converted)
    shutil.copy(model_dir / "tokenizer" / "tokenizer.json", converted / "tokenizer.json")
    vocabulary = json.loads((converted / "shared_vocabulary.json").read_text(encoding="utf-8"))
    vocabulary[vocabulary.index("hin_Deva")] = "hin_Deva_removed"
    (converted / "shared_vocabulary.json").write_text(json.dumps(vocabulary), encoding="utf-8")
    store = setup.store(tmp_path)
    _, model = run_stage(store, TRANSLATE_MODEL_STAGE, TranslateModelConfig(source="ctranslate2", model=str(converted)), {})
    assert (
        "hin_Deva" not in json.loads((store.attached_dir("translate_model", model.key) / "model.json").read_text())["languages"]
    )
    with pytest.raises(ValueError, match="'hin_Deva' is not in the vocabulary of translation model 'ct2'"):
        run_stage(store, TRANSLATE_STAGE, translate_config(), {"corpus": setup.corpus_key, "translate_model": model.key})
    assert store.list_manifests("translate") == []
    run_stage(
        store, TRANSLATE_STAGE, translate_config(targets=["fra_Latn"]), {"corpus": setup.corpus_key, "translate_model": model.key}
    )


def test_import_of_a_converted_ctranslate2_dir_translates_the_same(setup: Setup, tmp_path: Path, model_dir: Path) -> None:
    converted = tmp_path / "ct2"
    shutil.copytree(model_dir / "ctranslate2", converted)
    shutil.copy(model_dir / "tokenizer" / "tokenizer.json", converted / "tokenizer.json")
    store = setup.store(tmp_path)
    _, imported = run_stage(
        store,
        TRANSLATE_MODEL_STAGE,
        TranslateModelConfig(source="ctranslate2", model=str(converted), name="tiny-random-d32-l1-s3"),
        {},
    )
    assert imported.key != setup.model_key
    config = translate_config(k=2)
    _, original = run_translate(store, setup, config)
    _, manifest = run_stage(store, TRANSLATE_STAGE, config, {"corpus": setup.corpus_key, "translate_model": imported.key})
    assert store.read_table("translate", manifest.key).equals(original)


def test_pickled_checkpoints_are_refused_unless_allowed(tmp_path: Path) -> None:
    checkpoint = tmp_path / "nllb"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}", encoding="utf-8")
    (checkpoint / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(TranslationModelError, match="allow_pickle_weights"):
        run_stage(
            ArtifactStore(tmp_path / "store"),
            TRANSLATE_MODEL_STAGE,
            TranslateModelConfig(source="local", model=str(checkpoint)),
            {},
        )


def test_registered_in_dependency_order() -> None:
    names = list(stage_registry())
    assert names.index("corpus") < names.index("translate_model") < names.index("translate")
    assert TRANSLATE_STAGE.inputs == ("corpus", "translate_model")


def test_no_filters_config_used_by_tests_is_valid() -> None:
    assert translate_config(filters=NO_FILTERS).filters.min_script_share is None


def test_multiway_profile_is_the_papers_setup() -> None:
    from flows.config import load_config

    config = load_config(REPO / "configs" / "multiway.toml")
    translate = config.stage_configs["translate"]
    assert translate.k == 3 and translate.targets == POOL and translate.include_source
    assert (translate.device, translate.compute_type) == ("cuda", "float16")
    assert config.stage_configs["translate_model"].model == "facebook/nllb-200-3.3B"
    assert [s.sample for s in config.stage_configs["corpus"].sources] == [38000, 38000]
