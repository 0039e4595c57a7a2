"""The dataset card (README.md) of an exported corpus or translate artifact: YAML front matter
the hub reads (configs and their data files per split, languages, licences, task categories,
size category), then prose that says where the rows come from (sources and their licences,
filters and what they dropped, the translation model and its settings, the artifact key).
`export_dataset` (tasks/publish/dataset.py) writes the data files and fills `ExportedConfig`;
both read a config's columns from here (`text_columns`, `config_schema`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from storage import ArtifactStore, Manifest
from tasks.corpus.sources import SOURCES, Licence
from tasks.languages import hub_language
from tasks.publish import ExportError
from tasks.registry import lookup

PAIR_COLUMNS = ("anchor", "positive")  # a pair config's text columns: the pivot's text, the other language's
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


def config_schema(text_columns: Sequence[str]) -> pa.Schema:
    fields = [pa.field("group_id", pa.string(), nullable=False), pa.field("source", pa.string(), nullable=False)]
    return pa.schema([pa.field(name, pa.string()) for name in text_columns] + fields)


def text_columns(config: str, langs: Sequence[str]) -> list[str]:
    """A config's text column names: the languages in `multiway`, `anchor`/`positive` in a pair."""
    return list(langs) if config == "multiway" else list(PAIR_COLUMNS)


def corpus_languages(manifest: Manifest) -> dict[str, int]:
    """Rows per language as the stage counted them (both stages keep `rows_by_lang`)."""
    counts = manifest.metrics.get("rows_by_lang")
    if not isinstance(counts, Mapping) or not counts:
        raise ExportError(f"{manifest.stage} {manifest.key[:12]}: the manifest has no metrics.rows_by_lang")
    return {str(lang): int(n) for lang, n in counts.items()}


def split_order(split: str) -> tuple[int, str]:
    return ({"train": 0, "dev": 1, "validation": 1, "test": 2}.get(split, 3), split)


def size_category(rows: int) -> str:
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"),
              (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]  # fmt: skip
    return next(
        (name for bound, name in bounds if rows < bound),
        "n>1T" if rows >= 10**12 else "1B<n<10B" if rows < 10**10 else "10B<n<100B",
    )


@dataclass
class Lineage:
    corpus: Manifest | None = None
    translate: Manifest | None = None
    model: Manifest | None = None


def lineage_of(store: ArtifactStore, manifest: Manifest) -> Lineage:
    found = Lineage()
    if manifest.stage == "translate" or "translate_model" in manifest.input_keys:
        found.translate = manifest
        if "corpus" in manifest.input_keys:
            found.corpus = store.manifest("corpus", manifest.input_keys["corpus"])
        if "translate_model" in manifest.input_keys:
            found.model = store.manifest("translate_model", manifest.input_keys["translate_model"])
    else:
        found.corpus = manifest
    return found


def source_licences(lineage: Lineage) -> list[tuple[str, str, Licence]]:
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
    lineage = lineage_of(store, manifest)
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
                "features": [{"name": f.name, "dtype": "string"} for f in config_schema(text_columns(c.name, c.languages))],
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
            ["config", "languages", *sorted({s for c in configs for s in c.rows}, key=split_order)],
            [
                [
                    c.name,
                    len(c.languages),
                    *[c.rows.get(s, 0) for s in sorted({s for c in configs for s in c.rows}, key=split_order)],
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
