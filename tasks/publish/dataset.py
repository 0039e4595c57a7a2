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

import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from storage import ArtifactStore, Manifest
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.corpus.sources import SOURCES, Licence
from tasks.languages import hub_language
from tasks.publish import ExportError
from tasks.publish.permissions import readable_by_all
from tasks.registry import lookup

Layout = Literal["multiway", "pairs", "both"]
HUB_SPLITS = {"dev": "validation"}  # the corpus's split names as the hub names them
PAIR_COLUMNS = ("anchor", "positive")  # a pair config's text columns: the pivot's text, the other language's
MACHINE_SOURCE_PREFIX = "nllb:"  # the translate stage's `source` of translated rows
ROWS_PER_FILE = 1_000_000
CARD = "README.md"
TASK_CATEGORIES = ["translation", "sentence-similarity"]


# The licences of data sets that sources of several kinds read (a FLORES folder read by a
# `multiway_dir` or a `text` source), recognised by the source's name or location. A source
# kind that always reads one data set declares it (`Source.data_set`: tatoeba, cldr); any other
# source's licence is unknown and the card says so.
LICENCES: Mapping[str, tuple[str, Licence]] = {
    "flores-200": ("FLORES-200", Licence("CC-BY-SA 4.0", "cc-by-sa-4.0", "https://creativecommons.org/licenses/by-sa/4.0/")),
    "ntrex-128": ("NTREX-128", Licence("CC-BY-SA 4.0", "cc-by-sa-4.0", "https://creativecommons.org/licenses/by-sa/4.0/")),
    # translate: the model's licence; whether it binds its translations is for the publisher to check
    "nllb-200": (
        "NLLB-200 machine translations",
        Licence("CC-BY-NC 4.0 (the model's licence)", "cc-by-nc-4.0", "https://creativecommons.org/licenses/by-nc/4.0/"),
    ),
}
UNKNOWN_LICENCE = Licence("unknown: check it before publishing", "unknown", "")
_MATCH_BY_NAME = (("flores", "flores-200"), ("ntrex", "ntrex-128"))


def known_datasets() -> dict[str, tuple[str, Licence]]:
    """Data set -> (its name on the card, its licence): `LICENCES`, then those the registered source kinds declare."""
    found = dict(LICENCES)
    for cls in SOURCES.values():
        if cls.data_set is not None:
            found[cls.data_set.key] = (cls.data_set.title, cls.data_set.licence)
    return found


def source_dataset(source: Mapping[str, Any], locations: Iterable[str] = ()) -> str | None:
    """The `known_datasets` entry a corpus source config (as in a manifest) comes from, if known:
    the data set its kind declares, else one its name or location names (a registered kind that
    declares one counts as a name: a `text` source named "tatoeba-dev")."""
    cls = lookup(SOURCES, source.get("kind"))
    if cls is not None and cls.data_set is not None:
        return cls.data_set.key
    text = " ".join([str(source.get("name", "")), *map(str, locations)]).lower()
    by_kind = tuple((kind, cls.data_set.key) for kind, cls in SOURCES.items() if cls.data_set is not None)
    return next((dataset for needle, dataset in (*_MATCH_BY_NAME, *by_kind) if needle in text), None)


@dataclass
class ExportedConfig:
    name: str
    languages: list[str]
    rows: dict[str, int] = field(default_factory=dict)  # split -> rows
    files: dict[str, list[str]] = field(default_factory=dict)  # split -> paths relative to the folder
    num_bytes: dict[str, int] = field(default_factory=dict)  # split -> bytes of its rows in Arrow (what `datasets` counts)
    download_size: int = 0  # bytes of its Parquet files


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


def _schema(text_columns: Sequence[str]) -> pa.Schema:
    fields = [pa.field("group_id", pa.string(), nullable=False), pa.field("source", pa.string(), nullable=False)]
    return pa.schema([pa.field(name, pa.string()) for name in text_columns] + fields)


def _text_columns(config: str, langs: Sequence[str]) -> list[str]:
    """A config's text column names: the languages in `multiway`, `anchor`/`positive` in a pair."""
    return list(langs) if config == "multiway" else list(PAIR_COLUMNS)


# --------------------------------------------------------------------------- export
def corpus_languages(manifest: Manifest) -> dict[str, int]:
    """Rows per language as the stage counted them (both stages keep `rows_by_lang`)."""
    counts = manifest.metrics.get("rows_by_lang")
    if not isinstance(counts, Mapping) or not counts:
        raise ExportError(f"{manifest.stage} {manifest.key[:12]}: the manifest has no metrics.rows_by_lang")
    return {str(lang): int(n) for lang, n in counts.items()}


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
                            schema = _schema(_text_columns(config, langs))
                            writer = writers[(config, split_name)] = _SplitWriter(
                                partial, config, split_name, schema, rows_per_file
                            )
                        texts = [pl.col(lang).alias(name) for name, lang in zip(_text_columns(config, langs), langs)]
                        writer.write(rows.select(*texts, "group_id", "source").to_arrow().cast(writer.schema))
        expected = manifest.metrics.get("groups")
        if isinstance(expected, int) and expected != groups:
            raise ExportError(
                f"{stage} {key[:12]}: wrote {groups:,} groups, the manifest counts {expected:,} (a group's rows are not together)"
            )
        configs = []
        for config, langs in views.items():
            exported = ExportedConfig(config, langs)
            for (name, split), writer in sorted(writers.items(), key=lambda item: (item[0][0], _split_order(item[0][1]))):
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


def _split_order(split: str) -> tuple[int, str]:
    return ({"train": 0, "dev": 1, "validation": 1, "test": 2}.get(split, 3), split)


# --------------------------------------------------------------------------- the card
def size_category(rows: int) -> str:
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"),
              (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]  # fmt: skip
    return next(
        (name for bound, name in bounds if rows < bound),
        "n>1T" if rows >= 10**12 else "1B<n<10B" if rows < 10**10 else "10B<n<100B",
    )


@dataclass
class _Lineage:
    corpus: Manifest | None = None
    translate: Manifest | None = None
    model: Manifest | None = None


def _lineage(store: ArtifactStore, manifest: Manifest) -> _Lineage:
    found = _Lineage()
    if manifest.stage == "translate" or "translate_model" in manifest.input_keys:
        found.translate = manifest
        if "corpus" in manifest.input_keys:
            found.corpus = store.manifest("corpus", manifest.input_keys["corpus"])
        if "translate_model" in manifest.input_keys:
            found.model = store.manifest("translate_model", manifest.input_keys["translate_model"])
    else:
        found.corpus = manifest
    return found


def source_licences(lineage: _Lineage) -> list[tuple[str, str, Licence]]:
    """(source name, data set, licence) per corpus source, then the translation model's row."""
    rows = []
    if lineage.corpus is not None:
        locations = lineage.corpus.locations
        for index, source in enumerate(lineage.corpus.config.get("sources", [])):
            where = [json.dumps(value) for path, value in locations.items() if path.startswith(f"sources[{index}].")]
            dataset = source_dataset(source, where)
            if dataset is None:
                rows.append((str(source.get("name")), f"{source.get('kind')} source", UNKNOWN_LICENCE))
            else:
                rows.append((str(source.get("name")), *known_datasets()[dataset]))
    if lineage.model is not None:
        name = lineage.translate.metrics.get("model") if lineage.translate else None
        config = lineage.model.config
        described = " ".join(str(config.get(k) or "") for k in ("source", "model", "name")).lower()
        if "nllb" in described or "nllb" in str(name).lower():
            rows.append((f"nllb:{name}", *LICENCES["nllb-200"]))
        else:  # a tiny random model (tests, smoke) or another model: its outputs carry no licence we know
            rows.append((f"nllb:{name}", "machine translations", UNKNOWN_LICENCE))
    return rows


def _yaml(value: Any, indent: int = 0) -> list[str]:
    """A small YAML writer for the card's front matter (strings JSON-quoted: always valid YAML)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(v, (Mapping, list)) and v:
                lines.append(f"{pad}{k}:")
                lines.extend(_yaml(v, indent + 2))
            else:
                lines.append(f"{pad}{k}: {_scalar(v)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping):
                inner = _yaml(item, indent + 2)
                lines.append(f"{pad}- {inner[0].lstrip()}")
                lines.extend(inner[1:])
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    return lines


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if value is None or value == [] or value == {}:
        return "[]" if value == [] else "{}" if value == {} else "null"
    return json.dumps(str(value), ensure_ascii=False)


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _settings(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for name, value in config.items():
        if isinstance(value, Mapping):
            out += _settings(value, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", json.dumps(value, ensure_ascii=False)))
    return out


def dataset_card(store: ArtifactStore, manifest: Manifest, configs: Sequence[ExportedConfig], groups: int) -> str:
    """README.md: the hub's YAML front matter, then what the rows are and where they come from."""
    lineage = _lineage(store, manifest)
    licences = source_licences(lineage)
    hub_licences = sorted({licence.hub_id for _, _, licence in licences})
    others = sorted({(licence.name, licence.url) for _, _, licence in licences if licence.hub_id == "other"})
    all_langs = configs[0].languages if configs else []
    largest = max((sum(c.rows.values()) for c in configs), default=0)
    front: dict[str, Any] = {
        "language": sorted({hub_language(lang) for c in configs for lang in c.languages}),
        "license": hub_licences if len(hub_licences) > 1 else (hub_licences[0] if hub_licences else "unknown"),
    }
    if others:
        front["license_name"] = others[0][0].lower().replace(" ", "-")
        front["license_link"] = others[0][1]
    front |= {
        "task_categories": TASK_CATEGORIES,
        "size_categories": [size_category(largest)],
        "multilinguality": ["multilingual" if len(all_langs) > 2 else "translation"],
        "pretty_name": f"xlembed {manifest.stage} {manifest.key[:12]}",
        "configs": [
            {
                "config_name": c.name,
                **({"default": True} if i == 0 else {}),
                "data_files": [{"split": s, "path": f"data/{c.name}/{s}-*.parquet"} for s in c.rows],
            }
            for i, c in enumerate(configs)
        ],
        "dataset_info": [
            {
                "config_name": c.name,
                "features": [{"name": f.name, "dtype": "string"} for f in _schema(_text_columns(c.name, c.languages))],
                # name, num_bytes and num_examples: `datasets` ignores a card's splits (with a warning
                # per config) unless each entry has all three
                "splits": [
                    {"name": split, "num_bytes": c.num_bytes[split], "num_examples": rows} for split, rows in c.rows.items()
                ],
                "download_size": c.download_size,
                "dataset_size": sum(c.num_bytes.values()),
            }
            for c in configs
        ],
    }
    languages = sorted({lang for c in configs for lang in c.languages}, key=lambda lang: (lang != (all_langs or [lang])[0], lang))
    rows_by_lang = corpus_languages(manifest)
    parts = ["---", *_yaml(front), "---", "", f"# xlembed {manifest.stage} {manifest.key[:12]}", ""]
    kind = "a multi-way parallel corpus translated with NLLB-200" if lineage.translate else "a parallel corpus"
    parts += [
        f"This is {kind}, exported by xlembed {manifest.package_version} from the {manifest.stage} artifact "
        f"`{manifest.key}` (code version {manifest.code_version}, built {manifest.created_at}). "
        f"It holds {groups:,} translation groups in {len(languages)} languages: rows sharing a `group_id` translate each other.",
        "",
        "## Configs",
        "",
        "`multiway` has one row per group and a text column per language (FLORES-200 codes; null where the group has no row in it). "
        "Each `{pivot}-{lang}` config holds the groups that have both languages, as `anchor` (the pivot's text) and `positive` "
        "(the other language's): the column names of sentence-transformers' losses, which take the leading columns as inputs. "
        "`group_id` and `source` (the corpus source the group was read from) come last. The corpus's dev split is `validation`.",
        "",
        _table(
            ["config", "languages", *sorted({s for c in configs for s in c.rows}, key=_split_order)],
            [
                [
                    c.name,
                    len(c.languages),
                    *[c.rows.get(s, 0) for s in sorted({s for c in configs for s in c.rows}, key=_split_order)],
                ]
                for c in configs
            ],
        ),
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        f'dataset = load_dataset("REPO_OR_FOLDER", "{configs[0].name if configs else "multiway"}")',
        "```",
        "",
        "## Languages",
        "",
        _table(["language", "hub code", "rows"], [[lang, hub_language(lang), rows_by_lang.get(lang, 0)] for lang in languages]),
        "",
        "## Sources and licences",
        "",
        _table(
            ["source", "data set", "licence"],
            [[name, dataset, f"[{lic.name}]({lic.url})" if lic.url else lic.name] for name, dataset, lic in licences],
        ),
        "",
    ]
    if any(lic is UNKNOWN_LICENCE for _, _, lic in licences):
        parts += ["Some sources have a licence xlembed does not know: check their terms before publishing.", ""]
    if lineage.translate is not None:
        parts += [
            "The rows in the source language are human text from the corpus; every other language's rows are machine translations.",
            "",
        ]
    parts += ["## Filters", ""]
    for step in (lineage.corpus, lineage.translate):
        if step is None:
            continue
        settings = step.config.get("filters", {})
        parts += [f"### {step.stage} `{step.key[:12]}`", "", f"{step.rows_in:,} rows read, {step.rows_out:,} kept.", ""]
        parts += [_table(["setting", "value"], _settings(settings)), ""] if settings else []
        parts += [
            _table(["dropped because", "rows"], sorted(step.dropped.items(), key=lambda kv: -kv[1]))
            if step.dropped
            else "Nothing was dropped.",
            "",
        ]
        if step.stage == "translate" and isinstance(step.metrics.get("dropped_by_lang"), Mapping):
            reasons = sorted({r for counts in step.metrics["dropped_by_lang"].values() for r in counts})
            parts += [
                _table(
                    ["language", "kept", *reasons],
                    [
                        [lang, step.metrics.get("rows_by_lang", {}).get(lang, 0), *[counts.get(r, 0) for r in reasons]]
                        for lang, counts in sorted(step.metrics["dropped_by_lang"].items())
                    ],
                ),
                "",
            ]
    if lineage.translate is not None:
        config = {k: v for k, v in lineage.translate.config.items() if k != "filters"}
        model = lineage.model.config if lineage.model is not None else {}
        parts += [
            "## Translation",
            "",
            f"Model `{lineage.translate.metrics.get('model')}` (translate_model artifact `{lineage.translate.input_keys.get('translate_model', '')[:12]}`), "
            f"run with CTranslate2 on {lineage.translate.metrics.get('device')} ({lineage.translate.metrics.get('compute_type')}).",
            "",
            _table(["setting", "value"], _settings({"model": model, **config})),
            "",
        ]
    parts += [
        "## Provenance",
        "",
        _table(
            ["artifact", "key"],
            [[m.stage, f"`{m.key}`"] for m in (lineage.corpus, lineage.model, lineage.translate) if m is not None],
        ),
        "",
        f"Rebuild or inspect it with `xlembed artifacts show {manifest.stage} {manifest.key[:12]}` in the store it came from.",
        "",
    ]
    return "\n".join(parts)


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
