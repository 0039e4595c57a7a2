"""Point labels of a figure do not cover each other (the sweep's trade-off figure: variants with
nearly the same changes had their names written over each other)."""

from __future__ import annotations

import itertools

import matplotlib.style
from matplotlib.text import Text

from tasks.evaluate.tradeoff import TradeoffPoint, tradeoff_figure
from tasks.reporting.figures import STYLE, new_figure, separate_labels


def label_boxes(fig) -> list:
    """The text of every label (an annotation's own extent includes its leader line)."""
    renderer = fig.canvas.get_renderer()
    return [Text.get_window_extent(text, renderer) for ax in fig.axes for text in ax.texts]


def test_labels_of_points_close_together_end_apart_and_keep_their_points():
    points = [
        (1.38, -0.71, "tr-sym-reg30"),
        (1.40, -0.77, "tr-fwd-reg30"),
        (1.36, -0.75, "tr-sym-reg30-again"),
        (2.0, -5.0, "far"),
    ]
    with matplotlib.style.context(STYLE):
        fig = new_figure(7.5, 5.2)
        ax = fig.subplots()
        ax.plot([p[0] for p in points], [p[1] for p in points], "o")
        labels = [ax.annotate(name, (x, y), textcoords="offset points", xytext=(6, 5)) for x, y, name in points]
        fig.draw_without_rendering()
        before = label_boxes(fig)
        assert any(a.overlaps(b) for a, b in itertools.combinations(before, 2))  # the case this is for
        separate_labels(fig, labels)
        fig.draw_without_rendering()
        after = label_boxes(fig)
    assert not any(a.overlaps(b) for a, b in itertools.combinations(after, 2))
    assert sorted(t.get_text() for t in ax.texts) == sorted(name for _, _, name in points)  # every label kept
    moved = {t.get_text(): t for t in ax.texts if t.arrow_patch is not None}
    assert moved and "far" not in moved  # a label with room stays, without a leader line
    assert all(t.xy == next((x, y) for x, y, n in points if n == name) for name, t in moved.items())  # still points at its point


def test_the_tradeoff_figure_separates_its_labels():
    points = [TradeoffPoint(f"variant-{i}", 1.4 + 0.01 * i, None, -0.7 - 0.02 * i, None) for i in range(6)]
    assert tradeoff_figure(points, "tatoeba low16").startswith(b"\x89PNG")
