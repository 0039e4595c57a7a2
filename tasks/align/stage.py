"""The align stage: word alignments of the multi-way corpus's translation pairs, as Parquet.

Input: the `translate` artifact when the pipeline has one (the corpus with its machine
translations), else the `corpus` artifact; rows sharing a `group_id` translate each other.
Pairs: the pivot (English) with every other language of a group (WACSE), or every pair of
languages once (`all_pairs`, source = the code that sorts first). Shards: chunks of
`groups_per_shard` groups in sorted group_id order, each cached on its own, so an
interrupted run resumes at the first unfinished chunk.

Dropped (counted per sentence): empty_sentence, no_words (nothing but invisible
characters), too_many_words (> max_words), duplicate_language (a second row of a language
in a group), no_partner (a sentence with no pair, e.g. a group without the pivot); and per
pair: pair_too_long_for_model (tokens beyond the backend's limit).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tasks.align.backends import ALIGN_BACKENDS, WordAligner
from tasks.align.config import AlignConfig
from tasks.align.schema import ALIGNMENT_STRUCT, WORD_ALIGNMENT_SCHEMA
from tasks.align.words import split_words
from tasks.shard_context import ShardContext
from tasks.stage import Inputs, ShardSpec, Stage

CODE_VERSION = "1"
READ_COLUMNS = ("group_id", "lang", "text", "split")
_CACHE_LOCK = threading.Lock()
_ALIGNER_CACHE: dict[str, WordAligner] = {}


def corpus_input(inputs: Inputs) -> Any:
    """The multi-way corpus to align: translate's output when present, else the corpus."""
    return inputs["translate"] if "translate" in inputs else inputs["corpus"]


def read_sentences(config: AlignConfig, inputs: Inputs, first: str | None = None, last: str | None = None) -> pl.DataFrame:
    """group_id, lang, text of the configured splits and languages (groups in [first, last])."""
    artifact = corpus_input(inputs)
    present = {column.name for column in artifact.manifest().columns}
    missing = [c for c in READ_COLUMNS[:3] if c not in present]
    if missing:
        raise ValueError(f"align: the {artifact.stage} artifact has no column(s) {missing}")
    frame = pl.from_arrow(artifact.read_table([c for c in READ_COLUMNS if c in present]))
    if "split" in frame.columns:
        frame = frame.filter(pl.col("split").is_in(config.splits))
    langs = config.flores_langs()
    if langs is not None:
        frame = frame.filter(pl.col("lang").is_in(langs))
    if first is not None:
        frame = frame.filter((pl.col("group_id") >= first) & (pl.col("group_id") <= last))
    return frame.select("group_id", "lang", "text")


def plan_align_shards(config: AlignConfig, inputs: Inputs) -> list[ShardSpec]:
    groups = read_sentences(config, inputs)["group_id"].unique().sort().to_list()
    if config.max_groups is not None:
        groups = groups[: config.max_groups]
    size = config.groups_per_shard
    return [
        ShardSpec(
            f"groups-{k:05d}",
            {"first": chunk[0], "last": chunk[-1], "groups": len(chunk)},
            f"{config.backend}: groups {k * size}..{k * size + len(chunk) - 1}",
        )
        for k, chunk in enumerate(groups[start : start + size] for start in range(0, len(groups), size))
    ]


def make_pairs(frame: pl.DataFrame, mode: str, pivot: str) -> pl.DataFrame:
    """(src, tgt) row indices of `frame` (columns row, group_id, lang) for every aligned pair."""
    left = frame.select(pl.col("row").alias("src"), "group_id", pl.col("lang").alias("src_lang"))
    right = frame.select(pl.col("row").alias("tgt"), "group_id", pl.col("lang").alias("tgt_lang"))
    joined = left.join(right, on="group_id", how="inner")
    if mode == "english_pivot":
        joined = joined.filter((pl.col("src_lang") == pivot) & (pl.col("tgt_lang") != pivot))
    else:
        joined = joined.filter(pl.col("src_lang") < pl.col("tgt_lang"))
    return joined.sort("group_id", "src_lang", "tgt_lang")


def load_aligner(config: AlignConfig, base_model: Path | None = None) -> WordAligner:
    """The configured backend, loaded. `base_model`: the base_model artifact's folder, for a
    backend that reads it (`uses_base_model`)."""
    return config.settings.build(base_model)


def _cached_aligner(config: AlignConfig, inputs: Inputs) -> WordAligner:
    """One loaded aligner per process (shards of a run share it)."""
    uses_base_model = config.settings.uses_base_model()
    base_model = inputs["base_model"].local_dir() if uses_base_model and "base_model" in inputs else None
    key = f"{config.model_dump_json()}|{base_model}"
    with _CACHE_LOCK:
        if key not in _ALIGNER_CACHE:
            _ALIGNER_CACHE.clear()
            _ALIGNER_CACHE[key] = load_aligner(config, base_model)
        return _ALIGNER_CACHE[key]


def segment_rows(frame: pl.DataFrame, config: AlignConfig, context: ShardContext) -> tuple[pl.DataFrame, list[list[str]]]:
    """Words of every usable row; unusable rows are counted as dropped and removed."""
    frame = frame.with_row_index("row_in")
    first = frame.unique(["group_id", "lang"], keep="first", maintain_order=True)
    context.drop("duplicate_language", frame.height - first.height)
    texts, langs = first["text"].to_list(), first["lang"].to_list()
    words = [split_words(text, lang) for text, lang in zip(texts, langs)]
    empty = np.array([not text.strip() for text in texts], dtype=bool)
    n_words = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    no_words = (n_words == 0) & ~empty
    too_many = n_words > config.max_words
    context.drop("empty_sentence", int(empty.sum()))
    context.drop("no_words", int(no_words.sum()))
    context.drop("too_many_words", int(too_many.sum()))
    keep = ~(empty | no_words | too_many)
    kept = first.filter(pl.Series(keep)).with_row_index("row")
    return kept, [w for w, k in zip(words, keep) if k]


def alignment_table(pairs: pl.DataFrame, words: list[list[str]], links: list[Any], backend: str) -> pa.Table:
    src, tgt = pairs["src"].to_numpy(), pairs["tgt"].to_numpy()
    counts = np.fromiter((len(link[0]) for link in links), dtype=np.int64, count=len(links))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    cat = lambda k, dtype: np.concatenate([link[k] for link in links]).astype(dtype) if links else np.zeros(0, dtype=dtype)  # noqa: E731
    structs = pa.StructArray.from_arrays(
        [pa.array(cat(0, np.int32)), pa.array(cat(1, np.int32)), pa.array(cat(2, np.float32))], fields=list(ALIGNMENT_STRUCT)
    )
    ids = (pairs["group_id"] + ":" + pairs["src_lang"] + "-" + pairs["tgt_lang"]).to_list()
    columns = {
        "id": pa.array(ids, pa.string()),
        "group_id": pa.array(pairs["group_id"].to_list(), pa.string()),
        "src_lang": pa.array(pairs["src_lang"].to_list(), pa.string()),
        "tgt_lang": pa.array(pairs["tgt_lang"].to_list(), pa.string()),
        "src_words": pa.array([words[i] for i in src], pa.list_(pa.string())),
        "tgt_words": pa.array([words[i] for i in tgt], pa.list_(pa.string())),
        "alignments": pa.ListArray.from_arrays(pa.array(offsets), structs, type=pa.list_(ALIGNMENT_STRUCT)),
        "backend": pa.array([backend] * len(ids), pa.string()),
    }
    return pa.Table.from_pydict(columns, schema=WORD_ALIGNMENT_SCHEMA)


def build_align_shard(config: AlignConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> list[pa.Table]:
    frame = read_sentences(config, inputs, shard.params["first"], shard.params["last"])
    context.read(frame.height)
    kept, words = segment_rows(frame, config, context)
    pairs = make_pairs(kept, config.pairs, config.pivot)
    used = np.zeros(kept.height, dtype=bool)
    used[pairs["src"].to_numpy()] = True
    used[pairs["tgt"].to_numpy()] = True
    context.drop("no_partner", int((~used).sum()))
    if pairs.is_empty():
        return [WORD_ALIGNMENT_SCHEMA.empty_table()]
    aligner = _cached_aligner(config, inputs)
    pair_rows = np.stack([pairs["src"].to_numpy(), pairs["tgt"].to_numpy()], axis=1)
    context.expect(len(pair_rows), "pairs")
    links = aligner.align(words, kept["lang"].to_list(), pair_rows, context.progress)  # stops between batches
    ok = np.array([link is not None for link in links], dtype=bool)
    context.drop("pair_too_long_for_model", int((~ok).sum()))
    pairs = pairs.filter(pl.Series(ok))
    links = [link for link in links if link is not None]
    table = alignment_table(pairs, words, links, aligner.label)
    counts = np.fromiter((len(link[0]) for link in links), dtype=np.int64, count=len(links))
    pair_of_link = np.repeat(np.arange(len(links), dtype=np.int64), counts)

    def aligned(k: int) -> int:  # distinct (pair, word) among the links: all pairs in one np.unique
        words_of = np.concatenate([link[k] for link in links]).astype(np.int64) if links else np.zeros(0, dtype=np.int64)
        return len(np.unique(pair_of_link * (int(words_of.max(initial=0)) + 1) + words_of))

    aligned_src, aligned_tgt = aligned(0), aligned(1)
    context.metrics = {
        "pairs": table.num_rows,
        "links": int(counts.sum()),
        "words": {"src": int(sum(len(words[i]) for i in pairs["src"])), "tgt": int(sum(len(words[i]) for i in pairs["tgt"]))},
        "aligned_words": {"src": int(aligned_src), "tgt": int(aligned_tgt)},
    }
    by_lang = pairs.group_by("src_lang", "tgt_lang").len().sort("src_lang", "tgt_lang")
    context.metrics["pairs_by_language"] = {f"{a}-{b}": int(n) for a, b, n in by_lang.iter_rows()}
    return [table]


def fingerprint_align(config: AlignConfig) -> dict[str, Any]:
    return config.settings.fingerprint()


ALIGN_STAGE: Stage[AlignConfig] = Stage(
    name="align",
    code_version=CODE_VERSION,
    config_model=AlignConfig,
    schema=WORD_ALIGNMENT_SCHEMA,
    plan_shards=plan_align_shards,
    build_shard=build_align_shard,
    inputs=("corpus",),
    optional_inputs=("translate", "base_model"),
    fingerprint_sources=fingerprint_align,
    description=f"word alignments of translation pairs (a registered backend: {', '.join(ALIGN_BACKENDS)})",
)
