"""Tables and numbers shared by the evaluation report and the sweep comparison.

Metric values as people read them (percentages for accuracies and correlations, deltas with a
sign), and one table model rendered as Markdown (data escaped) or HTML (escaped, coloured
deltas), with the CSS both reports use.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from typing import Literal

# Metric name tokens (split on _ @ - . and space) that make a metric a percentage / a x100 correlation.
PERCENT_TOKENS = frozenset({"accuracy", "acc", "precision", "recall", "f1", "ndcg", "mrr", "map"})
CORRELATION_TOKENS = frozenset({"spearman", "pearson"})
# Retrieval margins (cosine differences, mostly within ±0.2) read best x100, like correlations.
MARGIN_TOKENS = frozenset({"margin"})
MISSING = "—"


def metric_scale(metric: str) -> float:
    """100 for percentages, correlations and margins, 1 for anything else (thresholds, counts, ...)."""
    tokens = set(re.split(r"[_@\-.\s]+", metric.lower()))
    return 100.0 if tokens & (PERCENT_TOKENS | CORRELATION_TOKENS | MARGIN_TOKENS) else 1.0


def pair_label(src: str, tgt: str | None) -> str:
    """A language, or a language pair as "src → tgt"."""
    return src if tgt is None else f"{src} → {tgt}"


def is_number(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def format_value(value: float | None, metric: str) -> str:
    if not is_number(value):
        return MISSING if value is None else "n/a"
    scale = metric_scale(metric)
    if scale != 1.0:
        return f"{value * scale:.1f}"
    return f"{value:.3f}"


def format_delta(delta: float, metric: str) -> str:
    if not math.isfinite(delta):
        return "n/a"
    scale = metric_scale(metric)
    digits = 1 if scale != 1.0 else 3
    rounded = round(delta * scale, digits) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"{rounded:+.{digits}f}"


def format_interval(low: float, high: float, metric: str) -> str:
    """A confidence interval of a delta in the delta's display units: `[+1.2, +4.5]`."""
    return f"[{format_delta(low, metric)}, {format_delta(high, metric)}]"


@dataclass
class Cell:
    text: str
    kind: Literal["text", "num", "pos", "neg", "zero", "missing"] = "text"


@dataclass
class Table:
    header: list[str]
    rows: list[list[Cell]]
    numeric: list[bool]  # per column: right-align
    # what the HTML page shows in the header (the full header becomes its tooltip), where a
    # column's full name would widen the page: the report's "Δ vs untrained base (accuracy_mean)"
    # is "Δ" beside its metric there; Markdown keeps the full header
    short_header: list[str] | None = None


LABEL_CHARS = 40  # a text cell this short (a language pair, a dataset) stays on one line in HTML


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|#])")


def md_escape(text: object) -> str:
    """Text from data, safe inside a Markdown table cell or heading."""
    escaped = _MD_SPECIAL.sub(r"\\\1", str(text))
    return " ".join(escaped.splitlines())


def md_code_free(text: str) -> str:
    """Like md_escape but leaves underscores alone (language codes read better as kaz_Cyrl than kaz\\_Cyrl)."""
    return md_escape(text).replace("\\_", "_")


def md_table(table: Table) -> str:
    lines = [
        "| " + " | ".join(md_code_free(h) for h in table.header) + " |",
        "|" + "|".join("---:" if num else "---" for num in table.numeric) + "|",
    ]
    for row in table.rows:
        lines.append("| " + " | ".join(md_code_free(cell.text) for cell in row) + " |")
    return "\n".join(lines)


def html_escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def _header_cell(full: str, shown: str, numeric: bool) -> str:
    title = f' title="{html_escape(full)}"' if shown != full else ""
    # a long metric name may break after an underscore (accuracy_/src_tgt), not inside a word
    text = html_escape(shown).replace("_", "_<wbr>")
    return f'<th class="{"num" if numeric else "txt"}"{title}>{text}</th>'


def _text_class(cell: Cell) -> str:
    return "txt label" if len(cell.text) <= LABEL_CHARS else "txt"


def html_table(table: Table) -> str:
    shown = table.short_header or table.header
    head = "".join(_header_cell(full, short, num) for full, short, num in zip(table.header, shown, table.numeric))
    body = []
    for row in table.rows:
        cells = "".join(
            f'<td class="{cell.kind if num else _text_class(cell)}">{html_escape(cell.text)}</td>'
            for cell, num in zip(row, table.numeric)
        )
        body.append(f"<tr>{cells}</tr>")
    # in a scrolling box: a table wider than the page scrolls instead of running past it, cut off
    return (
        f'<div class="scroll"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n' + "\n".join(body) + "\n</tbody>\n</table></div>"
    )


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 2rem auto;
       max-width: 72rem; padding: 0 1rem; color: #1b1b1b; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .3rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05rem; margin-top: 1.4rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .9rem; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #e4e4e4; }
th { background: #f4f4f4; text-align: left; position: sticky; top: 0; }
th.num, td.num, td.pos, td.neg, td.zero, td.missing { text-align: right; font-variant-numeric: tabular-nums; }
td.pos { color: #17692b; } td.neg { color: #b3261e; } td.missing { color: #999; }
td.num, td.pos, td.neg, td.zero, td.missing, td.label { white-space: nowrap; }
table.card th { background: none; font-weight: 600; }
.note { color: #555; font-size: .85rem; }
.scroll { overflow-x: auto; max-width: 100%; } .scroll th { position: static; }
figure { margin: 1.2rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #444; font-size: .9rem; max-width: 60rem; }
"""
