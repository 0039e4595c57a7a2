"""Data preparation of the train, translate and evaluate stages at size, against the code before issue 17.

For each stage's data preparation, at growing row counts (synthetic data), each case in a
fresh process capped at `--cap-gib` (8) GiB of address space (RLIMIT_AS; a case that needs
more is reported as not fitting): wall time and peak memory above the inputs (VmHWM after
resetting it through /proc/self/clear_refs, minus the RSS before the call), for the stage's
code and for the "naive" code it replaced, kept here (measured in the same run up to
`--naive-max` rows). Each case's process gives freed memory back (`ALLOCATORS`), so that
the cap on address space tracks memory in use.

  train.join       alignment records joined to training rows (`add_alignments`); the
                   inputs are held as the train stage holds them (texts and group ids as
                   Arrow columns, token spans flat: `training_inputs`)
                   naive: a Python loop over `to_pylist()` records
  train.step       the word pairs of one 256-row step (`make_step_batch`'s lookup)
                   naive: a dict lookup per row
  translate.plan   the plan's source rows   naive: the whole corpus with its texts
  translate.shard  one 10,000-row shard's source rows
                   naive: the whole corpus read, filtered, sorted, then sliced
  evaluate.read    the plan-time check plus scoring a model and its base (three reads of
                   every benchmark file): BUCC-like + Tatoeba-like files of N lines
                   naive: every read parses again

    python benchmarks/data_prep.py [--sizes 100000 1000000 10000000] [--naive-max 1000000] [--only train.join ...] [--cap-gib 8]

`make benchmarks QUICK=1` runs 100k rows only; the default of `run_all.py` (no --quick) 100k
and 1M; 10M rows only by hand (`--sizes ... 10000000`).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CASES = ("train.join", "train.step", "translate.plan", "translate.shard", "evaluate.read")
SHARD_ROWS = 10_000
CAP_GIB = 8.0  # address-space cap (RLIMIT_AS) of each case's process: a case that needs more reports it
# The cap counts address space, not memory: allocators that keep freed memory mapped made a
# case's address space several times its resident peak (4.9 GB against 2.0 GB for the 1M-row
# join). Each case's process is told to give freed memory back: Arrow's system pool instead
# of mimalloc, two glibc malloc arenas, polars' jemalloc without retained mappings.
ALLOCATORS = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2", "_RJEM_MALLOC_CONF": "retain:false"}


# ----------------------------------------------------------------------------- memory


def _status(field: str) -> int:
    from benchmarks.shapes import proc_status_bytes

    return proc_status_bytes(field) or 0


def measured(run) -> dict[str, float]:
    """Seconds and peak bytes above the current RSS of `run()` (Linux: VmHWM reset first)."""
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS to the current one
    except OSError:
        pass
    before = _status("VmRSS")
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "peak_mib": max(0, _status("VmHWM") - before) / 2**20, "rss_before_mib": before / 2**20}


# ----------------------------------------------------------------------------- train


INPUT_CHUNK = 1_000_000  # synthetic training rows built at a time (the builder's scratch arrays stay those of one chunk)


def training_inputs(rows: int, seed: int = 0) -> tuple[Any, Any, Any]:
    """TrainingData of `rows` eng/fra groups (one token per word), its alignment records, token spans.

    Built with arrays, `INPUT_CHUNK` rows at a time, not Python loops over rows, and held as
    the train stage holds them (texts and group ids as Arrow columns, token spans flat): the
    inputs of 10M rows must leave room for the join under the cap. The alignment table has
    the columns the join reads (the align artifact's `id` and `backend` are left out). The
    fra texts are the eng texts in capitals: their token spans are the eng texts' (one copy).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
    from tasks.train.data import TrainingData
    from tasks.train.tokens import TokenSpans

    rng = np.random.default_rng(seed)
    max_length = 16
    vocab = np.array([f"w{i}" for i in range(1000)])
    vocab_en, vocab_fr = pa.array(vocab), pa.array(np.char.upper(vocab))
    vocab_len = np.char.str_len(vocab).astype(np.int32)
    n_words = rng.integers(4, 13, size=rows).astype(np.int32)
    kept = np.minimum(n_words, max_length - 2)  # a special token, one token per word (the first max_length - 2), a special token
    lengths_one = (kept + 2).astype(np.int64)
    span_starts = np.cumsum(lengths_one) - lengths_one
    flat = np.full((int(lengths_one.sum()), 2), -1, dtype=np.int32)
    group_ids = pc.binary_join_element_wise("g", pc.utf8_lpad(pa.array(np.arange(rows)).cast(pa.string()), 9, "0"), "")
    columns = [f.name for f in WORD_ALIGNMENT_SCHEMA if f.name not in ("id", "backend")]
    schema = pa.schema([WORD_ALIGNMENT_SCHEMA.field(name) for name in columns])
    en_texts, fr_texts, tables = [], [], []
    for begin in range(0, rows, INPUT_CHUNK):
        stop = min(rows, begin + INPUT_CHUNK)
        nw = n_words[begin:stop].astype(np.int64)
        picks = rng.integers(0, 1000, size=int(nw.sum())).astype(np.int32)
        word_offsets = pa.array(np.concatenate([[0], np.cumsum(nw)]).astype(np.int32))
        en_words = pa.ListArray.from_arrays(word_offsets, vocab_en.take(pa.array(picks)))
        fr_words = pa.ListArray.from_arrays(word_offsets, vocab_fr.take(pa.array(picks)))
        en_texts.append(pc.binary_join(en_words, " ").cast(pa.large_string()))
        fr_texts.append(pc.binary_join(fr_words, " ").cast(pa.large_string()))
        # token spans of the chunk's texts: one token per kept word
        word_len = vocab_len[picks]
        word_text = np.repeat(np.arange(stop - begin, dtype=np.int32), nw)
        first_word = np.cumsum(nw) - nw
        within = (np.arange(len(picks), dtype=np.int64) - first_word[word_text]).astype(np.int32)
        word_start = (np.cumsum(word_len + 1) - (word_len + 1)).astype(np.int64)
        word_start = (word_start - word_start[first_word][word_text]).astype(np.int32)
        token_kept = within < kept[begin:stop][word_text]
        at = span_starts[begin + word_text[token_kept]] + 1 + within[token_kept]
        flat[at, 0] = word_start[token_kept]
        flat[at, 1] = word_start[token_kept] + word_len[token_kept]
        del word_len, word_text, within, word_start, token_kept, at, picks
        # alignment records: fra -> eng, every 3rd written eng -> fra; links i-i plus ~20% extra, random scores
        swap = (np.arange(begin, stop) % 3) == 0
        link_counts = nw + rng.binomial(nw, 0.2)
        link_record = np.repeat(np.arange(stop - begin, dtype=np.int32), link_counts)
        link_within = np.arange(len(link_record), dtype=np.int64) - np.repeat(np.cumsum(link_counts) - link_counts, link_counts)
        words_of = nw[link_record]
        src = np.where(link_within < words_of, link_within, rng.integers(0, words_of)).astype(np.int32)
        tgt = np.where(link_within < words_of, link_within, rng.integers(0, words_of)).astype(np.int32)
        src, tgt = np.where(swap[link_record], tgt, src), np.where(swap[link_record], src, tgt)
        scores = rng.random(len(link_record), dtype=np.float32)
        del link_record, link_within, words_of
        offsets = pa.array(np.concatenate([[0], np.cumsum(link_counts)]).astype(np.int32))
        links = pa.ListArray.from_arrays(
            offsets,
            pa.StructArray.from_arrays(
                [pa.array(src), pa.array(tgt), pa.array(scores)],
                fields=list(WORD_ALIGNMENT_SCHEMA.field("alignments").type.value_type),
            ),
        )
        del src, tgt, scores
        swap_arr = pa.array(swap)
        tables.append(
            pa.table({
                "group_id": group_ids.slice(begin, stop - begin),
                "src_lang": pc.if_else(swap_arr, "eng_Latn", "fra_Latn"),
                "tgt_lang": pc.if_else(swap_arr, "fra_Latn", "eng_Latn"),
                "src_words": pc.if_else(swap_arr, en_words, fr_words),
                "tgt_words": pc.if_else(swap_arr, fr_words, en_words),
                "alignments": links,
            }).cast(schema)
        )  # fmt: skip
        del en_words, fr_words, links
    table = pa.concat_tables(tables)
    del tables
    texts = pa.concat_arrays(en_texts + fr_texts)
    del en_texts, fr_texts
    lengths = np.concatenate([lengths_one, lengths_one])
    spans = TokenSpans(np.concatenate([span_starts, span_starts]), lengths, flat)  # counts: `lengths` itself, not a copy
    groups = np.stack([np.arange(rows), rows + np.arange(rows)], axis=1).astype(np.int32)
    data = TrainingData(
        texts=texts, langs=["eng_Latn", "fra_Latn"], groups=groups, group_ids=group_ids.cast(pa.large_string()),
        token_ids=np.broadcast_to(np.zeros(1, dtype=np.int64), (2 * rows, max_length)), lengths=lengths,
        word_ids=np.full((2 * rows, max_length), -1, dtype=np.int32),
    )  # fmt: skip
    return data, table, spans


def naive_training_data(
    tokenizer: Any, corpus: Any, *, pivot: str, langs: list[str] | None, max_length: int, prefix: str = ""
) -> Any:
    """`build_training_data` (without alignments) before issue 17 at 10M rows: rows as nested
    Python lists, texts deduplicated through a dict, tokenised in one call, one span array per
    text. Returns (TrainingData with `texts` and `group_ids` as Python lists, spans list)."""
    from tasks.train.data import TrainingData, multiway_rows

    # the same rows as the stage (the polars pivot was the same before), then as the lists it returned
    group_column, order, columns = multiway_rows(corpus, pivot=pivot, langs=langs)
    group_ids = group_column.to_pylist()
    rows = [list(row) for row in zip(*(column.to_pylist() for column in columns.columns))]
    text_index: dict[str, int] = {}
    groups = np.full((len(rows), len(order)), -1, dtype=np.int32)
    for g, row in enumerate(rows):
        for c, text in enumerate(row):
            if text is not None:
                groups[g, c] = text_index.setdefault(text, len(text_index))
    texts = list(text_index)
    enc = tokenizer([prefix + t for t in texts], add_special_tokens=True, truncation=True, max_length=max_length, padding=False,
                    return_attention_mask=False, return_offsets_mapping=True, return_special_tokens_mask=True)  # fmt: skip
    lengths = np.array([len(row) for row in enc["input_ids"]], dtype=np.int64)
    ids = np.full((len(texts), max_length), tokenizer.pad_token_id, dtype=np.int64)
    spans = []
    for t, (row, offsets, special) in enumerate(zip(enc["input_ids"], enc["offset_mapping"], enc["special_tokens_mask"])):
        ids[t, : len(row)] = row
        arr = np.asarray(offsets, dtype=np.int64).reshape(-1, 2) - len(prefix)
        arr[np.asarray(special, dtype=bool)] = -1
        spans.append(arr)
    data = TrainingData(texts=texts, langs=order, groups=groups, group_ids=group_ids, token_ids=ids, lengths=lengths,
                        word_ids=np.full(ids.shape, -1, dtype=np.int32), pad_id=int(tokenizer.pad_token_id), mask_id=tokenizer.mask_token_id)  # fmt: skip
    return data, spans


def naive_add_alignments(data: Any, table: Any, spans: list[np.ndarray], min_score: float) -> dict:
    """`add_alignments` before issue 17 (a Python loop over records, pairs in a dict)."""
    from tasks.train.alignment_join import one_to_one_pairs
    from tasks.train.word_spans import token_word_ids, word_char_spans

    alignments: dict[tuple[int, int], np.ndarray] = {}
    pivot = data.langs[0]
    lang_col = {lang: c for c, lang in enumerate(data.langs)}
    listed = lambda values: values if isinstance(values, list) else values.to_pylist()  # noqa: E731 (Arrow columns since issue 17 at 10M rows)
    group_row = {gid: g for g, gid in enumerate(listed(data.group_ids))}
    texts = listed(data.texts)
    words_of: dict[int, list[str]] = {}
    found = []
    columns = ["group_id", "src_lang", "tgt_lang", "src_words", "tgt_words", "alignments"]
    for rec in table.select(columns).to_pylist():
        src_lang, tgt_lang = rec["src_lang"], rec["tgt_lang"]
        src_words, tgt_words = rec["src_words"], rec["tgt_words"]
        kept_links = [a for a in rec["alignments"] if a["score"] >= min_score]
        pairs = np.array([(a["src"], a["tgt"]) for a in kept_links], dtype=np.int64).reshape(-1, 2)
        scores = np.array([a["score"] for a in kept_links], dtype=np.float64)
        if src_lang == pivot and tgt_lang != pivot:
            src_lang, tgt_lang, src_words, tgt_words = tgt_lang, src_lang, tgt_words, src_words
            pairs = pairs[:, ::-1]
        g = group_row.get(rec["group_id"])
        if tgt_lang != pivot or src_lang not in lang_col or g is None:
            data.dropped["alignment_outside_training_rows"] += 1
            continue
        src_t, tgt_t = int(data.groups[g, lang_col[src_lang]]), int(data.groups[g, 0])
        if src_t < 0:
            data.dropped["alignment_without_text"] += 1
            continue
        ok = True
        for t, words in ((src_t, src_words), (tgt_t, tgt_words)):
            if t in words_of:
                ok &= words_of[t] == words
            else:
                words_of[t] = words
                data.word_ids[t, : data.lengths[t]] = token_word_ids(spans[t], word_char_spans(texts[t], words))
        if not ok:
            data.dropped["alignment_words_mismatch"] += 1
            continue
        in_range = (pairs[:, 0] < len(src_words)) & (pairs[:, 1] < len(tgt_words)) & (pairs >= 0).all(axis=1)
        pairs, scores = pairs[in_range], scores[in_range]
        has_tokens = np.isin(pairs[:, 0], data.word_ids[src_t]) & np.isin(pairs[:, 1], data.word_ids[tgt_t])
        data.dropped["word_pair_without_tokens"] += int(len(pairs) - has_tokens.sum())
        if has_tokens.any():
            found.append(((src_t, tgt_t), pairs[has_tokens], scores[has_tokens]))
    if found:
        counts = np.array([len(p) for _, p, _ in found])
        keep = one_to_one_pairs(
            np.concatenate([p for _, p, _ in found]),
            np.concatenate([sc for _, _, sc in found]),
            np.repeat(np.arange(len(found)), counts),
        )
        data.dropped["word_pair_not_one_to_one"] += int(len(keep) - keep.sum())
        for ((src_t, tgt_t), pairs, _), kept in zip(found, np.split(keep, np.cumsum(counts)[:-1])):
            alignments[(src_t, tgt_t)] = pairs[kept].astype(np.int32)
            data.max_pairs = max(data.max_pairs, int(kept.sum()))
    return alignments


def naive_step_pairs(alignments: dict, text_ids: np.ndarray) -> np.ndarray:
    found = [alignments.get((int(s), int(t))) for s, t in zip(text_ids[:, 1], text_ids[:, 0])]
    width = max([len(p) for p in found if p is not None], default=0)
    pairs = np.full((len(text_ids), max(width, 1), 2), -1, dtype=np.int32)
    for b, p in enumerate(found):
        if p is not None:
            pairs[b, : len(p)] = p
    return pairs


def case_train_join(rows: int, naive: bool) -> dict:
    from tasks.train.alignment_join import add_alignments

    data, table, spans = training_inputs(rows)
    if naive:
        return measured(lambda: naive_add_alignments(data, table, spans, 0.0))
    return measured(lambda: add_alignments(data, table, spans, 0.0))


def case_train_step(rows: int, naive: bool) -> dict:
    """Seconds of 200 steps' pair lookups (256 rows each) over the join's pairs."""
    from tasks.train.alignment_join import add_alignments

    data, table, spans = training_inputs(rows)
    add_alignments(data, table, spans, 0.0)
    rng = np.random.default_rng(1)
    steps = [rng.integers(0, rows, size=256) for _ in range(200)]
    text_ids = [np.stack([data.groups[r, 0], data.groups[r, 1]], axis=1) for r in steps]
    if naive:
        table_dict = dict(data.alignments.items())
        return measured(lambda: [naive_step_pairs(table_dict, t) for t in text_ids])

    def lookup() -> None:
        for t in text_ids:  # make_step_batch's lookup
            start, count = data.alignments.lookup(t[:, 1], t[:, 0])
            pairs = np.full((len(t), max(int(count.max(initial=0)), 1), 2), -1, dtype=np.int32)
            at = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
            pairs[np.repeat(np.arange(len(t)), count), at] = data.alignments.pairs[np.repeat(start, count) + at]

    return measured(lookup)


# ----------------------------------------------------------------------------- translate


class ParquetCorpus:
    """A corpus artifact's reads (InputArtifact's interface) over local Parquet parts."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths

    def read_table(self, columns: list[str] | None = None) -> Any:
        import pyarrow as pa
        import pyarrow.parquet as pq

        return pa.concat_tables([pq.read_table(p, columns=columns) for p in self.paths])

    def iter_batches(self, columns: list[str] | None = None, batch_size: int = 65_536):
        import pyarrow.parquet as pq

        for path in self.paths:
            with open(path, "rb") as f:
                yield from pq.ParquetFile(f).iter_batches(batch_size=batch_size, columns=columns)


def write_corpus(folder: Path, rows: int) -> list[Path]:
    """`rows` English rows and as many Kazakh ones, group ids shuffled, in parts of 1M rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tasks.corpus.schema import CORPUS_SCHEMA

    rng = np.random.default_rng(rows)
    order = rng.permutation(rows)
    paths = []
    for part, start in enumerate(range(0, rows, 1_000_000)):
        g = order[start : start + 1_000_000]
        gid = pc.binary_join_element_wise("g", pc.utf8_lpad(pa.array(g).cast(pa.string()), 10, "0"), "")
        number = pa.array(g).cast(pa.string())
        columns = []
        for lang, word in (
            ("eng_Latn", "the river city bright small people water under over light sentence "),
            ("kaz_Cyrl", "өзен қала жарық кіші адамдар су астында сөйлем "),
        ):
            n = len(g)
            columns.append(
                pa.table(
                    {
                        "id": pc.binary_join_element_wise(gid, lang, ":"),
                        "group_id": gid,
                        "lang": pa.array([lang] * n),
                        "text": pc.binary_join_element_wise(word, number, ""),
                        "split": pa.array(np.where(g % 10 == 0, "dev", "train")),
                        "source": pa.array(["synthetic"] * n),
                    },
                    schema=CORPUS_SCHEMA,
                )  # fmt: skip
            )
        path = folder / f"part-{part:05d}.parquet"
        pq.write_table(pa.concat_tables(columns), path)
        paths.append(path)
    return paths


def naive_source_rows(corpus: ParquetCorpus, lang: str) -> Any:
    """translate's `source_rows` before issue 17: the whole corpus with its texts."""
    import pyarrow.compute as pc

    table = corpus.read_table(["group_id", "lang", "text", "split", "source"])
    table = table.filter(pc.equal(table["lang"], lang))
    table = table.sort_by([("group_id", "ascending")])
    if len(table) > 1 and pc.count_distinct(table["group_id"]).as_py() != len(table):
        raise ValueError("duplicates")
    return table


def case_translate(rows: int, naive: bool, what: str, folder: Path) -> dict:
    from tasks.translate.config import TranslateConfig
    from tasks.translate.stage import shard_source_rows, source_shard_bounds

    corpus = ParquetCorpus(sorted(folder.glob("part-*.parquet")))
    config = TranslateConfig.model_validate({"targets": ["kaz_Cyrl"], "shard_rows": SHARD_ROWS})
    middle = (rows // SHARD_ROWS // 2) * SHARD_ROWS  # a shard in the middle
    if what == "plan":  # the plan's work on the data: every shard's rows and first/last group id
        if naive:
            return measured(lambda: naive_source_rows(corpus, "eng_Latn").num_rows)
        return measured(lambda: len(source_shard_bounds(config, corpus)))
    if naive:
        return measured(lambda: naive_source_rows(corpus, "eng_Latn").slice(middle, SHARD_ROWS))
    _, _, first, last = source_shard_bounds(config, corpus)[middle // SHARD_ROWS]  # the plan's work, not measured here
    return measured(lambda: shard_source_rows(config, corpus, first, last))


# ----------------------------------------------------------------------------- evaluate


def write_benchmarks(folder: Path, rows: int) -> None:
    """BUCC-like de-en training/test splits of `rows` lines each side, gold 1/10; Tatoeba-like pair of `rows` lines."""
    ids = np.arange(rows).astype(str)
    for split in ("training", "test"):
        for side, word in (("de", "Satz"), ("en", "sentence")):
            lines = np.char.add(np.char.add(np.char.add(f"{side}-", ids), f"\t{word} "), ids)
            (folder / f"de-en.{split}.{side}").write_text("\n".join(lines.tolist()) + "\n", encoding="utf-8")
        gold = np.char.add(np.char.add("de-", ids[::10]), np.char.add("\ten-", ids[::10]))
        (folder / f"de-en.{split}.gold").write_text("\n".join(gold.tolist()) + "\n", encoding="utf-8")
    for side, word in (("kaz", "сөйлем"), ("eng", "sentence")):
        (folder / f"tatoeba.kaz-eng.{side}").write_text("\n".join(np.char.add(f"{word} ", ids).tolist()) + "\n", encoding="utf-8")
    past = time.time() - 3600
    for path in [folder, *folder.iterdir()]:
        os.utime(path, (past, past))


def case_evaluate(rows: int, naive: bool, folder: Path) -> dict:
    from tasks.evaluate.benchmarks import bucc, tatoeba

    readers = [
        (bucc.read_bucc, (folder, "de", "training")), (bucc.read_bucc, (folder, "de", "test")),
        (tatoeba.read_tatoeba, (folder, "kaz")),
    ]  # fmt: skip

    def three_reads() -> None:  # plan-time check, the trained model, the untrained base
        for _ in range(3):
            for reader, args in readers:
                (reader.__wrapped__ if naive else reader)(*args)

    return measured(three_reads)


# ----------------------------------------------------------------------------- driver


def child(case: str, rows: int, naive: bool, folder: str | None) -> dict:
    sys.path.insert(0, str(REPO))
    if case == "train.join":
        return case_train_join(rows, naive)
    if case == "train.step":
        return case_train_step(rows, naive)
    if case.startswith("translate."):
        return case_translate(rows, naive, case.split(".")[1], Path(folder))
    return case_evaluate(rows, naive, Path(folder))


def _out_of_memory(result: subprocess.CompletedProcess) -> bool:
    """The child died for want of memory under the cap: a MemoryError, or an allocator's abort (SIGABRT)."""
    signs = ("MemoryError", "memory allocation", "Cannot allocate memory", "std::bad_alloc", "out of memory", "ArrowMemoryError")
    return result.returncode == -6 or any(sign in result.stderr for sign in signs)


def measure(case: str, rows: int, naive: bool, folder: Path | None, timeout: float, cap_gib: float = CAP_GIB) -> dict | None:
    """One case in a fresh process capped at `cap_gib` of address space: its figures, None when it
    timed out, {"did_not_fit": cap} when it ran out of memory under the cap."""
    command = [sys.executable, __file__, "--child", case, "--rows", str(rows), "--cap-gib", str(cap_gib)]
    command += (["--naive"] if naive else []) + (["--folder", str(folder)] if folder else [])
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), **ALLOCATORS}
        )
    except subprocess.TimeoutExpired:
        return None
    if result.returncode != 0:
        if _out_of_memory(result):
            return {"did_not_fit": cap_gib}
        raise RuntimeError(f"{case} {rows} naive={naive}: {result.stderr.strip().splitlines()[-1:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_cases(
    sizes: list[int], naive_max: int, only: list[str] | None, timeout: float, report=print, cap_gib: float = CAP_GIB
) -> list[dict]:
    results = []
    for rows in sizes:
        with tempfile.TemporaryDirectory(prefix="xlembed-data-prep-") as tmp:
            folder = Path(tmp)
            prepared = set()
            for case in only or CASES:
                kind = case.split(".")[0]
                if kind in ("translate", "evaluate") and kind not in prepared:
                    (write_corpus if kind == "translate" else write_benchmarks)(folder, rows)
                    prepared.add(kind)
                stage = measure(case, rows, False, folder, timeout, cap_gib)
                naive = measure(case, rows, True, folder, timeout, cap_gib) if rows <= naive_max else None
                row = {"case": case, "rows": rows, "stage": stage, "naive": naive}
                results.append(row)
                report(row)
    return results


def table_line(row: dict) -> str:
    s, n = row["stage"], row["naive"]
    if s is None:
        return f"| {row['case']} | {row['rows']:,} | timed out | | | | | |"
    if "did_not_fit" in s:
        return f"| {row['case']} | {row['rows']:,} | did not fit under the {s['did_not_fit']:g} GiB cap | | | | | |"
    if n and "did_not_fit" in n:
        naive = f"did not fit under the {n['did_not_fit']:g} GiB cap | | |"
    elif n:
        naive = f"{n['seconds']:.2f} | {n['peak_mib']:.0f} | {n['seconds'] / s['seconds']:.1f}x | {n['peak_mib'] / max(s['peak_mib'], 1):.1f}x"
    else:
        naive = "not run | | |"
    return f"| {row['case']} | {row['rows']:,} | {s['seconds']:.2f} | {s['peak_mib']:.0f} | {naive} |"


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: each case's seconds and peak MiB vs the naive code."""
    sizes = [100_000] if quick else [100_000, 1_000_000]
    rows = []
    for r in run_cases(sizes, naive_max=sizes[-1], only=None, timeout=900, report=lambda row: None):
        if r["stage"] is None or r["naive"] is None or "did_not_fit" in r["stage"] or "did_not_fit" in r["naive"]:
            continue
        case = f"{r['case']}, {r['rows']:,} rows"
        rows.append(
            {
                "case": case,
                "measure": "seconds",
                "stage": r["stage"]["seconds"],
                "reference": r["naive"]["seconds"],
                "reference_name": "naive",
                "higher_is_better": False,
            }
        )
        rows.append(
            {
                "case": case,
                "measure": "peak MiB above inputs",
                "stage": max(r["stage"]["peak_mib"], 1.0),
                "reference": max(r["naive"]["peak_mib"], 1.0),
                "reference_name": "naive",
                "higher_is_better": False,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--naive-max", type=int, default=1_000_000, help="largest size the naive code is run at")
    parser.add_argument("--only", nargs="+", choices=CASES)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per case and process")
    parser.add_argument("--child", choices=CASES)
    parser.add_argument("--rows", type=int)
    parser.add_argument("--naive", action="store_true")
    parser.add_argument("--folder")
    parser.add_argument("--cap-gib", type=float, default=CAP_GIB, help="address-space cap (RLIMIT_AS) of each case's process")
    args = parser.parse_args()
    cap = int(args.cap_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))  # the driver's input writing too
    if args.child:
        print(json.dumps(child(args.child, args.rows, args.naive, args.folder)))
        return
    print("| case | rows | stage s | stage peak MiB | naive s | naive peak MiB | time ratio | memory ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

    def report(row: dict) -> None:
        print(table_line(row), flush=True)
        print(json.dumps(row), file=sys.stderr, flush=True)  # every figure, the inputs' RSS (rss_before_mib) too

    run_cases(args.sizes, args.naive_max, args.only, args.timeout, report=report, cap_gib=args.cap_gib)


if __name__ == "__main__":
    main()
