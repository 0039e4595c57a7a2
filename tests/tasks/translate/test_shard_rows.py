"""A translate shard reads only its own source rows; the plan reads no text (issue 17 §2).

`reference_source_rows` is the code before: every shard read the whole corpus with its texts,
sorted the source rows and took its slice. The streamed read must give the same rows.
`reference_plan` is the plan before it sorted integer keys: pyarrow's sort of the group-id
strings and a count of the distinct ones (24x the time from 1M to 10M rows). The plan must
give the same shards.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.stage import ShardSpec
from tasks.translate.config import TranslateConfig
from tasks.translate.stage import shard_source_rows, source_group_ids


class PartsArtifact:
    """A corpus artifact of several part tables that records which columns each read asked for."""

    def __init__(self, parts: list[pa.Table]) -> None:
        self.parts = parts
        self.reads: list[list[str] | None] = []

    def read_table(self, columns: list[str] | None = None) -> pa.Table:
        self.reads.append(columns)
        return pa.concat_tables(self.parts).select(columns) if columns else pa.concat_tables(self.parts)

    def iter_batches(self, columns: list[str] | None = None, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
        self.reads.append(columns)
        for part in self.parts:
            yield from part.select(columns).to_batches(max_chunksize=7)


def reference_source_rows(config: TranslateConfig, corpus: PartsArtifact) -> pa.Table:
    table = corpus.read_table(["group_id", "lang", "text", "split", "source"])
    table = table.filter(pc.equal(table["lang"], config.source_lang))
    return table.sort_by([("group_id", "ascending")])


def corpus_parts(n_groups: int, seed: int) -> list[pa.Table]:
    rng = random.Random(seed)
    rows = []
    for g in rng.sample(range(n_groups), n_groups):  # parts not in group order
        gid = f"{rng.choice('abcxyz')}{g:05d}"
        for lang in ("eng_Latn", "kaz_Cyrl", "fra_Latn"):
            if lang == "eng_Latn" or rng.random() < 0.5:
                rows.append({"id": f"{gid}:{lang}", "group_id": gid, "lang": lang, "text": f"{lang} text {g}",
                             "split": rng.choice(["train", "dev"]), "source": rng.choice(["mono", "web"])})  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=CORPUS_SCHEMA)
    cuts = sorted(rng.sample(range(1, table.num_rows), 3))
    return [table.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, table.num_rows])]


@pytest.mark.parametrize("shard_rows", [1, 7, 40, 1000])
def test_each_shard_reads_the_rows_the_whole_read_gave(shard_rows: int) -> None:
    config = TranslateConfig.model_validate({"targets": ["kaz_Cyrl"], "shard_rows": shard_rows})
    corpus = PartsArtifact(corpus_parts(90, seed=shard_rows))
    expected = reference_source_rows(config, corpus)
    groups = source_group_ids(config, corpus)
    ids = groups.at(range(len(groups)))
    assert ids == expected["group_id"].to_pylist()
    for start in range(0, len(ids), shard_rows):
        stop = min(len(ids), start + shard_rows)
        rows = shard_source_rows(config, corpus, ids[start], ids[stop - 1])
        assert rows.to_pylist() == expected.slice(start, stop - start).to_pylist()
        assert rows.schema == expected.schema


def test_plan_reads_no_text_and_shards_name_their_group_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.translate import stage

    config = TranslateConfig.model_validate({"targets": ["kaz_Cyrl"], "shard_rows": 25})
    corpus = PartsArtifact(corpus_parts(60, seed=3))
    monkeypatch.setattr(stage, "check_languages", lambda config, info: None)
    monkeypatch.setattr(stage, "model_info", lambda model: {})
    shards = stage.plan_translate_shards(config, {"corpus": corpus, "translate_model": None})
    assert corpus.reads == [["group_id", "lang"]]  # the texts stay on disk at plan time
    ids = reference_source_rows(config, corpus)["group_id"].to_pylist()
    assert [(s.params["start"], s.params["stop"]) for s in shards] == [(0, 25), (25, 50), (50, 60)]
    assert [(s.params["first"], s.params["last"]) for s in shards] == [(ids[0], ids[24]), (ids[25], ids[49]), (ids[50], ids[59])]


def test_duplicate_source_rows_of_a_group_are_refused() -> None:
    config = TranslateConfig.model_validate({"targets": ["kaz_Cyrl"]})
    row = {"id": "g:eng_Latn", "group_id": "g", "lang": "eng_Latn", "text": "t", "split": "train", "source": "s"}
    corpus = PartsArtifact([pa.Table.from_pylist([row, row | {"text": "u"}], schema=CORPUS_SCHEMA)])
    with pytest.raises(ValueError, match="more than one eng_Latn row"):
        source_group_ids(config, corpus)
    with pytest.raises(ValueError, match="more than one eng_Latn row"):
        shard_source_rows(config, corpus, "g", "g")


def reference_plan(config: TranslateConfig, corpus: PartsArtifact) -> list[ShardSpec]:
    parts = [
        batch.column("group_id").filter(pc.equal(batch.column("lang"), config.source_lang))
        for batch in corpus.iter_batches(["group_id", "lang"])
    ]
    ids = pa.chunked_array(parts, type=pa.string()).combine_chunks()
    ids = ids.take(pc.sort_indices(ids))
    if len(ids) > 1 and pc.count_distinct(ids).as_py() != len(ids):
        raise ValueError(f"the corpus has groups with more than one {config.source_lang} row")
    shards = []
    for index, start in enumerate(range(0, len(ids), config.shard_rows)):
        stop = min(len(ids), start + config.shard_rows)
        params = {"start": start, "stop": stop, "first": ids[start].as_py(), "last": ids[stop - 1].as_py()}
        shards.append(ShardSpec(f"part-{index:05d}", params, f"{config.source_lang} rows {start}-{stop - 1}"))
    return shards


def tricky_corpus(seed: int) -> list[pa.Table]:
    """Group ids that are unicode, numeric-looking, empty, with a NUL, sharing long prefixes;
    the same ids in other languages, and groups without an English row."""
    rng = random.Random(seed)
    ids = ["", "\x00", "a\x00", "a", "10", "9", "010", "1e3", "-1", "1.0", " 1", "é", "e", "ÿ", "日本:1", "日本:10", "\U0001f600"]
    ids += ["\uffff", *(f"flores200:dev:{n:06d}" for n in rng.sample(range(10**6), 40))]
    ids += [f"tatoeba:kaz-eng:{n}" for n in rng.sample(range(5000), 40)]
    ids += ["k" * 30 + str(n) for n in range(15)] + [str(n) for n in rng.sample(range(100), 30)]
    ids = list(dict.fromkeys(ids))
    rows = []
    for gid in rng.sample(ids, len(ids)):
        langs = ["eng_Latn", "kaz_Cyrl", "fra_Latn"] if rng.random() < 0.9 else ["kaz_Cyrl"]
        for lang in rng.sample(langs, len(langs)):
            text = f"{lang} {gid}"
            rows.append({"id": f"{gid}:{lang}", "group_id": gid, "lang": lang, "text": text, "split": "train", "source": "s"})
    table = pa.Table.from_pylist(rows, schema=CORPUS_SCHEMA)
    cuts = sorted(rng.sample(range(1, table.num_rows), 4))
    return [table.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, table.num_rows])]


@pytest.mark.parametrize("shard_rows", [1, 3, 7, 50, 1000])
def test_plan_is_the_plan_of_the_string_sort(shard_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.translate import stage

    config = TranslateConfig.model_validate({"targets": ["kaz_Cyrl"], "shard_rows": shard_rows})
    corpus = PartsArtifact(tricky_corpus(seed=shard_rows))
    monkeypatch.setattr(stage, "check_languages", lambda config, info: None)
    monkeypatch.setattr(stage, "model_info", lambda model: {})
    shards = stage.plan_translate_shards(config, {"corpus": corpus, "translate_model": None})
    assert shards == reference_plan(config, corpus)
    assert sum(s.params["stop"] - s.params["start"] for s in shards) > 100


def test_a_duplicate_is_named_and_null_group_ids_refused() -> None:
    config = TranslateConfig.model_validate({"targets": ["kaz_Cyrl"]})
    row = {"id": "x:eng_Latn", "group_id": "x", "lang": "eng_Latn", "text": "t", "split": "train", "source": "s"}
    rows = [row | {"group_id": g} for g in ("日本:2", "flores200:dev:000001", "日本:1", "flores200:dev:000001")]
    with pytest.raises(ValueError, match=r"more than one eng_Latn row \(group_id 'flores200:dev:000001'\)"):
        source_group_ids(config, PartsArtifact([pa.Table.from_pylist(rows, schema=CORPUS_SCHEMA)]))
    nullable = pa.schema([f.with_nullable(True) for f in CORPUS_SCHEMA])
    with pytest.raises(ValueError, match="1 eng_Latn rows without a group_id"):
        source_group_ids(config, PartsArtifact([pa.Table.from_pylist([row, row | {"group_id": None}], schema=nullable)]))
