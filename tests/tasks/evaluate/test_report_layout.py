"""The evaluation report's page fits 1,280 px: a trained model against its base on eight
languages and the xx-yy pairs, four retrieval metrics each with its change, group rows and
paired intervals. Checked in the HTML everywhere, and in headless Chromium where it is installed
(the widths a browser lays the tables out at)."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from tasks.evaluate.groups import LANGUAGE_GROUPS, group_average_rows, metric_row, rows_table
from tasks.evaluate.report import build_report
from tasks.evaluate.schema import ITEMS_SCHEMA

LANGS = ["kaz_Cyrl", "tel_Telu", "kat_Geor", "jav_Latn", "tgl_Latn", "swh_Latn", "mal_Mlym", "mar_Deva"]
PAIRS = [(lang, "eng_Latn") for lang in LANGS] + [(a, b) for a in LANGS[:4] for b in LANGS[:4] if a < b]


def scored(shift: float, seed: int) -> tuple[pa.Table, pa.Table]:
    rng = random.Random(seed)
    rows, items = [], []
    for benchmark, dataset, pairs in (("tatoeba", "tatoeba", PAIRS[:8]), ("retrieval", "corpus-dev", PAIRS)):
        for src, tgt in pairs:
            forward, backward = rng.random() / 2 + shift, rng.random() / 2 + shift
            for metric, value in (("accuracy_src_tgt", forward), ("accuracy_tgt_src", backward),
                                  ("accuracy_mean", (forward + backward) / 2), ("margin_mean", rng.random() / 10)):  # fmt: skip
                rows.append(metric_row(benchmark, dataset, src, tgt, metric, value, 50))
            items += [
                {"benchmark": benchmark, "dataset": dataset, "src_lang": src, "tgt_lang": tgt, "direction": direction,
                 "item": i, "correct": rng.random() < (forward + backward) / 2, "margin": rng.random() / 10}
                for direction in ("src_tgt", "tgt_src") for i in range(50)
            ]  # fmt: skip
    rows = group_average_rows(rows, [LANGUAGE_GROUPS["wacse-4"], LANGUAGE_GROUPS["wacse-8"]])
    return rows_table(rows), pa.Table.from_pylist(items, schema=ITEMS_SCHEMA)


@pytest.fixture(scope="module")
def page() -> str:
    (metrics, items), (base, base_items) = scored(0.3, 1), scored(0.2, 2)
    report = build_report(
        metrics,
        title="report",
        model_card={},
        baseline=base,
        baseline_name="untrained base",
        items=items,
        baseline_items=base_items,
    )
    return report.html


def test_the_per_language_table_is_compact_on_the_page(page: str) -> None:
    table = page.split("<h3>Per language</h3>", 1)[1].split("</table>", 1)[0]
    headers = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", table)
    assert [h.replace("<wbr>", "") for h in headers] == [
        "Language / pair", "accuracy_src_tgt", "Δ", "accuracy_tgt_src", "Δ", "accuracy_mean", "Δ", "margin_mean", "Δ", "n",
    ]  # fmt: skip
    assert '<th class="num" title="Δ vs untrained base (accuracy_mean)">Δ</th>' in table  # the full name as its tooltip
    assert "accuracy_<wbr>src_<wbr>tgt" in table  # a long metric name breaks after an underscore, not inside a word
    assert '<td class="txt label">kaz_Cyrl → eng_Latn</td>' in table  # a pair stays on one line (td.label: nowrap)
    assert re.search(r"td\.num, td\.pos, td\.neg, td\.zero, td\.missing, td\.label \{ white-space: nowrap; \}", page)
    assert "Δ: the metric before it, this model − untrained base" in page


def overflow_at(html: str, width: int, tmp_path: Path) -> list[str]:
    """The page's tables wider than their box (scrolled) and its cells on more than two lines, in Chromium at `width` px."""
    probe = """<script>(function(){const out=[];
      if (document.documentElement.scrollWidth > document.documentElement.clientWidth) out.push('page ' + document.documentElement.scrollWidth);
      document.querySelectorAll('.scroll').forEach((el,i)=>{ if (el.scrollWidth > el.clientWidth + 1) out.push('table ' + i + ' ' + el.scrollWidth + '>' + el.clientWidth); });
      document.querySelectorAll('td').forEach(td=>{ const lh=parseFloat(getComputedStyle(td).lineHeight)||20; if (td.clientHeight > 2.5*lh) out.push('cell ' + td.textContent); });
      const pre=document.createElement('pre'); pre.id='probe'; pre.textContent=JSON.stringify(out); document.body.appendChild(pre);})();</script>"""
    path = tmp_path / f"report-{width}.html"
    path.write_text(html.replace("</body>", probe + "</body>"), encoding="utf-8")
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},900", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-500:]
    import json

    return json.loads(found.group(1).replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&"))


@pytest.mark.slow
@pytest.mark.skipif(
    not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")), reason="needs headless Chromium"
)
def test_the_page_fits_1280_px_without_a_horizontal_scroll(page: str, tmp_path: Path) -> None:
    assert overflow_at(page, 1280, tmp_path) == []
