"""The training curves figure's dev panel: curves when dev accuracy was measured during training;
with `eval_every = 0` (measured before training and at its end only) one row per language from
the first value to the last, no two-point lines under a legend."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tasks.reporting import curves as curves_module

LANGS = ["jav_Latn", "kat_Geor", "kaz_Cyrl", "tel_Telu", "tgl_Latn", "swh_Latn", "mal_Mlym", "mar_Deva"]


def curves(dev_steps: list[int], steps: int = 100) -> pa.Table:
    points = [{"step": s, "metric": m, "value": v} for s in range(1, steps + 1) for m, v in (("loss", 2.0 / s), ("lr", 1e-4))]
    for s in dev_steps:
        points.append({"step": s, "metric": "dev_accuracy", "value": 0.4 + s / 1000})
        points += [
            {"step": s, "metric": f"dev_accuracy/{lang}", "value": 0.3 + i / 50 + s / 1000} for i, lang in enumerate(LANGS)
        ]
    return pa.Table.from_pylist(points)


def dev_axis(table: pa.Table, monkeypatch: pytest.MonkeyPatch) -> Any:
    drawn: dict[str, Any] = {}

    def keep(fig: Any) -> bytes:
        drawn["fig"] = fig
        return b""

    monkeypatch.setattr(curves_module, "png_bytes", keep)
    curves_module.training_curves_figure(table)
    return next(ax for ax in drawn["fig"].axes if ax.get_title().startswith("dev retrieval accuracy"))


def test_with_eval_every_0_each_language_is_a_row_from_its_first_to_its_last_value(monkeypatch):
    ax = dev_axis(curves([0, 100]), monkeypatch)
    assert ax.get_legend() is None  # nothing drawn over the values
    assert [t.get_text() for t in ax.get_yticklabels()] == ["mean", *sorted(LANGS)]
    assert "step 0" in ax.get_title() and "step 100" in ax.get_title()
    kaz = 1 + sorted(LANGS).index("kaz_Cyrl")
    joined = [line for line in ax.get_lines() if len(line.get_xdata()) == 2 and list(line.get_ydata()) == [kaz, kaz]]
    assert len(joined) == 1 and list(joined[0].get_xdata()) == pytest.approx([34.0, 44.0])  # 0.34 before, 0.44 at the end


def test_dev_measured_during_training_is_drawn_as_curves(monkeypatch):
    ax = dev_axis(curves([0, 25, 50, 75, 100]), monkeypatch)
    assert ax.get_legend() is not None and ax.get_xlabel() == "step"
    mean = next(line for line in ax.get_lines() if line.get_label() == "mean")
    assert list(mean.get_xdata()) == [0, 25, 50, 75, 100]
