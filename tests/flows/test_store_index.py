"""The store index (flows/store_index.py) as a person reads it (issue 30, item 4): a train artifact's
model card and TensorBoard folder are linked, an evaluation shows its headline change with the
interval, ages are computed when the page is read, and tables scroll instead of being cut."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from flows.store_index import AGE_SCRIPT, build_index
from storage import ArtifactStore
from storage.refs import set_ref
from tasks.stage import ShardSpec, Stage, run_stage
from tasks.stage_config import StageConfig


class _Config(StageConfig):
    seed: int = 0


def _attach(config, inputs, shard, context):
    model = context.workdir / "model"
    model.mkdir()
    (model / "README.md").write_text("# card\n", encoding="utf-8")
    board = context.workdir / "tensorboard"
    board.mkdir()
    (board / "events.out.tfevents.1.host.0").write_bytes(b"\0")
    (board / "events.out.tfevents.2.host.0").write_bytes(b"\0")
    context.attach_dir(model, prefix="model/")
    context.attach_dir(board, prefix="tensorboard/")
    context.metrics = {
        "headline": {"retrieval/corpus-dev": {"metric": "accuracy_mean", "mean": 0.9123, "pairs": 6}},
        "headline_change": [
            {"benchmark": "retrieval", "dataset": "corpus-dev", "kind": "group", "label": "wacse-4", "baseline": "untrained base",
             "unit": "percentage points", "delta": 1.3, "low": 0.8, "high": 1.7, "significant": True},
            {"benchmark": "retrieval", "dataset": "corpus-dev", "kind": "language", "label": "kaz_Cyrl", "baseline": "untrained base",
             "unit": "percentage points", "delta": 9.0, "low": 1.0, "high": 20.0, "significant": True},
        ],
    }  # fmt: skip
    return []


def test_index_links_card_and_tensorboard_shows_the_headline_and_computes_age_when_read(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    stage = Stage("train", "1", _Config, None, lambda c, i: [ShardSpec("model")], _attach)
    ref, manifest = run_stage(store, stage, _Config(), {})
    set_ref(store, "demo", "train", ref.key, note="test")
    later = dt.datetime.fromisoformat(manifest.created_at) + dt.timedelta(hours=5)
    page = build_index(store, now=later)
    base = f"train/{ref.key}/files/"
    assert f"{base}model/README.md" in page.links and f"{base}tensorboard/" in page.links
    assert page.links.count(f"{base}tensorboard/") == 2  # once per table (pipelines, stages), not once per event file
    assert (tmp_path / "artifacts" / f"{base}tensorboard").is_dir()
    assert "retrieval/corpus-dev wacse-4: <b>+1.3</b> [+0.8, +1.7] pp vs untrained base" in page.html
    assert "kaz_Cyrl" not in page.html  # single languages stay in the report
    assert "retrieval/corpus-dev: accuracy_mean 0.9123" in page.html
    # the age says 5h as written, and carries the timestamp the script recomputes it from when read
    assert f'<time class="age" datetime="{manifest.created_at}" title="{manifest.created_at}">5h</time>' in page.html
    assert AGE_SCRIPT in page.html and 'querySelectorAll("time.age")' in AGE_SCRIPT
    assert page.html.count('<div class="scroll"><table>') == page.html.count("<table>")


def test_report_figures_are_inlined_for_the_prefect_ui() -> None:
    import base64

    from tasks.reporting.figures import inline_figures, new_figure, png_bytes

    fig = new_figure(2, 1)
    fig.add_subplot().plot([0, 1], [1, 0])
    png = png_bytes(fig)
    markdown = "# r\n\n![Change vs base](delta_intervals.png)\n\n![gone](missing.png)\n\n[a link](report.html)\n"
    inlined = inline_figures(markdown, {"delta_intervals.png": png}.get)
    assert f"![Change vs base](data:image/png;base64,{base64.b64encode(png).decode('ascii')})" in inlined
    assert "![gone](missing.png)" in inlined and "[a link](report.html)" in inlined
