"""A corpus or translate artifact as a dataset the Hugging Face `datasets` library loads as is.

`export_dataset` writes a folder in the hub's layout: one Parquet config per view of the
corpus, a `README.md` dataset card with the YAML front matter the hub reads (configs and
their data files per split, languages, licences, task categories, size category), then prose
that says where the rows come from (sources and their licences, filters and what they
dropped, the translation model and its settings, the artifact key). `push_dataset` uploads
such a folder with `huggingface_hub`.

Configs (`layout`):

- `multiway`: one row per translation group: one text column per language (FLORES-200 code;
  null where the group has no row in that language), then `group_id` and `source` (the
  corpus source the group was read from).
- `pairs`: one config `{pivot}-{lang}` per other language, the rows of the groups that have
  both: `anchor` (the pivot's text), `positive` (the other language's), `group_id`, `source`.
  The pivot is the translate stage's source language, or the language with the most rows in
  a corpus.

Text columns come first because sentence-transformers' trainers take a dataset's leading
columns as the model's inputs (and `anchor`/`positive` name a pair as its losses do). The
corpus's `dev` split is exported as `validation`, the name `datasets` and the hub use; the
card's `dataset_info` lists each config's features and split sizes.

The artifact is streamed: both stages write a group's rows next to each other (the corpus in
source order, translate in group order), so a batch is turned into groups once the next
group id shows up. That the number of groups written equals the artifact's own count is
checked at the end.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from storage import ArtifactStore, Manifest
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.publish import ExportError
from tasks.publish.dataset_card import (
    ExportedConfig,
    config_schema,
    corpus_languages,
    dataset_card,
    split_order,
    text_columns,
)
from tasks.publish.permissions import readable_by_all

Layout = Literal["multiway", "pairs", "both"]
HUB_SPLITS = {"dev": "validation"}  # the corpus's split names as the hub names them
MACHINE_SOURCE_PREFIX = "nllb:"  # the translate stage's `source` of translated rows
ROWS_PER_FILE = 1_000_000
CARD = "README.md"


@dataclass
class ExportResult:
    folder: Path
    stage: str
    key: str
    configs: list[ExportedConfig]
    rows_by_lang: dict[str, int]
    groups: int
    card: str


# --------------------------------------------------------------------------- reading
def _group_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pl.DataFrame]:
    """Long rows in batches whose groups are whole: a batch's last group waits for the next."""
    pending: pl.DataFrame | None = None
    for batch in batches:
        frame = pl.from_arrow(pa.Table.from_batches([batch]))
        if pending is not None:
            frame = pl.concat([pending, frame])
        if frame.is_empty():
            continue
        last = frame["group_id"][-1]
        tail = frame["group_id"] == last
        pending = frame.filter(tail)
        ready = frame.filter(~tail)
        if ready.height:
            yield ready
    if pending is not None and pending.height:
        yield pending


def _wide(frame: pl.DataFrame, languages: Sequence[str]) -> pl.DataFrame:
    """One row per group: group_id, split, source, a text column per language (in order)."""
    duplicated = frame.select("group_id", "lang").is_duplicated()
    if duplicated.any():
        row = frame.filter(duplicated).row(0, named=True)
        raise ExportError(f"group {row['group_id']!r} has more than one {row['lang']} row")
    origin = (
        frame.with_columns(pl.col("source").str.starts_with(MACHINE_SOURCE_PREFIX).alias("machine"))
        .sort("machine", maintain_order=True)
        .group_by("group_id", maintain_order=True)
        .agg(
            pl.col("split").n_unique().alias("splits"),
            pl.col("split").first(),
            pl.col("source").first(),
            pl.col("machine").first(),
        )
    )
    if (origin["splits"] > 1).any():
        raise ExportError(f"group {origin.filter(pl.col('splits') > 1)['group_id'][0]!r} has rows in more than one split")
    # a group without its human row (the en-ablate draw left it out): its source is the one its id names
    origin = origin.with_columns(
        pl.when(pl.col("machine"))
        .then(pl.col("group_id").str.split(":").list.first())
        .otherwise(pl.col("source"))
        .alias("source")
    ).select("group_id", "split", "source")
    texts = frame.pivot(on="lang", index="group_id", values="text")
    missing = [lang for lang in languages if lang not in texts.columns]
    texts = texts.with_columns([pl.lit(None, pl.String).alias(lang) for lang in missing])
    return origin.join(texts, on="group_id", how="left", maintain_order="left").select(
        "group_id", "split", "source", *[pl.col(lang).cast(pl.String) for lang in languages]
    )


# --------------------------------------------------------------------------- writing
class _SplitWriter:
    """Parquet files `data/{config}/{split}-NNNNN.parquet`, a new one every `rows_per_file` rows."""

    def __init__(self, folder: Path, config: str, split: str, schema: pa.Schema, rows_per_file: int) -> None:
        self.folder, self.config, self.split, self.schema, self.rows_per_file = folder, config, split, schema, rows_per_file
        self.paths: list[Path] = []
        self.rows = 0
        self.nbytes = 0  # the rows' Arrow buffer bytes: `datasets`' num_bytes of a split
        self._writer: pq.ParquetWriter | None = None
        self._in_file = 0

    def write(self, table: pa.Table) -> None:
        start = 0
        while start < table.num_rows:
            if self._writer is None or self._in_file >= self.rows_per_file:
                self._roll()
            take = min(table.num_rows - start, self.rows_per_file - self._in_file)
            assert self._writer is not None
            part = table.slice(start, take)
            self._writer.write_table(part)
            self.nbytes += part.nbytes
            self._in_file += take
            self.rows += take
            start += take

    def _roll(self) -> None:
        if self._writer is not None:
            self._writer.close()
        path = self.folder / "data" / self.config / f"{self.split}-{len(self.paths):05d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.paths.append(path)
        self._writer = pq.ParquetWriter(path, self.schema, compression="zstd")
        self._in_file = 0

    def close(self) -> list[str]:
        """Close and name the files `{split}-NNNNN-of-MMMMM.parquet`, as the hub's converter does."""
        if self._writer is not None:
            self._writer.close()
        names = []
        for i, path in enumerate(self.paths):
            final = path.with_name(f"{self.split}-{i:05d}-of-{len(self.paths):05d}.parquet")
            path.rename(final)
            names.append(final.relative_to(self.folder).as_posix())
        return names


# --------------------------------------------------------------------------- export
def default_pivot(manifest: Manifest, rows_by_lang: Mapping[str, int]) -> str:
    source_lang = manifest.config.get("source_lang")
    if isinstance(source_lang, str) and source_lang in rows_by_lang:
        return source_lang
    return max(sorted(rows_by_lang), key=lambda lang: rows_by_lang[lang])


def export_dataset(
    store: ArtifactStore,
    stage: str,
    key: str,
    folder: str | os.PathLike[str],
    *,
    layout: Layout = "both",
    pivot: str | None = None,
    rows_per_file: int = ROWS_PER_FILE,
    batch_rows: int = 65_536,
) -> ExportResult:
    """Write the artifact `stage/key` (corpus long format) into `folder` as a hub dataset.

    `folder` must not exist or be empty; the files are written into `{folder}.partial` and
    renamed at the end, so a folder that exists holds a whole export."""
    manifest = store.manifest(stage, key)
    names = [c.name for c in manifest.columns]
    if names != CORPUS_SCHEMA.names:
        raise ExportError(
            f"{stage} {key[:12]} is not a corpus (columns {names}); export takes a corpus or translate artifact, "
            f"whose columns are {CORPUS_SCHEMA.names}"
        )
    target = Path(folder)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ExportError(f"{target}: exists and is not an empty folder; give a new folder")
    rows_by_lang = corpus_languages(manifest)
    pivot = pivot or default_pivot(manifest, rows_by_lang)
    if pivot not in rows_by_lang:
        raise ExportError(f"pivot {pivot!r} has no rows in {stage} {key[:12]}; languages: {sorted(rows_by_lang)}")
    languages = [pivot, *sorted(lang for lang in rows_by_lang if lang != pivot)]

    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    views: dict[str, list[str]] = {}
    if layout in ("multiway", "both"):
        views["multiway"] = languages
    if layout in ("pairs", "both"):
        views.update({f"{pivot}-{lang}": [pivot, lang] for lang in languages[1:]})
    writers: dict[tuple[str, str], _SplitWriter] = {}
    groups = 0
    try:
        batches = store.iter_batches(stage, key, ["group_id", "lang", "text", "split", "source"], batch_rows)
        for frame in _group_batches(batches):
            wide = _wide(frame, languages)
            groups += wide.height
            for split, part in wide.partition_by("split", as_dict=True, maintain_order=True).items():
                split_name = HUB_SPLITS.get(str(split[0]), str(split[0]))
                for config, langs in views.items():
                    rows = (
                        part
                        if config == "multiway"
                        else part.filter(pl.all_horizontal(pl.col(lang).is_not_null() for lang in langs))
                    )
                    if rows.height:
                        writer = writers.get((config, split_name))
                        if writer is None:
                            schema = config_schema(text_columns(config, langs))
                            writer = writers[(config, split_name)] = _SplitWriter(
                                partial, config, split_name, schema, rows_per_file
                            )
                        texts = [pl.col(lang).alias(name) for name, lang in zip(text_columns(config, langs), langs)]
                        writer.write(rows.select(*texts, "group_id", "source").to_arrow().cast(writer.schema))
        expected = manifest.metrics.get("groups")
        if isinstance(expected, int) and expected != groups:
            raise ExportError(
                f"{stage} {key[:12]}: wrote {groups:,} groups, the manifest counts {expected:,} (a group's rows are not together)"
            )
        configs = []
        for config, langs in views.items():
            exported = ExportedConfig(config, langs)
            for (name, split), writer in sorted(writers.items(), key=lambda item: (item[0][0], split_order(item[0][1]))):
                if name == config:
                    exported.files[split] = writer.close()
                    exported.rows[split] = writer.rows
                    exported.num_bytes[split] = writer.nbytes
                    exported.download_size += sum((partial / path).stat().st_size for path in exported.files[split])
            if exported.rows:
                configs.append(exported)
        card = dataset_card(store, manifest, configs, groups)
        (partial / CARD).write_text(card, encoding="utf-8")
    except BaseException:
        for writer in writers.values():
            if writer._writer is not None:
                writer._writer.close()
        shutil.rmtree(partial, ignore_errors=True)
        raise
    readable_by_all(partial)
    if target.exists():
        target.rmdir()
    partial.rename(target)
    return ExportResult(target, stage, key, configs, rows_by_lang, groups, card)


# --------------------------------------------------------------------------- the hub
def push_dataset(
    folder: str | os.PathLike[str],
    repo_id: str,
    *,
    private: bool | None = None,
    token: str | None = None,
    endpoint: str | None = None,
) -> str:
    """Create the dataset repo if needed and upload the folder in one commit; the commit URL.
    `endpoint` defaults to huggingface_hub's (env HF_ENDPOINT), the token to its login (env HF_TOKEN)."""
    from huggingface_hub import HfApi

    path = Path(folder)
    if not (path / CARD).is_file():
        raise ExportError(f"{path}: no {CARD}; push a folder written by export_dataset")
    api = HfApi(endpoint=endpoint, token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    info = api.upload_folder(
        repo_id=repo_id, repo_type="dataset", folder_path=path, commit_message=f"xlembed export ({path.name})"
    )
    return str(getattr(info, "commit_url", info))
