"""The corpus stage: sources -> filtered, deduplicated, sampled, split long-format Parquet.

One shard per source (per language pair for Tatoeba), each cached on its own, so an
interrupted run resumes at the first source that did not finish.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from tasks.corpus.config import (
    CldrSource,
    CorpusConfig,
    MultiwayDirSource,
    OpusMosesSource,
    ParquetSource,
    TatoebaSource,
    TextSource,
    TsvSource,
)
from tasks.corpus.dedup import add_near_duplicate_keys
from tasks.corpus.filters import drop_rows, mark_lid, mark_rows, min_langs_per_group
from tasks.corpus.languages import to_flores
from tasks.corpus.lid import lid_check, lid_fingerprint
from tasks.corpus.readers import (
    GroupBatch,
    SourceError,
    check_aligned_line_counts,
    open_binary,
    read_cldr,
    read_moses_zip,
    read_multiway_dir,
    read_parquet,
    read_tatoeba_pair,
    read_text_files,
    read_tsv,
)
from tasks.corpus.sampled_lid import SampledLid
from tasks.corpus.sampling import GroupSelector, NearDedupe, add_hashes
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.stage import Inputs, ShardContext, ShardSpec, Stage, file_fingerprint, folder_fingerprint

CODE_VERSION = "1"
# LID on a sampled source only where it can change the sample (tasks/corpus/sampled_lid.py);
# False checks every row (same output, other counts): for tests and benchmarks/lid_throughput.py
LID_ON_SAMPLE_CANDIDATES = True


def source_langs(source: Any, shard: ShardSpec | None = None) -> list[str]:
    """FLORES codes of a source's columns, first = the group's pivot for the length ratio."""
    if isinstance(source, TextSource):
        raw = list(source.files)
    elif isinstance(source, (TsvSource, ParquetSource)):
        raw = list(source.columns)
    elif isinstance(source, TatoebaSource):
        raw = ["eng", shard.params["lang"]] if shard else ["eng", *source.langs]
    else:
        raw = list(source.langs)
    return [to_flores(code) for code in raw]


def plan_corpus_shards(config: CorpusConfig, inputs: Inputs) -> list[ShardSpec]:
    shards = []
    for index, source in enumerate(config.sources):
        if isinstance(source, TatoebaSource):
            for lang in source.langs:
                shard_id = f"{source.name}-{lang.lower().replace('_', '-')}"
                shards.append(ShardSpec(shard_id, {"source": index, "lang": lang}, f"{source.name} {lang}-eng"))
        else:
            shards.append(ShardSpec(source.name, {"source": index}, f"{source.name} ({source.kind})"))
    return shards


def _open_source(
    config: CorpusConfig, source: Any, shard: ShardSpec, malformed: list[int], downloads: dict[str, Any]
) -> Iterator[GroupBatch]:
    batch = config.read_batch_lines
    if isinstance(source, TextSource):
        files = {lang: _local_copy(config, url, source.sha256.get(lang), downloads) for lang, url in source.files.items()}
        return read_text_files(files, batch)
    if isinstance(source, TsvSource):
        return read_tsv(source.path, source.columns, source.header, batch, malformed)
    if isinstance(source, ParquetSource):
        return read_parquet(source.path, source.columns, batch)
    if isinstance(source, OpusMosesSource):
        return read_moses_zip(Path(_local_copy(config, source.url, source.sha256, downloads)), source.langs, batch)
    if isinstance(source, MultiwayDirSource):
        return read_multiway_dir(source.path, source.langs, source.pattern, batch, source.files)
    if isinstance(source, TatoebaSource):
        return read_tatoeba_pair(source.path, shard.params["lang"], batch)
    if isinstance(source, CldrSource):
        return read_cldr(source.langs, source.categories)
    raise TypeError(f"unsupported source {type(source).__name__}")


def _local_copy(config: CorpusConfig, url: str, sha256: str | None, downloads: dict[str, Any]) -> str:
    """Remote files are fetched once into the download cache (checksum recorded); local ones are read in place."""
    if "://" not in url or url.startswith("file://"):
        return url
    from tasks.corpus.download import fetch

    fetched = fetch(url, Path(config.download_dir).expanduser(), expected_sha256=sha256)
    downloads[fetched.url] = {"sha256": fetched.sha256, "bytes": fetched.bytes}
    return str(fetched.path)


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
    malformed = [0]
    downloads: dict[str, Any] = {}
    seq = 0

    def emit(frame: pl.DataFrame) -> pa.Table:
        nonlocal groups
        table = to_long(frame, langs, source.name)
        groups += frame.height
        for key, counts in (("lang", rows_by_lang), ("split", rows_by_split)):
            for value, n in pl.from_arrow(table.select([key])).group_by(key).len().iter_rows():
                counts[value] = counts.get(value, 0) + n
        return table

    def count(dropped: Counter[tuple[str, str]]) -> None:
        for (lang, reason), n in dropped.items():
            context.drop(reason, n)
            by_reason = dropped_by_lang.setdefault(lang, {})
            by_reason[reason] = by_reason.get(reason, 0) + n

    try:
        for batch in _open_source(config, source, shard, malformed, downloads):
            frame = batch.frame.with_columns(pl.int_range(seq, seq + batch.frame.height, dtype=pl.UInt64).alias("seq"))
            seq += frame.height
            context.read(frame.height * len(langs))
            marked = mark_rows(frame, langs, config.filters)
            if check is not None and sampled_lid is None:
                marked, checked = mark_lid(marked, langs, check)
                lid_checked_rows += checked
            kept, dropped = drop_rows(marked, langs, min_langs, batch.null_reason)
            count(dropped)
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
            count(sampled_lid.dropped)
            lid_checked_rows = sampled_lid.checked_rows
            context.drop("not_sampled", sampled_lid.unsampled_rows)
        for ready in selector.finish():
            yield emit(ready)
    except (FileNotFoundError, UnicodeError, pa.ArrowInvalid) as exc:
        # other OSErrors (network, storage) propagate unchanged so the flow can retry them
        raise SourceError(f"source {source.name!r}: {exc}") from exc
    if malformed[0]:
        context.read(malformed[0] * len(langs))
        context.drop("malformed_row", malformed[0] * len(langs))
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
    if downloads:
        context.metrics["downloads"] = downloads  # public URLs only: no credentials


def _fingerprint_path(config: CorpusConfig, source: str, path: str, sha256: str | None = None) -> dict[str, Any]:
    """The content of what `path` names: a local file's sha256, a Parquet dataset's files by
    relative name, a remote file's sha256 (declared in the config, else that of its copy in the
    download cache, fetched now if it never was: the build reads that copy)."""
    if "://" in path and not path.startswith("file://"):
        if sha256:
            return {"sha256": sha256.strip().lower().removeprefix("sha256:")}
        from tasks.corpus.download import DownloadError, fetch

        try:
            fetched = fetch(path, Path(config.download_dir).expanduser())
        except DownloadError as exc:
            raise SourceError(f"source {source!r}: {exc}") from exc
        return {"sha256": fetched.sha256}
    local = Path(path.removeprefix("file://")).expanduser()
    if not local.exists():
        raise SourceError(f"source {source!r}: file not found: {local}")
    if local.is_dir():  # a Parquet dataset: its files, since a directory's mtime misses edits in place
        return folder_fingerprint(local, (part for part in local.rglob("*.parquet") if part.is_file()))
    return file_fingerprint(local)


def fingerprint_corpus_sources(config: CorpusConfig) -> dict[str, Any]:
    """The contents (sha256) of local and remote inputs, keyed by language or file name but not
    by their paths (the same bytes elsewhere share the artifact); Babel's version for CLDR; the
    LID backend's version and model file (sha256), when the LID filter is on."""
    prints: dict[str, Any] = {}
    lid = lid_fingerprint(config.filters.lid)
    if lid is not None:
        prints["filters.lid"] = lid  # not a source name: those cannot contain "."
    for source in config.sources:
        name = source.name
        if isinstance(source, TextSource):
            prints[name] = {lang: _fingerprint_path(config, name, p, source.sha256.get(lang)) for lang, p in source.files.items()}
        elif isinstance(source, (TsvSource, ParquetSource)):
            prints[name] = _fingerprint_path(config, name, source.path)
        elif isinstance(source, OpusMosesSource):
            prints[name] = _fingerprint_path(config, name, source.url, source.sha256)
        elif isinstance(source, MultiwayDirSource):
            prints[name] = {
                lang: _fingerprint_path(config, name, os.path.join(source.path, source.file_name(lang))) for lang in source.langs
            }
        elif isinstance(source, TatoebaSource):
            prints[name] = {
                f"{lang}-{side}": _fingerprint_path(config, name, os.path.join(source.path, f"tatoeba.{lang}-eng.{side}"))
                for lang in source.langs
                for side in (lang, "eng")
            }
        elif isinstance(source, CldrSource):
            import babel

            prints[name] = {"babel": babel.__version__}
    return prints


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _check_tsv_header(source: TsvSource) -> None:
    with open_binary(source.path) as stream:
        first = stream.readline().decode("utf-8-sig", errors="replace").rstrip("\r\n")
    fields = first.split("\t")
    for lang, column in source.columns.items():
        if isinstance(column, int):
            if column >= len(fields):
                raise SourceError(f"{source.path}: column {column} for {lang} does not exist; the first line has {len(fields)} columns")
        elif not source.header:
            raise SourceError(f"{source.path}: column {column!r} for {lang} is a name, but header = false")
        elif column not in fields:
            raise SourceError(f"{source.path}: no column {column!r} for {lang}; columns are {fields}")


def _check_parquet_columns(source: ParquetSource) -> None:
    import pyarrow.parquet as pq

    local = Path(source.path.removeprefix("file://")).expanduser()
    parts = sorted(local.rglob("*.parquet")) if local.is_dir() else [local]
    if not parts:
        raise SourceError(f"{local}: a directory without .parquet files")
    names = pq.read_schema(parts[0]).names
    missing = [column for column in source.columns.values() if column not in names]
    if missing:
        raise SourceError(f"{parts[0]}: no columns {missing}; columns are {names}")


def check_corpus_sources(config: CorpusConfig) -> list[str]:
    """Problems with local source files found without reading them through: missing or
    unreadable files, line-aligned files of different lengths, TSV/Parquet columns that do not
    exist. One line per problem, naming the source and the file (remote files are checked
    when they are fetched)."""
    problems: list[str] = []
    for source in config.sources:
        aligned: list[str] = []
        try:
            if isinstance(source, TextSource):
                aligned = [path for path in source.files.values() if _is_local(path)]
                if len(aligned) < len(source.files):
                    aligned = []  # mixed with URLs: counted after the download
            elif isinstance(source, MultiwayDirSource) and _is_local(source.path):
                aligned = [os.path.join(source.path, source.file_name(lang)) for lang in source.langs]
            elif isinstance(source, TatoebaSource) and _is_local(source.path):
                for lang in source.langs:
                    base = os.path.join(source.path, f"tatoeba.{lang}-eng")
                    check_aligned_line_counts([(f"{base}.{lang}", f"{base}.{lang}"), (f"{base}.eng", f"{base}.eng")])
            elif isinstance(source, TsvSource) and _is_local(source.path):
                _check_tsv_header(source)
            elif isinstance(source, ParquetSource) and _is_local(source.path):
                _check_parquet_columns(source)
            missing = [path for path in aligned if not Path(path.removeprefix("file://")).expanduser().exists()]
            if missing:
                raise SourceError(f"file not found: {', '.join(str(Path(p).expanduser().absolute()) for p in missing)}")
            if len(aligned) > 1:
                check_aligned_line_counts([(path, path) for path in aligned])
            elif aligned:
                with open_binary(aligned[0]):
                    pass
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
