"""The translate stage: one language's rows of a corpus -> a multi-way parallel corpus.

Input: a corpus artifact (long format) and a translate_model artifact. The rows in
`source_lang` are put in group-id order and cut into shards of `shard_rows` (the plan reads
only the group ids; a shard streams the corpus once and keeps only its own rows, named by
its first and last group id); each shard is cached on its own, so an interrupted run resumes at the first missing shard and the shards
can run on many machines (the flow maps them over its task runner).

Output: the corpus stage's long format. Per source row, its own row (kept unless the
en-ablate draw leaves the source language out) and one row per target language that
survived the quality filters, all sharing the row's `group_id` and `split`. Translated rows
have source = ``nllb:{model name}``; the source row keeps the `source` it had.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tasks.corpus.lid import lid_check, lid_fingerprint
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.shard_context import ShardContext
from tasks.stage import InputArtifact, Inputs, ShardSpec, Stage
from tasks.translate.byte_order import byte_order
from tasks.translate.config import TranslateConfig
from tasks.translate.engine import NllbTokenizer, get_translator, translate_tokens
from tasks.translate.filters import OK, REASONS, quality_reasons
from tasks.translate.languages import nllb_code
from tasks.translate.layout import multiway_layout
from tasks.translate.model_stage import CT2_DIR, MODEL_INFO, TOKENIZER_DIR
from tasks.translate.report import GROUP_INCOMPLETE, KEPT, SAMPLES_DIR, shard_samples, summarize_translate

# 2: drop_identical compares texts as the corpus's drop_copies does (NFKC, case folded, no whitespace or punctuation)
CODE_VERSION = "2"


def model_info(model: InputArtifact) -> dict[str, Any]:
    return json.loads((model.local_dir() / MODEL_INFO).read_text(encoding="utf-8"))


def check_languages(config: TranslateConfig, info: dict[str, Any]) -> None:
    """Every language must be a token of this model's vocabulary (raises naming the code)."""
    known = set(info["languages"])
    for code in (config.source_lang, *config.targets):
        if nllb_code(code) not in known:
            raise ValueError(f"language {code!r} is not in the vocabulary of translation model {info['name']!r}")


@dataclass(frozen=True)
class SourceGroups:
    """The group ids of the corpus rows in the source language: `ids` in corpus order, and
    `order`, the permutation that puts them in byte order (the shards' stable order)."""

    ids: pa.Array
    order: np.ndarray

    def __len__(self) -> int:
        return len(self.order)

    def at(self, ranks: Sequence[int]) -> list[str]:
        """The group ids at these places of the shards' order."""
        return self.ids.take(pa.array(self.order[np.asarray(ranks, dtype=np.int64)])).to_pylist()


def source_group_ids(config: TranslateConfig, corpus: InputArtifact) -> SourceGroups:
    """The group ids of the corpus rows in the source language and their byte order. Streams
    two columns (the texts are not read) and sorts fixed-width integer keys of the ids
    (tasks/translate/byte_order.py), not the strings."""
    parts = [
        batch.column("group_id").filter(pc.equal(batch.column("lang"), config.source_lang))
        for batch in corpus.iter_batches(["group_id", "lang"])
    ]
    ids = pa.chunked_array(parts, type=CORPUS_SCHEMA.field("group_id").type).combine_chunks()
    del parts  # the batches' copies, while the ids are sorted
    if ids.null_count:
        raise ValueError(f"the corpus has {ids.null_count} {config.source_lang} rows without a group_id")
    order, duplicate = byte_order(ids)
    if duplicate is not None:
        group = ids[duplicate].as_py()
        raise ValueError(f"the corpus has groups with more than one {config.source_lang} row (group_id {group!r})")
    return SourceGroups(ids, order)


def source_shard_bounds(config: TranslateConfig, corpus: InputArtifact) -> list[tuple[int, int, str, str]]:
    """Per shard: its first and past-the-last place in the shards' order, and its first and
    last group id (what a shard reads by)."""
    groups = source_group_ids(config, corpus)
    starts = list(range(0, len(groups), config.shard_rows))
    stops = [min(len(groups), start + config.shard_rows) for start in starts]
    return list(zip(starts, stops, groups.at(starts), groups.at([stop - 1 for stop in stops])))


def shard_source_rows(config: TranslateConfig, corpus: InputArtifact, first: str, last: str) -> pa.Table:
    """The source-language rows with `first` <= group_id <= `last`, in group-id order: one
    streaming pass that keeps only this shard's rows, so a shard holds its own texts only."""
    columns = ["group_id", "lang", "text", "split", "source"]
    kept = []
    for batch in corpus.iter_batches(columns):
        group = batch.column("group_id")
        mine = pc.and_(
            pc.equal(batch.column("lang"), config.source_lang),
            pc.and_(pc.greater_equal(group, pa.scalar(first, group.type)), pc.less_equal(group, pa.scalar(last, group.type))),
        )
        kept.append(batch.filter(mine))
    schema = pa.schema([CORPUS_SCHEMA.field(name) for name in columns])
    table = pa.Table.from_batches(kept, schema=kept[0].schema if kept else schema).combine_chunks()
    table = table.sort_by([("group_id", "ascending")])
    groups = table["group_id"]
    if len(groups) > 1 and pc.count_distinct(groups).as_py() != len(groups):
        raise ValueError(f"the corpus has groups with more than one {config.source_lang} row")
    return table


def plan_translate_shards(config: TranslateConfig, inputs: Inputs) -> list[ShardSpec]:
    check_languages(config, model_info(inputs["translate_model"]))
    return [
        ShardSpec(
            f"part-{index:05d}",
            {"start": start, "stop": stop, "first": first, "last": last},
            f"{config.source_lang} rows {start}-{stop - 1}",
        )
        for index, (start, stop, first, last) in enumerate(source_shard_bounds(config, inputs["corpus"]))
    ]


def build_translate_shard(config: TranslateConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> Iterator[pa.Table]:
    model = inputs["translate_model"]
    info = model_info(model)
    check_languages(config, info)
    start, stop = int(shard.params["start"]), int(shard.params["stop"])
    if "first" in shard.params:  # the shard's first and last group id: read only its rows
        rows = shard_source_rows(config, inputs["corpus"], shard.params["first"], shard.params["last"])
    else:
        first, last = source_group_ids(config, inputs["corpus"]).at([start, stop - 1])
        rows = shard_source_rows(config, inputs["corpus"], first, last)
    if rows.num_rows != stop - start:
        raise ValueError(
            f"translate shard {shard.shard_id}: expected {stop - start} {config.source_lang} rows, read {rows.num_rows} (the plan does not match the corpus)"
        )
    context.read(rows.num_rows)
    group_ids: list[str] = rows["group_id"].to_pylist()
    texts: list[str] = rows["text"].to_pylist()

    pool = list(config.targets)
    layout = multiway_layout(group_ids, pool, config.k, config.include_source, config.seed)
    row_of, lang_of = np.nonzero(layout.targets)  # requests, row-major: by row, then pool order

    local = model.local_dir()
    tokenizer = NllbTokenizer(local / TOKENIZER_DIR / "tokenizer.json")
    source_tokens = tokenizer.encode(texts, nllb_code(config.source_lang), config.decoding.max_input_length)
    target_tokens = [nllb_code(lang) for lang in pool]
    translator = get_translator(
        local / CT2_DIR, config.device, config.compute_type, config.device_index, config.inter_threads, config.intra_threads
    )
    context.expect(len(row_of), "sentences")
    started = time.perf_counter()
    outputs = translate_tokens(
        translator,
        [source_tokens[r] for r in row_of],
        [[target_tokens[t]] for t in lang_of],
        config.decoding,
        config.max_batch_tokens,
        progress=context.progress,
    )
    seconds = time.perf_counter() - started

    output_ids = tokenizer.ids(outputs)
    output_texts = tokenizer.decode(output_ids)
    source_ids = tokenizer.ids([tokens[1:-1] for tokens in source_tokens])
    target_langs = [pool[t] for t in lang_of]
    reasons = quality_reasons(
        [texts[r] for r in row_of], output_texts, [source_ids[r] for r in row_of], output_ids, target_langs, config.filters
    )
    for code, name in REASONS.items():
        context.drop(name, int(np.count_nonzero(reasons == code)))

    kept = reasons == OK
    rows_per_group = layout.keep_source.astype(np.int64) + np.bincount(row_of[kept], minlength=len(group_ids))
    complete = rows_per_group >= config.min_rows_per_group
    context.drop("group_incomplete", int(rows_per_group[~complete].sum()))

    # output order: by group (row), the source row first, then the targets in pool order
    src_rows = np.nonzero(layout.keep_source & complete)[0]
    translated = np.nonzero(kept & complete[row_of])[0]
    out_row = np.concatenate([src_rows, row_of[translated]])
    out_lang = np.concatenate([np.zeros(len(src_rows), dtype=np.int64), lang_of[translated] + 1])
    out_text = np.concatenate([src_rows, len(texts) + translated])
    order = np.lexsort((out_lang, out_row))
    out_row, out_lang, out_text = out_row[order], out_lang[order], out_text[order]
    model_source = f"nllb:{info['name']}"
    group = rows["group_id"].take(out_row)
    lang = pa.array([config.source_lang, *pool], pa.string()).take(out_lang)
    source = pa.concat_arrays([rows["source"].combine_chunks(), pa.array([model_source], pa.string())]).take(
        np.where(out_lang == 0, out_row, rows.num_rows)
    )

    # per target language: what was asked, what each filter dropped, and a few samples of each outcome
    incomplete = max(REASONS) + 1
    outcome_names = np.array([KEPT, *(REASONS[code] for code in range(1, incomplete)), GROUP_INCOMPLETE], dtype=object)
    codes = np.where((reasons == OK) & ~complete[row_of], incomplete, reasons.astype(np.int64))
    counts = np.zeros((len(pool), incomplete + 1), dtype=np.int64)
    np.add.at(counts, (lang_of, codes), 1)
    samples = shard_samples(group_ids, texts, row_of, target_langs, output_texts, outcome_names[codes].tolist())
    samples_path = context.workdir / f"{shard.shard_id}.parquet"
    pq.write_table(samples, samples_path)
    context.attach(f"{SAMPLES_DIR}/{shard.shard_id}.parquet", samples_path)

    rows_by_lang = Counter(lang.to_pylist())
    context.metrics = {
        "groups": int(np.count_nonzero(complete)),
        "source_rows_not_drawn": int(np.count_nonzero(~layout.keep_source)),  # en-ablate: by design, not a loss
        "translations_requested": len(outputs),
        "translations_kept": len(translated),
        "source_tokens": int(sum(len(source_tokens[r]) for r in row_of)),
        "output_tokens": int(sum(len(o) for o in outputs)),
        "translate_seconds": round(seconds, 3),
        "rows_by_lang": dict(sorted(rows_by_lang.items())),
        "requested_by_lang": {lang: int(n) for lang, n in zip(pool, counts.sum(axis=1).tolist()) if n},
        "dropped_by_lang": {
            lang: {str(outcome_names[c]): int(counts[i, c]) for c in range(1, incomplete + 1) if counts[i, c]}
            for i, lang in enumerate(pool)
            if counts[i, 1:].any()
        },
        "model": info["name"],
        "device": config.device,
        "compute_type": config.compute_type,
    }
    check = lid_check(config.filters.lid)
    if check is not None:  # "lid": {"backend": "cld2", "not_identifiable": [...]}: targets it never drops
        context.metrics["lid"] = check.summary(pool)
    yield pa.table(
        {
            "id": pc.binary_join_element_wise(group, lang, ":"),
            "group_id": group,
            "lang": lang,
            "text": pa.array(texts + output_texts, pa.string()).take(out_text),
            "split": rows["split"].take(out_row),
            "source": source,
        },
        schema=CORPUS_SCHEMA,
    )


def fingerprint_translate(config: TranslateConfig) -> dict[str, Any]:
    """CTranslate2's version: a new release can change the numerics, hence the translations; the
    LID backend's version and model file (sha256), when the LID filter is on."""
    prints = {"ctranslate2": version("ctranslate2"), "tokenizers": version("tokenizers")}
    lid = lid_fingerprint(config.filters.lid)
    if lid is not None:
        prints["filters.lid"] = lid
    return prints


TRANSLATE_STAGE: Stage[TranslateConfig] = Stage(
    name="translate",
    code_version=CODE_VERSION,
    config_model=TranslateConfig,
    schema=CORPUS_SCHEMA,
    plan_shards=plan_translate_shards,
    build_shard=build_translate_shard,
    inputs=("corpus", "translate_model"),
    fingerprint_sources=fingerprint_translate,
    summarize=summarize_translate,
    description="translate one language's corpus rows into a multi-way parallel corpus with NLLB-200 (CTranslate2)",
)
