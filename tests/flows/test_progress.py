"""Progress of long work (flows/progress.py): units that mean something, rate and ETA, a bar in
a terminal and lines elsewhere (issue 15: the bar counted rows, was always full, and a piped
run printed nothing)."""

from __future__ import annotations

import re

import pytest

from flows import progress as progress_module
from flows.progress import StageProgress, progress_bar
from tasks.shard_context import ShardContext


def test_lines_outside_a_terminal_count_units_with_rate_and_eta(capsys):
    progress = StageProgress("align:groups-00000", how="lines", interval=0)
    progress.expect(200, "pairs")
    progress.advance(50)
    err = capsys.readouterr().err
    assert re.search(
        r"^align:groups-00000: 50/200 pairs \(25%\), [\d.,]+ pairs/s, ETA \d:\d\d:\d\d, elapsed 0:00:0\d$", err.strip()
    ), err


def test_lines_are_timed_not_one_per_advance(capsys):
    progress = StageProgress("translate:part-00000", how="lines", interval=3600)
    progress.expect(1000, "sentences")
    for _ in range(100):
        progress.advance(10)
    assert capsys.readouterr().err == ""  # the next line is due in an hour
    progress.report("train: step 10/100 (10%) · loss 1.2")
    assert capsys.readouterr().err.strip() == "train: step 10/100 (10%) · loss 1.2"  # a reported line always shows


def test_progress_bar_in_lines_mode_ends_with_a_done_line(monkeypatch, capsys):
    monkeypatch.setenv("XLEMBED_PROGRESS", "lines")
    with progress_bar("corpus:part-0") as advance:
        context = ShardContext("part-0", advance)
        context.read(80)  # rows, until a stage names its unit
    err = capsys.readouterr().err
    assert re.search(r"corpus:part-0: 80 rows, [\d.,]+ rows/s, elapsed 0:00:0\d \(done\)", err), err


def test_the_bar_counts_the_stage_unit_toward_a_total_and_shows_the_reported_line(monkeypatch, capsys):
    monkeypatch.setenv("XLEMBED_PROGRESS", "bar")
    with progress_bar("train:model") as advance:
        context = ShardContext("model", advance)
        context.read(572)  # the corpus rows the trainer reads: not the unit of its progress
        context.expect(100, "steps", done=30)  # a resumed run: 30 of 100 steps done
        for _ in range(3):
            context.progress(1)
        context.report("train: step 33/100 (33%) · loss 0.91")
        display = progress_module.live_display()
        task = display.tasks[0]
        assert (task.total, task.completed) == (100, 33)  # not "572 rows" in a full bar
        assert task.fields["unit"] == "steps" and task.fields["rate"].endswith("steps/s")
    assert progress_module.live_display() is None
    assert "train: step 33/100 (33%) · loss 0.91" in capsys.readouterr().err  # printed above the bar


def test_a_label_says_what_is_counted_now_in_the_bar_and_the_lines(monkeypatch, capsys):
    lines = StageProgress("evaluate:all", how="lines", interval=0)
    ShardContext("all", lines).expect(40, "texts", label="the base model, sts (2/3)")
    lines.advance(10)
    assert re.search(
        r"^evaluate:all the base model, sts \(2/3\): 10/40 texts \(25%\), [\d.,]+ texts/s, ETA ", capsys.readouterr().err
    )

    monkeypatch.setenv("XLEMBED_PROGRESS", "bar")
    with progress_bar("evaluate:all") as advance:
        context = ShardContext("all", advance)
        context.expect(40, "texts", label="the trained model, tatoeba (1/3)")
        task = progress_module.live_display().tasks[0]
        assert task.description == "evaluate:all the trained model, tatoeba (1/3)" and task.total == 40
        context.expect(8, "texts")  # no label: the last one stays
        assert progress_module.live_display().tasks[0].description == "evaluate:all the trained model, tatoeba (1/3)"


def test_off_prints_nothing(monkeypatch, capsys):
    monkeypatch.setenv("XLEMBED_PROGRESS", "0")
    with progress_bar("corpus:part-0") as advance:
        advance.expect(10, "shards")
        advance(10)
        advance.report("a line")
    assert capsys.readouterr().err == ""


def test_a_stage_with_several_shards_logs_shards_done_rate_and_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import Future

    from flows import pipeline
    from flows.pipeline import ShardCounter, shard_results

    logged: list[str] = []

    class Log:
        def info(self, fmt: str, *args: object) -> None:
            logged.append(fmt % args)

    monkeypatch.setattr(pipeline, "run_logger", Log)  # the flow run's logger, as Prefect would give it
    counter = ShardCounter("align", 4)
    lines = [counter.one_done() for _ in range(4)]
    assert lines[0].startswith("align: 1/4 shards (25%), ") and "shards/min, ETA " in lines[0]
    assert lines[-1].startswith("align: 4/4 shards (100%)") and "ETA" not in lines[-1]
    assert ShardCounter("train", 1).one_done() is None  # one shard: its own units say it all

    logged.clear()
    futures = []
    for shard in range(3):
        future: Future = Future()
        future.set_result({"shard_id": f"s{shard}"})
        futures.append(future)
    done = shard_results(futures, "align", store=None, key="k", shards=[None] * 3)
    assert [d["shard_id"] for d in done] == ["s0", "s1", "s2"]
    assert [line.split(",")[0] for line in logged] == [
        "align: 1/3 shards (33%)",
        "align: 2/3 shards (67%)",
        "align: 3/3 shards (100%)",
    ]
