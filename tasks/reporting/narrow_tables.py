"""Markdown tables cut to fit a viewer with a fixed content column.

The Prefect UI shows a markdown artifact in a column about 700 px wide (a 1,280 px window) and
puts a wider table in a sideways scroll, where its right-hand columns (the changes and their
intervals) go unseen. The report file keeps its full tables: it is part of a keyed artifact and
is read in editors and on GitHub, and the HTML page has narrow headers of its own. The copy sent
to the UI is narrowed here instead:

- a `Δ vs untrained base (metric)` header right after its metric's column becomes `Δ`, as in
  the HTML page (the note under each such table says what Δ is);
- a table still wider than the column is cut into several tables by column groups (a metric
  with the Δ, interval and significance columns that follow it stay together), each repeating
  the table's label columns, so every cell stays in its row beside the row's labels.

Widths are estimated in characters: the UI does not wrap table cells, so a column is as wide as
its longest cell plus the cell padding.
"""

from __future__ import annotations

import re

__all__ = ["UI_TABLE_CHARS", "narrow_tables", "table_width"]

# Characters of table that fit Prefect's content column at a 1,280 px window (about 7.3 px per
# character of its 14 px font, 24 px of padding per cell: measured on its artifact page).
UI_TABLE_CHARS = 90
CELL_PADDING_CHARS = 3

_SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")
_CELL_BORDER = re.compile(r"(?<!\\)\|")
_DELTA_OF = re.compile(r"^Δ vs untrained base \((?P<metric>.+)\)$")
# headers of columns that belong to the column before them: its interval and significance
# always; a change (Δ ...) when it follows a value column, not another change's columns
_QUALIFIERS = frozenset({"95% interval", "Significant"})


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip() for cell in _CELL_BORDER.split(inner)]


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table_width(rows: list[list[str]]) -> int:
    """Estimated characters of a table (header and body rows, no separator row) in the UI."""
    columns = max(len(row) for row in rows)
    return sum(max(len(row[c]) if c < len(row) else 0 for row in rows) + CELL_PADDING_CHARS for c in range(columns))


def _short_deltas(header: list[str]) -> list[str]:
    shown = list(header)
    for c in range(1, len(header)):
        match = _DELTA_OF.match(header[c])
        if match and match.group("metric") == header[c - 1]:
            shown[c] = "Δ"
    return shown


def _label_columns(alignments: list[str]) -> int:
    """Leading left-aligned columns: the row's labels (numbers are right-aligned)."""
    count = 0
    for cell in alignments:
        if cell.strip().endswith(":"):
            break
        count += 1
    return max(1, min(count, len(alignments) - 1))


def _groups(header: list[str], start: int) -> list[list[int]]:
    groups: list[list[int]] = []
    for c in range(start, len(header)):
        follows_value = header[c - 1] not in _QUALIFIERS and not header[c - 1].startswith("Δ")
        if groups and (header[c] in _QUALIFIERS or (header[c].startswith("Δ") and follows_value)):
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


def _split(rows: list[list[str]], alignments: list[str], limit: int) -> list[list[int]]:
    """Column index lists, one per output table, each starting with the label columns."""
    labels = list(range(_label_columns(alignments)))
    if table_width([[row[c] for c in labels] for row in rows]) > limit // 2:
        labels = [0]  # long label columns (a sweep's settings) would leave no room for the values
    chunks: list[list[int]] = []
    current: list[int] = []
    for group in _groups(rows[0], len(labels)):
        trial = labels + current + group
        if current and table_width([[row[c] for c in trial] for row in rows]) > limit:
            chunks.append(labels + current)
            current = []
        current += group
    if current:
        chunks.append(labels + current)
    return chunks


def _narrow(lines: list[str], limit: int) -> list[str]:
    rows = [_cells(line) for line in lines[:1] + lines[2:]]
    alignments = _cells(lines[1])
    columns = len(alignments)
    if any(len(row) != columns for row in rows):
        return lines  # not a table this module understands: left as written
    rows[0] = _short_deltas(rows[0])
    if table_width(rows) <= limit or columns < 3:
        return [_line(rows[0]), lines[1], *(_line(row) for row in rows[1:])]
    out: list[str] = []
    for chunk in _split(rows, alignments, limit):
        if out:
            out.append("")
        out.append(_line([rows[0][c] for c in chunk]))
        out.append("|" + "|".join(alignments[c] for c in chunk) + "|")
        out.extend(_line([row[c] for c in chunk]) for row in rows[1:])
    return out


def narrow_tables(markdown: str, limit: int = UI_TABLE_CHARS) -> str:
    """`markdown` with each pipe table narrowed to about `limit` characters (module docstring).
    Text outside tables, and tables that already fit, are returned as they are."""
    lines = markdown.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|") and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1].strip()):
            end = i + 2
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            out.extend(_narrow(lines[i:end], limit))
            i = end
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)
