"""The translate stage's report (samples of kept and dropped translations per language, drop
counts per filter and language) and the export of a translate artifact as a hub dataset."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from translate_testing import SENTENCES, Setup, run_translate, translate_config

from storage import ArtifactStore
from tasks.publish.dataset import export_dataset
from tasks.translate import engine
from tasks.translate import stage as translate_stage_module
from tasks.translate.report import SAMPLES_PER_OUTCOME

TARGETS = ["fra_Latn", "deu_Latn", "jpn_Jpan"]
FILTERS = {
    "drop_identical": True,
    "repetition_max_ngram": 0,
    "min_length_ratio": 0,
    "max_length_ratio": 0,
    "min_script_share": 0.5,
}


def fake_translations(monkeypatch: pytest.MonkeyPatch, store: ArtifactStore, setup: Setup) -> None:
    """French: empty for every third sentence, else a French line; German: the source itself
    (identical_to_source) for every other sentence; Japanese: Latin text (wrong_script) always."""
    tokenizer = engine.NllbTokenizer(store.attached_dir("translate_model", setup.model_key) / "tokenizer" / "tokenizer.json")
    index = {tuple(tokens): i for i, tokens in enumerate(tokenizer.encode(SENTENCES, "eng_Latn", 512))}

    def fake(translator, sources, prefixes, decoding, max_batch_tokens, progress=None):  # noqa: ANN001
        outputs = []
        for source, prefix in zip(sources, prefixes):
            i = index[tuple(source)]
            text = {
                "fra_Latn": "" if i % 3 == 0 else f"Une phrase {i}.",
                "deu_Latn": SENTENCES[i] if i % 2 == 0 else f"Ein Satz {i}.",
                "jpn_Jpan": f"Latin text {i}.",
            }[prefix[0]]
            outputs.append(tokenizer.tokenizer.encode(text, add_special_tokens=False).tokens)
        return outputs

    monkeypatch.setattr(translate_stage_module, "translate_tokens", fake)


def report_of(store: ArtifactStore, key: str, name: str) -> str:
    return (Path(store.artifact_dir("translate", key)) / "files" / "report" / name).read_text(encoding="utf-8")


def test_report_shows_drops_per_language_and_samples_with_the_reason(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = setup.store(tmp_path)
    fake_translations(monkeypatch, store, setup)
    manifest, table = run_translate(
        store, setup, translate_config(targets=TARGETS, filters=FILTERS, min_rows_per_group=1, shard_rows=5)
    )
    n = len(SENTENCES)
    empty, identical = len(range(0, n, 3)), len(range(0, n, 2))
    assert manifest.metrics["dropped_by_lang"] == {
        "fra_Latn": {"empty_translation": empty},
        "deu_Latn": {"identical_to_source": identical},
        "jpn_Jpan": {"wrong_script": n},
    }
    assert manifest.metrics["requested_by_lang"] == {lang: n for lang in TARGETS}
    assert manifest.metrics["rows_by_lang"]["fra_Latn"] == n - empty
    attached = sorted(f.path for f in manifest.attached_files)
    assert attached[:2] == ["files/report/report.html", "files/report/report.md"]
    assert len([p for p in attached if p.startswith("files/report/samples/")]) == len(manifest.shards)

    markdown = report_of(store, manifest.key, "report.md")
    assert f"| fra_Latn | {n:,} | {n - empty:,} | {empty:,} | 0 | 0 |" in markdown  # language, requested, kept, then per reason
    assert f"| wrong_script | {n:,} |" in markdown
    section = {lang: markdown.split(f"### {lang}\n", 1)[1].split("###", 1)[0] for lang in TARGETS}
    french = [line for line in section["fra_Latn"].splitlines() if line.startswith("| ")][1:]  # the sample rows, after the header
    outcomes = [line.split(" | ")[0].removeprefix("| ") for line in french]
    assert outcomes == ["kept"] * SAMPLES_PER_OUTCOME + ["empty_translation"] * SAMPLES_PER_OUTCOME
    for line in french:  # each sample shows its source sentence and what the model made of it
        i = next(i for i, s in enumerate(SENTENCES) if s in line)
        assert ("| empty_translation |" in line) == (i % 3 == 0) and ("Une phrase" in line) == (
            i % 3 != 0
        )  # (the tiny vocabulary has no digits)
    assert "| wrong_script |" in section["jpn_Jpan"] and "| kept |" not in section["jpn_Jpan"]
    html = report_of(store, manifest.key, "report.html")
    assert html.startswith("<!DOCTYPE html>") and "<h3>deu_Latn</h3>" in html and "identical_to_source" in html


def test_samples_do_not_depend_on_the_sharding(setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = setup.store(tmp_path)
    fake_translations(monkeypatch, store, setup)
    small, _ = run_translate(store, setup, translate_config(targets=TARGETS, filters=FILTERS, min_rows_per_group=1, shard_rows=4))
    large, _ = run_translate(
        store, setup, translate_config(targets=TARGETS, filters=FILTERS, min_rows_per_group=1, shard_rows=100)
    )
    assert len(small.shards) > 1 and len(large.shards) == 1
    samples = [report_of(store, m.key, "report.md").split("## Per target language", 1)[1] for m in (small, large)]
    assert samples[0] == samples[1]
    per_shard = pq.read_table(Path(store.artifact_dir("translate", small.key)) / "files/report/samples/part-00000.parquet")
    assert per_shard.num_rows <= SAMPLES_PER_OUTCOME * 2 * len(TARGETS)


def test_export_of_a_translate_artifact_names_model_settings_and_machine_rows(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    store = setup.store(tmp_path)
    manifest, table = run_translate(store, setup, translate_config(k=2))
    result = export_dataset(store, "translate", manifest.key, tmp_path / "dataset")
    assert result.groups == manifest.metrics["groups"] == len(SENTENCES)
    card = result.card
    meta = yaml.safe_load(card.split("---\n", 2)[1])
    assert meta["language"] == ["de", "en", "es", "fr", "hi", "ja", "zh"]
    assert meta["license"] == "unknown"  # a text source and a tiny random model: no known licence
    assert "Model `tiny-random-d32-l1-s3`" in card and "| decoding.beam_size | 2 |" in card and "| k | 2 |" in card
    assert "every other language's rows are machine translations" in card
    assert f"`{manifest.input_keys['corpus']}`" in card and f"`{manifest.key}`" in card
    assert "| nllb:tiny-random-d32-l1-s3 | machine translations |" in card
    multiway = datasets.load_dataset(str(tmp_path / "dataset"), "multiway", cache_dir=str(tmp_path / "hf"))
    rows = [row for split in multiway for row in multiway[split]]
    assert len(rows) == len(SENTENCES)
    assert all(row["eng_Latn"] in SENTENCES and row["source"] == "mono" for row in rows)
    assert all(sum(row[lang] is not None for lang in multiway["train"].column_names[1:-2]) == 2 for row in rows)  # k = 2 per row
    pair = datasets.load_dataset(str(tmp_path / "dataset"), "eng_Latn-fra_Latn", cache_dir=str(tmp_path / "hf"))
    assert sum(pair[s].num_rows for s in pair) == sum(row["fra_Latn"] is not None for row in rows)


def test_the_report_is_the_same_bytes_whatever_the_run_took() -> None:
    """A resumed run must rewrite its artifact's files byte for byte (tests/reliability), so
    the report carries no wall-clock figure; those stay in the manifest's metrics."""
    from tasks.translate.report import build_report, merge_samples

    config = translate_config(targets=TARGETS, filters=FILTERS)
    metrics = {
        "model": "m",
        "translations_requested": 4,
        "translations_kept": 3,
        "groups": 2,
        "device": "cpu",
        "compute_type": "int8",
    }
    fast, slow = ({**metrics, "translate_seconds": s, "tokens_per_second": 1000 / s} for s in (1.25, 97.5))
    reports = [build_report(config, "0" * 64, m, {"wrong_script": 1}, merge_samples([])) for m in (fast, slow)]
    assert reports[0].html == reports[1].html and reports[0].markdown == reports[1].markdown
