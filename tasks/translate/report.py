"""The translate stage's report: per target language, what was kept and what was dropped, and why.

Each shard keeps a few sample translations per (target language, outcome) in
`report/samples/{shard}.parquet`, where the outcome is `kept`, a quality filter's reason
(tasks/translate/filters.py) or `group_incomplete`. The samples are the rows whose group id
hashes lowest, so the merged sample (the lowest over all shards) does not depend on how the
rows were sharded. When the stage commits, `summarize_translate` merges them with the
per-language counts of the shards' metrics into `report/report.md` (shown in Prefect) and
`report/report.html` (linked from the store index).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from storage import ArtifactStore, ShardRecord
from tasks.drop_reasons import drop_reason
from tasks.reporting.tables import CSS, Cell, Table, html_escape, html_table, md_code_free, md_escape, md_table
from tasks.stage import merge_metrics
from tasks.translate.config import TranslateConfig
from tasks.translate.filters import REASONS
from tasks.translate.layout import row_hashes

SAMPLES_PER_OUTCOME = 3
SAMPLE_SEED = 0  # the hash that picks samples; fixed, so the report does not change with the layout seed
SAMPLES_DIR = "report/samples"
REPORT_DIR = "report"
KEPT = "kept"
GROUP_INCOMPLETE = drop_reason("group_incomplete")
OUTCOMES = [KEPT, *REASONS.values(), GROUP_INCOMPLETE]  # the order the report lists them in
SAMPLES_SCHEMA = pa.schema(
    [
        pa.field("lang", pa.string()),
        pa.field("outcome", pa.string()),
        pa.field("group_id", pa.string()),
        pa.field("source_text", pa.string()),
        pa.field("translation", pa.string()),
        pa.field("rank", pa.uint64()),
    ]
)


def shard_samples(
    group_ids: Sequence[str],
    source_texts: Sequence[str],
    row_of: np.ndarray,
    target_langs: Sequence[str],
    translations: Sequence[str],
    outcomes: Sequence[str],
    per_outcome: int = SAMPLES_PER_OUTCOME,
) -> pa.Table:
    """Up to `per_outcome` translations per (language, outcome), those whose group id hashes lowest."""
    ranks = row_hashes(group_ids, SAMPLE_SEED)[row_of] if len(group_ids) else np.zeros(0, dtype=np.uint64)
    frame = pl.DataFrame(
        {
            "lang": list(target_langs),
            "outcome": list(outcomes),
            "row": row_of.astype(np.int64),
            "translation": list(translations),
            "rank": ranks,
        },
        schema={"lang": pl.String, "outcome": pl.String, "row": pl.Int64, "translation": pl.String, "rank": pl.UInt64},
    )
    picked = frame.sort("rank", "lang").group_by("lang", "outcome", maintain_order=True).head(per_outcome)
    rows = picked["row"].to_numpy()
    return pa.table(
        {
            "lang": picked["lang"].to_arrow(),
            "outcome": picked["outcome"].to_arrow(),
            "group_id": pa.array([group_ids[i] for i in rows], pa.string()),
            "source_text": pa.array([source_texts[i] for i in rows], pa.string()),
            "translation": picked["translation"].to_arrow(),
            "rank": picked["rank"].to_arrow(),
        }
    ).cast(SAMPLES_SCHEMA)


def merge_samples(parts: Sequence[pa.Table], per_outcome: int = SAMPLES_PER_OUTCOME) -> pl.DataFrame:
    """The shards' samples reduced to the lowest-ranked `per_outcome` per (language, outcome)."""
    if not parts:
        return pl.from_arrow(SAMPLES_SCHEMA.empty_table())
    frame = pl.from_arrow(pa.concat_tables([p.cast(SAMPLES_SCHEMA) for p in parts]))
    return frame.sort("rank", "lang").group_by("lang", "outcome", maintain_order=True).head(per_outcome)


@dataclass
class TranslateReport:
    markdown: str
    html: str


def _outcome_order(outcome: str) -> int:
    return OUTCOMES.index(outcome) if outcome in OUTCOMES else len(OUTCOMES)


def build_report(
    config: TranslateConfig, key: str, metrics: Mapping[str, Any], dropped: Mapping[str, int], samples: pl.DataFrame
) -> TranslateReport:
    """Markdown and a self-contained HTML page: drop counts per filter and per language, then
    per language the sampled kept and dropped translations with the reason. No wall-clock
    figures (they are in the manifest's metrics): the same inputs give the same bytes, also
    after a resumed run."""
    model = metrics.get("model", "?")
    title = f"translate {key[:12]}: {config.source_lang} → {len(config.targets)} languages with {model}"
    by_lang: Mapping[str, Mapping[str, int]] = metrics.get("dropped_by_lang", {})
    requested: Mapping[str, int] = metrics.get("requested_by_lang", {})
    kept: Mapping[str, int] = metrics.get("rows_by_lang", {})
    reasons = [r for r in OUTCOMES[1:] if dropped.get(r) or any(counts.get(r) for counts in by_lang.values())]
    summary = (
        f"{metrics.get('translations_requested', 0):,} translations requested, {metrics.get('translations_kept', 0):,} kept, "
        f"{metrics.get('groups', 0):,} groups; {metrics.get('device', '?')} ({metrics.get('compute_type', '?')})."
    )
    filters = Table(
        ["dropped because", "rows"],
        [[Cell(reason), Cell(f"{n:,}", "num")] for reason, n in sorted(dropped.items(), key=lambda kv: -kv[1])]
        or [[Cell("(nothing)"), Cell("0", "num")]],
        [False, True],
    )
    per_lang = Table(
        ["language", "requested", "kept", *reasons],
        [
            [Cell(lang), Cell(f"{requested.get(lang, 0):,}", "num"), Cell(f"{kept.get(lang, 0):,}", "num"),
             *[Cell(f"{by_lang.get(lang, {}).get(r, 0):,}", "num") for r in reasons]]
            for lang in config.targets
        ],
        [False, True, True, *[True] * len(reasons)],
    )  # fmt: skip
    settings = ", ".join(f"{name} = {value}" for name, value in config.filters.model_dump().items())
    md = [
        f"# {md_code_free(title)}",
        "",
        md_escape(summary),
        "",
        f"Filters: {md_escape(settings)}",
        "",
        "## Drops per filter",
        "",
        md_table(filters),
        "",
    ]
    md += ["## Per target language", "", md_table(per_lang), ""]
    ht = [
        f"<h1>{html_escape(title)}</h1>",
        f"<p>{html_escape(summary)}</p>",
        f'<p class="note">Filters: {html_escape(settings)}</p>',
    ]
    ht += ["<h2>Drops per filter</h2>", html_table(filters), "<h2>Per target language</h2>", html_table(per_lang)]
    md += [
        "## Samples",
        "",
        f"Up to {SAMPLES_PER_OUTCOME} translations per language and outcome (the same rows whatever the sharding).",
        "",
    ]
    ht += [
        "<h2>Samples</h2>",
        f'<p class="note">Up to {SAMPLES_PER_OUTCOME} translations per language and outcome (the same rows whatever the sharding).</p>',
    ]
    for lang in config.targets:
        rows = sorted(
            samples.filter(pl.col("lang") == lang).iter_rows(named=True), key=lambda r: (_outcome_order(r["outcome"]), r["rank"])
        )
        table = Table(
            ["outcome", "group", "source", "translation"],
            [[Cell(r["outcome"]), Cell(r["group_id"]), Cell(r["source_text"]), Cell(r["translation"])] for r in rows]
            or [[Cell("(no translations)"), Cell(""), Cell(""), Cell("")]],
            [False] * 4,
        )
        md += [f"### {md_code_free(lang)}", "", md_table(table), ""]
        ht += [f"<h3>{html_escape(lang)}</h3>", html_table(table)]
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html_escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(ht) + "\n</body>\n</html>\n"
    )
    return TranslateReport("\n".join(md), page)


def summarize_translate(
    config: TranslateConfig, store: ArtifactStore, key: str, records: list[ShardRecord], workdir: Path
) -> dict[str, Path]:
    """The stage's `summarize` hook: report/report.md and report/report.html from all shards."""
    parts = []
    for record in records:
        for entry in record.files:
            if entry.path.startswith(f"files/{SAMPLES_DIR}/"):
                with store.verified_path("translate", key, entry) as local:
                    parts.append(pq.read_table(local))
    dropped: dict[str, int] = {}
    for record in records:
        for reason, n in record.dropped.items():
            dropped[reason] = dropped.get(reason, 0) + n
    report = build_report(config, key, merge_metrics(r.metrics for r in records), dropped, merge_samples(parts))
    folder = workdir / REPORT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text(report.markdown, encoding="utf-8")
    (folder / "report.html").write_text(report.html, encoding="utf-8")
    return {f"{REPORT_DIR}/report.md": folder / "report.md", f"{REPORT_DIR}/report.html": folder / "report.html"}
