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

__all__ = ["DPI", "STYLE", "inline_figures", "new_figure", "png_bytes"]

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
