"""The corpus stage: sources -> filtered, deduplicated, sampled, split long-format Parquet.

One shard per source (per language pair for Tatoeba), each cached on its own, so an
interrupted run resumes at the first source that did not finish.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import polars as pl
import pyarrow as pa

from tasks.corpus.config import CorpusConfig
from tasks.corpus.dedup import add_near_duplicate_keys
from tasks.corpus.filters import drop_rows, mark_lid, mark_rows, min_langs_per_group
from tasks.corpus.lid import lid_check, lid_fingerprint
from tasks.corpus.readers import SourceError
from tasks.corpus.sampled_lid import SampledLid
from tasks.corpus.sampling import GroupSelector, NearDedupe, add_hashes
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.corpus.sources import Source, SourceIO
from tasks.shard_context import ShardContext
from tasks.stage import Inputs, ShardSpec, Stage

# 2: texts holding control characters (NUL, ESC, line breaks; not tab) are dropped as `control_characters`
CODE_VERSION = "2"
# LID on a sampled source only where it can change the sample (tasks/corpus/sampled_lid.py);
# False checks every row (same output, other counts): for tests and benchmarks/lid_throughput.py
LID_ON_SAMPLE_CANDIDATES = True


def source_langs(source: Source, shard: ShardSpec | None = None) -> list[str]:
    """FLORES codes of a source's columns (of one shard's), first = the group's pivot for the length ratio."""
    return source.languages(shard)


def plan_corpus_shards(config: CorpusConfig, inputs: Inputs) -> list[ShardSpec]:
    return [shard for index, source in enumerate(config.sources) for shard in source.shards(index)]


def source_io(config: CorpusConfig, source: Source) -> SourceIO:
    """What `source` reads and fingerprints its files with, under this config's settings."""
    return SourceIO(source.name, config.download_dir, config.read_batch_lines)


def to_long(frame: pl.DataFrame, langs: list[str], source_name: str) -> pa.Table:
    """Wide groups -> one row per (group, language) with a surviving text, in group order."""
    order = {lang: i for i, lang in enumerate(langs)}
    long = (
        frame.select("seq", "locator", "split", *langs)
        .unpivot(on=langs, index=["seq", "locator", "split"], variable_name="lang", value_name="text")
        .drop_nulls("text")
        .with_columns(pl.col("lang").replace_strict(order, return_dtype=pl.UInt32).alias("lang_order"))
        .sort("seq", "lang_order")
        .with_columns((pl.lit(f"{source_name}:") + pl.col("locator")).alias("group_id"))
        .with_columns((pl.col("group_id") + ":" + pl.col("lang")).alias("id"), pl.lit(source_name).alias("source"))
    )
    return long.select(CORPUS_SCHEMA.names).to_arrow()


def build_corpus_shard(config: CorpusConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> Iterator[pa.Table]:
    source = config.sources[shard.params["source"]]
    langs = source_langs(source, shard)
    near = config.filters.near_dedupe
    min_langs = min_langs_per_group(config.filters, langs)
    selector = GroupSelector(source.sample, config.filters.dedupe, NearDedupe(tuple(langs), min_langs) if near else None)
    check = lid_check(config.filters.lid)
    sampled_lid = None
    if LID_ON_SAMPLE_CANDIDATES and check is not None and SampledLid.applies(check, langs, min_langs, source.sample):
        sampled_lid = SampledLid(check, langs, min_langs, selector, config.seed, config.dev_fraction, near)
    lid_checked_rows = 0
    rows_by_lang: dict[str, int] = {}
    rows_by_split: dict[str, int] = {}
    dropped_by_lang: dict[str, dict[str, int]] = {}
    groups = 0
    io = source_io(config, source)
    seq = 0

    def emit(frame: pl.DataFrame) -> pa.Table:
        nonlocal groups
        table = to_long(frame, langs, source.name)
        groups += frame.height
        for key, counts in (("lang", rows_by_lang), ("split", rows_by_split)):
            for value, n in pl.from_arrow(table.select([key])).group_by(key).len().iter_rows():
                counts[value] = counts.get(value, 0) + n
        return table

    def count(dropped: Counter[tuple[str, str]], rejected: list[pl.DataFrame]) -> None:
        for (lang, reason), n in dropped.items():
            context.drop(reason, n)
            by_reason = dropped_by_lang.setdefault(lang, {})
            by_reason[reason] = by_reason.get(reason, 0) + n
        keep_rejected(context, rejected, source.name)

    try:
        for batch in source.read(shard, io):
            frame = batch.frame.with_columns(pl.int_range(seq, seq + batch.frame.height, dtype=pl.UInt64).alias("seq"))
            seq += frame.height
            context.read(frame.height * len(langs))
            marked = mark_rows(frame, langs, config.filters)
            if check is not None and sampled_lid is None:
                marked, checked = mark_lid(marked, langs, check)
                lid_checked_rows += checked
            rejected: list[pl.DataFrame] = []
            kept, dropped = drop_rows(marked, langs, min_langs, batch.null_reason, rejected)
            count(dropped, rejected)
            if sampled_lid is not None:
                sampled_lid.add(kept)  # LID, hashes and the selector's offer, when it can decide
                continue
            if near:
                kept = add_near_duplicate_keys(kept, langs)
            kept = add_hashes(kept, langs, config.seed, config.dev_fraction, split_by_key=near)
            for ready in selector.offer(kept):
                if ready.height:
                    yield emit(ready)
        if sampled_lid is not None:
            sampled_lid.flush()
            count(sampled_lid.dropped, sampled_lid.rejected)
            lid_checked_rows = sampled_lid.checked_rows
            context.drop("not_sampled", sampled_lid.unsampled_rows)
        for ready in selector.finish():
            yield emit(ready)
    except (FileNotFoundError, UnicodeError, pa.ArrowInvalid) as exc:
        # other OSErrors (network, storage) propagate unchanged so the flow can retry them
        raise SourceError(f"source {source.name!r}: {exc}") from exc
    if io.malformed[0]:
        context.read(io.malformed[0] * len(langs))
        context.drop("malformed_row", io.malformed[0] * len(langs))
    context.drop("duplicate", selector.duplicate_rows)
    context.drop("near_duplicate", selector.near_duplicate_rows)
    context.drop("group_incomplete", selector.incomplete_rows)
    context.drop("not_sampled", selector.unsampled_rows)
    context.metrics = {
        "groups": groups,
        "rows_by_lang": dict(sorted(rows_by_lang.items())),
        "rows_by_split": dict(sorted(rows_by_split.items())),
        "dropped_by_lang": {lang: dict(sorted(counts.items())) for lang, counts in sorted(dropped_by_lang.items())},
    }
    if check is not None:  # "lid": {"backend": "cld2", "not_identifiable": [...]}: languages it never drops
        context.metrics["lid"] = {
            **check.summary(langs),
            "checked": "sample_candidates" if sampled_lid is not None else "every_row",
            "checked_rows": lid_checked_rows,  # rows given to the backend; the lid_* counts are of these
        }
    if io.downloads:
        context.metrics["downloads"] = io.downloads  # public URLs only: no credentials


def keep_rejected(context: ShardContext, rejected: list[pl.DataFrame], source_name: str) -> None:
    """Hand the rows the filters dropped to `context.reject`, per reason, with the ids their
    rows would have had (`{source}:{locator}:{lang}`), and empty `rejected`."""
    if not rejected:
        return
    frame = pl.concat(rejected, how="vertical_relaxed").with_columns(
        (pl.lit(f"{source_name}:") + pl.col("locator") + ":" + pl.col("lang")).alias("id"), pl.lit(source_name).alias("source")
    )
    rejected.clear()
    for (reason,), part in frame.partition_by("reason", as_dict=True, maintain_order=True).items():
        context.reject(reason, part.select("id", "lang", "text", "source"))


def fingerprint_corpus_sources(config: CorpusConfig) -> dict[str, Any]:
    """The contents (sha256) of local and remote inputs, keyed by language or file name but not
    by their paths (the same bytes elsewhere share the artifact), as each source's `fingerprint`
    gives them; the LID backend's version and model file (sha256), when the LID filter is on."""
    prints: dict[str, Any] = {}
    lid = lid_fingerprint(config.filters.lid)
    if lid is not None:
        prints["filters.lid"] = lid  # not a source name: those cannot contain "."
    for source in config.sources:
        prints[source.name] = source.fingerprint(source_io(config, source))
    return prints


def check_corpus_sources(config: CorpusConfig) -> list[str]:
    """Problems with local source files found without reading them through: missing or
    unreadable files, line-aligned files of different lengths, TSV/Parquet columns that do not
    exist (each source's `check`). One line per problem, naming the source and the file (remote
    files are checked when they are fetched)."""
    problems: list[str] = []
    for source in config.sources:
        try:
            source.check()
        except SourceError as exc:
            problems.append(f"source {source.name!r}: {exc}")
        except (OSError, UnicodeError, pa.ArrowInvalid) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename else ""
            problems.append(f"source {source.name!r}: cannot read {where}{reason}")
    return problems


CORPUS_STAGE: Stage[CorpusConfig] = Stage(
    name="corpus",
    code_version=CODE_VERSION,
    config_model=CorpusConfig,
    schema=CORPUS_SCHEMA,
    plan_shards=plan_corpus_shards,
    build_shard=build_corpus_shard,
    fingerprint_sources=fingerprint_corpus_sources,
    check_sources=check_corpus_sources,
    description="read, filter, dedupe, sample and split source text into multi-way groups",
)
