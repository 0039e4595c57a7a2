"""The training curves figure: what the train artifact's curves.png and the evaluate report show.

Input is the train artifact's curves table (long format: step, metric, value). Four panels:
the loss per objective and the total, lr, gradient norm, dev retrieval accuracy (the mean over
languages, and each language thin). Per-step losses and gradient norms are noisy on small
batches, so they are drawn as an exponential moving average (TensorBoard's, debiased so the
first steps are not pulled towards 0) over the raw values drawn faint.
"""

from __future__ import annotations

import warnings

import matplotlib
import matplotlib.style
import numpy as np
import pyarrow as pa
from matplotlib.ticker import MaxNLocator

from tasks.reporting.figures import STYLE, new_figure, png_bytes

__all__ = ["CURVES_SMOOTHING", "ema", "training_curves_figure"]

CURVES_SMOOTHING = 0.9  # weight of the running average per step (TensorBoard's slider)
CURVES_INCHES = (11.0, 6.5)


def ema(values: np.ndarray, weight: float = CURVES_SMOOTHING) -> np.ndarray:
    """Debiased exponential moving average: s_t = w s_{t-1} + (1 - w) x_t, divided by 1 - w^t."""
    out = np.empty(len(values), dtype=np.float64)
    running, norm = 0.0, 0.0
    for i, value in enumerate(np.asarray(values, dtype=np.float64)):
        running = weight * running + (1 - weight) * value
        norm = weight * norm + (1 - weight)
        out[i] = running / norm
    return out


def _series(rows: dict[str, list[tuple[int, float]]], metric: str) -> tuple[np.ndarray, np.ndarray]:
    points = sorted(rows.get(metric, []))
    return np.array([s for s, _ in points], dtype=np.int64), np.array([v for _, v in points], dtype=np.float64)


def _draw_dev(ax: object, rows: dict[str, list[tuple[int, float]]], dev_langs: list[str], palette: object) -> None:
    """The dev accuracy panel. Measured at three or more steps: a curve per language and the mean.
    Measured only before training and at its end (`eval_every = 0`): one row per language (the
    mean first) with the first and the last value joined, languages named on the axis; two-point
    lines under a legend would hide what changed."""
    steps, values = _series(rows, "dev_accuracy")
    if not len(steps):
        ax.text(0.5, 0.5, "no dev split", transform=ax.transAxes, ha="center", va="center", color="0.4")
        ax.set_title("dev retrieval accuracy (%, mean of both directions)", fontsize=9)
        ax.set_xlabel("step")
        return
    if len(set(steps.tolist())) > 2:
        for i, metric in enumerate(dev_langs):
            s, v = _series(rows, metric)
            ax.plot(
                s, v * 100, color=palette(i % palette.N), linewidth=0.8, alpha=0.6, label=metric.removeprefix("dev_accuracy/")
            )
        ax.plot(steps, values * 100, color="black", marker="o", markersize=4, linewidth=1.6, label="mean", zorder=3)
        ax.legend(fontsize=7, ncols=2 if len(dev_langs) > 6 else 1)
        ax.set_title("dev retrieval accuracy (%, mean of both directions)", fontsize=9)
        ax.set_xlabel("step")
        return
    first, last = int(steps.min()), int(steps.max())
    names = ["mean", *(m.removeprefix("dev_accuracy/") for m in dev_langs)]
    series = [(steps, values), *(_series(rows, m) for m in dev_langs)]
    for y, (s, v) in enumerate(series):
        by_step = dict(zip(s.tolist(), (v * 100).tolist()))
        start, end = by_step.get(first), by_step.get(last)
        colour = "black" if y == 0 else palette((y - 1) % palette.N)
        if start is not None and end is not None:
            ax.plot([start, end], [y, y], color=colour, linewidth=1.6 if y == 0 else 1.0, alpha=0.7)
        if start is not None:
            ax.plot([start], [y], marker="o", markersize=5, markerfacecolor="white", markeredgecolor=colour, linestyle="")
        if end is not None:
            ax.plot([end], [y], marker="o", markersize=5, color=colour, linestyle="")
    ax.set_yticks(range(len(names)), names, fontsize=7 if len(names) <= 16 else 5)
    ax.invert_yaxis()  # the mean on top
    ax.set_title(f"dev retrieval accuracy (%, mean of both directions): ○ step {first} → ● step {last}", fontsize=9)
    ax.set_xlabel("accuracy (%)")


def training_curves_figure(curves: pa.Table, title: str = "training curves") -> bytes:
    """PNG of a curves table (tasks.train.model_folder.CURVES_SCHEMA): losses (smoothed, each
    objective its own line, the total grey and wider underneath so it hides none), lr, grad norm
    and dev accuracy (with the step-0 point the trainer records before any update)."""
    rows: dict[str, list[tuple[int, float]]] = {}
    for step, metric, value in zip(
        curves.column("step").to_pylist(), curves.column("metric").to_pylist(), curves.column("value").to_pylist()
    ):
        rows.setdefault(metric, []).append((int(step), float(value)))
    objectives = sorted(m for m in rows if m.startswith("loss/"))
    dev_langs = sorted(m for m in rows if m.startswith("dev_accuracy/"))
    palette = matplotlib.colormaps["tab10"]
    with matplotlib.style.context(STYLE):
        fig = new_figure(*CURVES_INCHES)
        (ax_loss, ax_dev), (ax_lr, ax_grad) = fig.subplots(2, 2)
        positive, low, high = True, np.inf, -np.inf
        if "loss" in rows:
            steps, values = _series(rows, "loss")
            ax_loss.plot(steps, values, color="0.6", alpha=0.25, linewidth=0.6)
            ax_loss.plot(steps, ema(values), color="0.35", linewidth=3.0, alpha=0.55, label="total (weighted sum)", zorder=2)
            positive &= bool(np.all(values > 0))
            low, high = min(low, float(np.min(values))), max(high, float(np.max(values)))
        for i, metric in enumerate(objectives):
            steps, values = _series(rows, metric)
            colour = palette(i % palette.N)
            ax_loss.plot(steps, values, color=colour, alpha=0.2, linewidth=0.6)
            ax_loss.plot(steps, ema(values), color=colour, linewidth=1.4, label=metric.removeprefix("loss/"), zorder=3)
            positive &= bool(np.all(values > 0))
            low, high = min(low, float(np.min(values))), max(high, float(np.max(values)))
        if positive and high > 10 * low:  # a log axis only where the losses span more than a decade
            ax_loss.set_yscale("log")
        ax_loss.set_title(f"training loss (EMA {CURVES_SMOOTHING}; raw faint)", fontsize=9)
        ax_loss.set_xlabel("step")
        if objectives or "loss" in rows:
            ax_loss.legend(fontsize=7)

        _draw_dev(ax_dev, rows, dev_langs, palette)

        steps, values = _series(rows, "lr")
        ax_lr.plot(steps, values, color=palette(0), linewidth=1.2)
        ax_lr.set_title("learning rate", fontsize=9)
        ax_lr.set_xlabel("step")
        ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))

        steps, values = _series(rows, "grad_norm")
        if len(steps):
            ax_grad.plot(steps, values, color=palette(3), alpha=0.25, linewidth=0.6)
            ax_grad.plot(steps, ema(values), color=palette(3), linewidth=1.4)
        else:
            ax_grad.text(
                0.5, 0.5, "not recorded (no max_grad_norm)", transform=ax_grad.transAxes, ha="center", va="center", color="0.4"
            )
        ax_grad.set_title(f"gradient norm before clipping (EMA {CURVES_SMOOTHING})", fontsize=9)
        ax_grad.set_xlabel("step")
        for ax in (ax_loss, ax_dev, ax_lr, ax_grad):
            if ax is not ax_dev or ax_dev.get_xlabel() == "step":
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(True, linewidth=0.3, alpha=0.5)
            ax.tick_params(labelsize=7)
        fig.suptitle(title, fontsize=10)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            return png_bytes(fig)
