"""A non-pivot row that only copies its pivot row is dropped as `copy_of_pivot`, and the rows a
stage drops are kept, per reason, in its artifact (`ShardContext.reject`, `rejects/*.parquet`),
which `xlembed artifacts head --rejects` prints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore
from tasks.corpus.config import CorpusConfig
from tasks.corpus.stage import CORPUS_STAGE
from tasks.rejects import REJECTS_SCHEMA, rejects_file
from tasks.shard_context import ShardContext
from tasks.stage import run_stage

ENGLISH = [
    "Kazakhstan",
    "The cat sleeps.",
    "Good morning, friend!",
    "Angolan Kwanza (1977–1991)",
    "Straße",
    "2019",
    "Water",
    "Tea",
]
TAGALOG = [
    "KAZAKHSTAN.",  # case and punctuation: a copy
    "Natutulog ang pusa.",
    "good   morning friend",  # spacing and punctuation: a copy
    "Angolan Kwanza (1977–1991)",  # identical: a copy
    "STRASSE",  # casefold (ß = ss): a copy
    "２０１９",  # fullwidth digits (NFKC): a copy
    "Tubig",
    "Tsaa " + "x" * 60,  # too long for max_chars = 40: dropped as too_long, not as a copy
]


def corpus(tmp_path: Path, store: ArtifactStore, **filters) -> tuple[object, pl.DataFrame]:
    files = {}
    for code, lines in (("en", ENGLISH), ("tl", TAGALOG)):
        files[code] = str(tmp_path / f"src.{code}")
        Path(files[code]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = CorpusConfig.model_validate(
        {
            "sources": [{"name": "src", "kind": "text", "files": files}],
            "dev_fraction": 0.0,
            "filters": {"max_chars": 40, "min_langs_per_group": 1, **filters},
        }
    )
    _, manifest = run_stage(store, CORPUS_STAGE, config, {})
    return manifest, pl.from_arrow(store.read_table("corpus", manifest.key))


def test_copies_of_the_pivot_are_dropped_counted_and_kept_as_rejects(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "store")
    manifest, rows = corpus(tmp_path, store)
    copies = [0, 2, 3, 4, 5]
    assert manifest.dropped == {"copy_of_pivot": len(copies), "too_long": 1}
    assert manifest.metrics["dropped_by_lang"] == {"tgl_Latn": {"copy_of_pivot": 5, "too_long": 1}}
    assert sorted(rows.filter(pl.col("lang") == "tgl_Latn")["text"]) == ["Natutulog ang pusa.", "Tubig"]
    assert rows.filter(pl.col("lang") == "eng_Latn").height == len(ENGLISH)  # the pivot itself is never a copy
    # every dropped row is in the artifact, with its reason and the id it would have had
    assert f"files/{rejects_file('src')}" in {f.path for f in manifest.attached_files}
    rejects = pl.read_parquet(store.attached_dir("corpus", manifest.key) / rejects_file("src"))
    assert rejects.columns == REJECTS_SCHEMA.names
    assert sorted(zip(rejects["reason"], rejects["id"], rejects["text"])) == sorted(
        [("copy_of_pivot", f"src:{i + 1}:tgl_Latn", TAGALOG[i]) for i in copies] + [("too_long", "src:8:tgl_Latn", TAGALOG[7])]
    )
    assert set(rejects["lang"]) == {"tgl_Latn"} and set(rejects["source"]) == {"src"}

    # off: the copies are kept as rows
    manifest, rows = corpus(tmp_path, store, drop_copies=False)
    assert "copy_of_pivot" not in manifest.dropped
    assert rows.filter(pl.col("lang") == "tgl_Latn").height == len(TAGALOG) - 1


def test_head_rejects_prints_each_reason_with_its_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    store = ArtifactStore(tmp_path / "store")
    manifest, _ = corpus(tmp_path, store)
    runner = CliRunner()
    result = runner.invoke(
        app, ["artifacts", "head", "corpus", manifest.key[:12], "--rejects", "--root", store.root_uri], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "copy_of_pivot: 5 dropped, 5 kept" in result.output and "too_long: 1 dropped, 1 kept" in result.output
    assert "src:1:tgl_Latn" in result.output and "KAZAKHSTAN." in result.output
    only = runner.invoke(
        app, ["artifacts", "head", "corpus", manifest.key[:12], "--rejects", "--reason", "too_long", "--root", store.root_uri]
    )
    assert only.exit_code == 0 and "too_long" in only.output and "copy_of_pivot" not in only.output
    missing = runner.invoke(
        app, ["artifacts", "head", "corpus", manifest.key[:12], "--rejects", "--reason", "lid_mismatch", "--root", store.root_uri]
    )
    assert missing.exit_code != 0 and "no rows dropped as 'lid_mismatch'" in missing.output


def test_reject_keeps_every_row_up_to_the_cap_then_a_seeded_uniform_sample(tmp_path: Path) -> None:
    def rejected(shard: str, total: int, batch: int, cap: int) -> pl.DataFrame:
        context = ShardContext(shard, workdir=tmp_path / shard)
        for start in range(0, total, batch):
            ids = [f"row{i}" for i in range(start, min(start + batch, total))]
            context.reject("too_long", pa.table({"id": ids, "text": ids}), cap=cap)
        context.reject("empty", pl.DataFrame({"id": ["e"], "line": [7]}), cap=cap)
        assert set(context.attachments) == {rejects_file(shard)}
        return pl.read_parquet(context.attachments[rejects_file(shard)])

    small = rejected("a", 30, 7, cap=50)  # under the cap: every row, in order
    assert small.filter(pl.col("reason") == "too_long")["id"].to_list() == [f"row{i}" for i in range(30)]
    assert small.filter(pl.col("reason") == "empty").row(0, named=True) == {
        "reason": "empty",
        "id": "e",
        "lang": None,
        "text": None,
        "source": None,
        "line": 7,
    }

    big = rejected("b", 20_000, 999, cap=200).filter(pl.col("reason") == "too_long")
    assert big.height == 200 and big["id"].n_unique() == 200
    # a uniform sample: the kept rows' positions spread over all 20,000 (mean 10,000, sd of the mean ~408)
    positions = np.array([int(i.removeprefix("row")) for i in big["id"]])
    assert abs(positions.mean() - 10_000) < 4 * 5773 / np.sqrt(200)
    assert (positions >= 10_000).sum() > 60 and (positions < 200).sum() < 10
    # seeded by shard and reason: the same rows again
    assert rejected("b", 20_000, 999, cap=200).filter(pl.col("reason") == "too_long")["id"].to_list() == big["id"].to_list()
