"""What the CLI prints on stdout: readable in a terminal, plain lines in a pipe or a file.

- Nothing is hard-wrapped: a long line (a path, a URI, the report's location) stays one
  line, which the terminal may fold for display but copies whole.
- In a pipe or a file nothing is cut or folded at 80 columns (rich's default width there).
- A rich table in a terminal becomes plain, space-aligned lines when stdout is not a
  terminal (CI logs, `| less`, `> file`): no box characters, no cell cut to `…`.
- Data frames (artifacts head/show, scores) fit the terminal's width, wrapping inside their
  cells once; in a pipe they are Markdown-style rows, one line each.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

PIPE_WIDTH = 100_000  # "no limit" for rich's layout when stdout is a pipe or a file


class Output(Console):
    """A rich Console for stdout that never wraps text and prints tables as plain lines when
    stdout is not a terminal."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("soft_wrap", True)
        kwargs.setdefault("emoji", False)  # names from configs and data (a source named `ok`) print literally
        super().__init__(**kwargs)
        if not self.is_terminal and "width" not in kwargs:
            # rich lays out trees and panels at 80 columns in a pipe, folding every longer line
            self.width = PIPE_WIDTH

    def print(self, *objects: Any, **kwargs: Any) -> None:  # noqa: A003 - rich's name
        if not self.is_terminal and len(objects) == 1 and isinstance(objects[0], Table):
            for line in plain_table(self, objects[0]):
                super().print(line, markup=False, highlight=False, soft_wrap=True)
            return
        super().print(*objects, **kwargs)

    def frame_config(self, rows: int, *, str_lengths: int = 40) -> Any:
        """polars settings that print a frame of `rows` rows readably here (see the module doc)."""
        import polars as pl

        if self.is_terminal:  # at least ~10 characters a column: polars shows the first and last columns, "…" between
            return pl.Config(tbl_rows=rows, fmt_str_lengths=str_lengths, tbl_width_chars=self.width, tbl_cols=max(2, self.width // 10),
                             tbl_hide_column_data_types=True, tbl_hide_dataframe_shape=True)  # fmt: skip
        return pl.Config(tbl_rows=rows, fmt_str_lengths=max(str_lengths, 200), tbl_width_chars=60_000, tbl_formatting="ASCII_MARKDOWN",
                         tbl_hide_column_data_types=True, tbl_hide_dataframe_shape=True)  # fmt: skip


def _cell_text(console: Console, cell: Any) -> str:
    if isinstance(cell, Text):
        text = cell.plain
    elif isinstance(cell, str):
        text = console.render_str(cell).plain
    else:
        text = str(cell)
    return "; ".join(part for part in text.splitlines() if part.strip())


def plain_table(console: Console, table: Table) -> list[str]:
    """The table as a title line, a header line and a line per row, columns two spaces apart."""
    columns = table.columns
    header = [_cell_text(console, c.header) for c in columns]
    rows = [[_cell_text(console, cell) for cell in column.cells] for column in columns]
    body = [list(row) for row in zip(*rows)] if rows else []
    widths = [max([len(header[i]), *(len(r[i]) for r in body)]) for i in range(len(columns))]

    def line(cells: list[str]) -> str:
        parts = []
        for i, (cell, column) in enumerate(zip(cells, columns)):
            last = i == len(columns) - 1
            if column.justify == "right":
                parts.append(cell.rjust(widths[i]))
            else:
                parts.append(cell if last else cell.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    out = []
    if table.title:
        out.append(_cell_text(console, table.title))
    if table.show_header:
        out.append(line(header))
    out += [line(r) for r in body]
    return out


class _PrefectNotices:
    """Prefect's temporary-server notices, as one informative line (logging filter on "prefect")."""

    def filter(self, record: Any) -> bool:
        message = record.getMessage()
        if message.startswith("Starting temporary server on "):
            address = message.removeprefix("Starting temporary server on ").split("\n", 1)[0]
            record.msg, record.args = (
                "temporary Prefect server for this run at %s (set PREFECT_API_URL to use a lasting one and its UI)",
                (address,),
            )
        elif message.startswith("Stopping temporary server on "):
            return False
        return True


def quiet_prefect_notices() -> None:
    """Call once Prefect is imported: its two-line server notice and the stop notice become one line."""
    import logging

    logger = logging.getLogger("prefect")
    if not any(isinstance(f, _PrefectNotices) for f in logger.filters):
        logger.addFilter(_PrefectNotices())
