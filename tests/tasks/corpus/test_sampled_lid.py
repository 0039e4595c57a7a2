"""LID on a sampled source runs only on groups that can enter the sample (tasks/corpus/sampled_lid.py):
the kept output is the same as with LID on every row, for any batching, with near-dedupe on or off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from storage import ArtifactStore, Manifest
from tasks.corpus import sampled_lid, stage
from tasks.corpus.config import CorpusConfig
from tasks.corpus.sampling import add_hashes, hash_variants
from tasks.corpus.stage import CORPUS_STAGE
from tasks.stage import run_stage
from tests.tasks.corpus.lid_sentences import ENGLISH, KAZAKH, RUSSIAN

MIXED = "Это предложение на русском языке. This sentence is in English and it is longer than that."  # CLD2: ~50/50


def tag(i: int, alphabet: str) -> str:
    """A word of letters naming `i`: numbers would make every line a near-duplicate of the others."""
    word = ""
    while True:
        i, digit = divmod(i, len(alphabet))
        word += alphabet[digit]
        if not i:
            return word


def latin(i: int) -> str:
    return tag(i, "bcdfghjklmnpqrstvwxz")


def cyrillic(i: int) -> str:
    return tag(i, "бвгдқңғһжзклмнпрст")


def mixed_groups(n: int) -> dict[str, list[str]]:
    """English / Kazakh / Acehnese (no CLD2 label: never checked) groups with every kind of trouble:
    Russian and mixed rows (LID drops), exact duplicates, near-duplicates (case and punctuation)."""
    en, kk, ace = [], [], []
    for i in range(n):
        english = f"{ENGLISH[i % 4]} {latin(i)}"
        kazakh = f"{KAZAKH[i % 4]} {cyrillic(i)}"
        if i % 7 == 3:
            kazakh = f"{RUSSIAN[i % 2]} {cyrillic(i)}"  # lid_mismatch
        if i % 11 == 5:
            english = MIXED + f" {latin(i)}"  # lid_low_confidence / mismatch
        if i % 13 == 8 and i >= 13:
            english, kazakh = en[i - 13], kk[i - 13]  # an exact duplicate of an earlier group
        if i % 17 == 9 and i >= 17:
            english = en[i - 17].upper().replace(".", "!")  # a near-duplicate
        en.append(english)
        kk.append(kazakh)
        ace.append(f"{ENGLISH[(i + 1) % 4]} {latin(i)}")
    return {"en": en, "kk": kk, "ace": ace}


def write_source(root: Path, columns: dict[str, list[str]]) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    files = {}
    for lang, lines in columns.items():
        (root / f"src.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        files[lang] = str(root / f"src.{lang}")
    return files


def run(
    monkeypatch: pytest.MonkeyPatch, root: Path, files: dict[str, str], candidates_only: bool, sample: int, **settings: Any
) -> tuple[Manifest, list[dict[str, Any]]]:
    monkeypatch.setattr(stage, "LID_ON_SAMPLE_CANDIDATES", candidates_only)
    source = {"kind": "text", "name": "src", "files": files, "sample": sample}
    config = CorpusConfig.model_validate({"sources": [source], **settings})
    store = ArtifactStore(root)
    _, manifest = run_stage(store, CORPUS_STAGE, config, {})
    assert manifest.rows_in == manifest.rows_out + sum(manifest.dropped.values())
    return manifest, store.read_table("corpus", manifest.key).to_pylist()


@pytest.fixture()
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of a few groups and a short pending buffer, so that small sources exercise both."""
    monkeypatch.setattr(sampled_lid, "MIN_CHUNK", 1)
    monkeypatch.setattr(sampled_lid, "PENDING_SAMPLES", 2)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("near_dedupe", "min_langs", "dedupe"),  # min_langs None: all three languages; 2: LID may null a row and keep the group
    [(False, None, True), (True, None, True), (False, 2, True), (True, 2, True), (False, 2, False)],
)
def test_kept_output_is_the_same_as_checking_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None, near_dedupe: bool, min_langs: int | None, dedupe: bool
) -> None:
    files = write_source(tmp_path / "src", mixed_groups(1200))
    filters = {"lid": {"min_confidence": 0.6}, "near_dedupe": near_dedupe, "min_langs_per_group": min_langs, "dedupe": dedupe}
    every, expected = run(monkeypatch, tmp_path / "every", files, False, 60, filters=filters, read_batch_lines=256)
    assert every.metrics["lid"]["checked"] == "every_row"
    # the data tests something (CLD2 answers reliably or not at all: its drops are mismatches)
    assert every.dropped["lid_mismatch"] > 0
    assert expected and (not near_dedupe or every.dropped["near_duplicate"] > 0)
    for batch in (7, 100, 256, 5000):
        manifest, rows = run(monkeypatch, tmp_path / f"cand-{batch}", files, True, 60, filters=filters, read_batch_lines=batch)
        assert rows == expected, f"read_batch_lines = {batch}"
        assert manifest.key == every.key and manifest.rows_out == every.rows_out
        lid = manifest.metrics["lid"]
        assert lid["checked"] == "sample_candidates"
        assert lid["checked_rows"] < every.metrics["lid"]["checked_rows"] / 2
        for reason in ("lid_mismatch", "lid_low_confidence"):  # counted on the checked rows only
            assert manifest.dropped.get(reason, 0) <= every.dropped.get(reason, 0)
        assert manifest.dropped["not_sampled"] > every.dropped["not_sampled"]


def test_rows_never_checked_are_counted_as_not_sampled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: None
) -> None:
    """Two Russian rows in groups whose hash is far above the sample's: only checking every row sees them."""
    n, sample = 200, 10
    columns = {
        "en": [f"{ENGLISH[i % 4]} {latin(i)}" for i in range(n)],
        "kk": [f"{KAZAKH[i % 4]} {cyrillic(i)}" for i in range(n)],
    }
    seed = CorpusConfig.model_fields["seed"].default
    hashes = add_hashes(
        pl.DataFrame({"eng_Latn": columns["en"], "kaz_Cyrl": columns["kk"]}), ["eng_Latn", "kaz_Cyrl"], seed, 0.0
    )["h"]
    rank = hashes.rank("ordinal").to_list()
    # the Russian variant of a group hashes differently: pick two whose variant ranks high too
    russian = [f"{RUSSIAN[i % 2]} {cyrillic(i)}" for i in range(n)]
    variant = add_hashes(pl.DataFrame({"eng_Latn": columns["en"], "kaz_Cyrl": russian}), ["eng_Latn", "kaz_Cyrl"], seed, 0.0)["h"]
    high = [i for i in range(n) if rank[i] > n // 2 and (variant[i] > hashes.sort()[n // 2])][:2]
    assert len(high) == 2
    for i in high:
        columns["kk"][i] = russian[i]
    files = write_source(tmp_path / "src", columns)

    every, expected = run(monkeypatch, tmp_path / "every", files, False, sample, filters={"lid": {}})
    assert every.dropped == {"lid_mismatch": 2, "group_incomplete": 2, "not_sampled": 2 * (n - 2 - sample)}
    assert every.metrics["lid"]["checked_rows"] == 2 * n

    manifest, rows = run(monkeypatch, tmp_path / "cand", files, True, sample, filters={"lid": {}})
    assert rows == expected
    assert manifest.dropped == {"not_sampled": 2 * (n - sample)}
    assert manifest.metrics["dropped_by_lang"] == {}  # the filters' drops per language: none among the rows checked
    checked = manifest.metrics["lid"]["checked_rows"]
    assert 2 * sample <= checked <= 2 * (2 * sample)  # the sample and a margin, not the 200 groups


def test_unsampled_sources_check_every_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = write_source(tmp_path / "src", mixed_groups(50))
    monkeypatch.setattr(stage, "LID_ON_SAMPLE_CANDIDATES", True)
    config = CorpusConfig.model_validate({"sources": [{"kind": "text", "name": "src", "files": files}], "filters": {"lid": {}}})
    _, manifest = run_stage(ArtifactStore(tmp_path / "s"), CORPUS_STAGE, config, {})
    assert manifest.metrics["lid"]["checked"] == "every_row"
    assert manifest.dropped["lid_mismatch"] > 0


def test_hash_variants_are_the_rows_lid_may_null() -> None:
    langs = ["eng_Latn", "kaz_Cyrl", "ace_Latn"]
    assert hash_variants(langs, ["eng_Latn", "kaz_Cyrl"], 0) == [()]
    assert hash_variants(langs, ["eng_Latn", "kaz_Cyrl"], 1) == [(), ("eng_Latn",), ("kaz_Cyrl",)]
    assert len(hash_variants(langs, ["eng_Latn", "kaz_Cyrl"], 2)) == 4


def test_too_many_variants_fall_back_to_every_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Six checked languages, one required: 63 ways LID could leave a group; the bound is not worth it."""
    langs = ["en", "pl", "tr", "ro", "hu", "fi"]  # languages CLD2 checks by default (tasks/corpus/lid_exempt.py)
    columns = {lang: [f"{ENGLISH[i % 4]} {latin(i)}" for i in range(30)] for lang in langs}
    files = write_source(tmp_path / "src", columns)
    # every language's row copies the English one: LID, not drop_copies, is what this checks
    manifest, _ = run(
        monkeypatch, tmp_path / "s", files, True, 5, filters={"lid": {}, "min_langs_per_group": 1, "drop_copies": False}
    )
    assert manifest.metrics["lid"]["checked"] == "every_row"
    assert manifest.dropped["lid_mismatch"] == 5 * 30  # the English rows of the five other languages
