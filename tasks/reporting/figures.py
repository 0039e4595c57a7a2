"""Figures as reproducible PNG bytes.

Plots use matplotlib's object API on the Agg canvas (`Figure` + `FigureCanvasAgg`, as
matplotlib recommends for servers): no pyplot, no global backend switch, nothing left open.
The style is matplotlib's default with the bundled DejaVu Sans font, set per figure (`with
matplotlib.style.context(STYLE):`), so the PNG bytes depend only on the inputs (and the
matplotlib version), not on the machine's rc files or installed fonts.
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["DPI", "STYLE", "inline_figures", "new_figure", "png_bytes", "separate_labels"]

DPI = 100
# matplotlib's default style (style.context drops backend/interactive keys) plus the bundled font,
# so the output does not depend on the machine's matplotlibrc or installed fonts.
STYLE: list[Any] = ["default", {"font.family": ["DejaVu Sans"], "font.size": 8.0}]
# No "Software" entry: the PNG bytes do not carry the matplotlib version string.
_SAVEFIG_METADATA = {"Software": None}


def new_figure(width_in: float, height_in: float, layout: str | None = "constrained") -> Figure:
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG, then cleared (its memory is freed with the figure's last reference)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata=_SAVEFIG_METADATA)
    fig.clear()
    return buffer.getvalue()


def separate_labels(fig: Figure, labels: list[Any], *, max_lines: int = 12) -> None:
    """Move point labels (annotations placed in offset points) up or down, a line at a time, until
    none covers another, and draw a thin line from a moved label to its point. Variants of a sweep
    often land close together; their names written over each other could not be read."""
    fig.draw_without_rendering()  # the layout and the axes limits are final: boxes are where they will be
    renderer = fig.canvas.get_renderer()
    shifts = [0] + [sign * k for k in range(1, max_lines + 1) for sign in (-1, 1)]  # nearest first
    placed: list[Any] = []
    for label in sorted(labels, key=lambda a: a.get_window_extent(renderer).y0, reverse=True):
        box = label.get_window_extent(renderer)
        step = box.height * 1.1
        shift = next((k for k in shifts if not any(box.translated(0, k * step).overlaps(o) for o in placed)), 0)
        placed.append(box.translated(0, shift * step))
        if shift:  # the same label, moved, with a leader line to its point
            x, y = label.xyann
            ax = label.axes
            label.remove()
            ax.annotate(
                label.get_text(), label.xy, textcoords="offset points", xytext=(x, y + shift * step * 72.0 / fig.dpi),
                fontsize=label.get_fontsize(), arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 3},
            )  # fmt: skip


_FIGURE_LINK = re.compile(r"!\[([^\]]*)\]\(([^()\s:]+\.png)\)")


def inline_figures(markdown: str, read: Callable[[str], bytes | None]) -> str:
    """Markdown whose relative PNG links (`![alt](name.png)`) carry the image as a data: URI, for
    a viewer that cannot follow links beside the file (the Prefect UI's markdown artifacts).
    `read(name)` gives a figure's bytes, None when it is missing (its link is left as it is)."""

    def embed(match: re.Match[str]) -> str:
        data = read(match.group(2))
        if data is None:
            return match.group(0)
        return f"![{match.group(1)}](data:image/png;base64,{base64.b64encode(data).decode('ascii')})"

    return _FIGURE_LINK.sub(embed, markdown)
