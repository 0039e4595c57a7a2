"""SIGKILL during every stage, then resume: nothing partial is ever visible, no completed
shard is recomputed, and the final artifacts equal those of an uninterrupted run.

Two ways to pick the moment, both seeded:
  * storage events: the driver kills itself at the N-th write of the stage under test (a
    part file growing, a file being put in place, a record written but not renamed, ...),
    N drawn from the event count of the uninterrupted run;
  * wall-clock: the parent SIGKILLs the driver's process group a random time after the stage
    started, drawn from the stage's duration in the uninterrupted run, while a reader polls
    the store.
After every kill `check_store` looks at everything a reader could see. Runs that finish before
the chosen moment count as no kill; each test loops until it has its kills.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import driver_command, driver_env
from tests.reliability.invariants import Marker, artifact_files, assert_markers_unchanged, check_store
from tests.reliability.scenarios import SCENARIOS, StageScenario, dump_spec

pytestmark = pytest.mark.slow
SEED = 20240508
MAX_ATTEMPTS_PER_KILL = 4


@dataclass
class Reference:
    data: Path
    files: dict[str, str]
    events: dict[str, int]
    seconds: dict[str, float]


def run_driver(
    spec: dict[str, Any], tmp: Path, name: str, *, kill_at: int | None = None, stage: str | None = None, timeout: float = 300
) -> tuple[int, str]:
    if kill_at is not None:
        spec = {**spec, "kill": {"stage": stage, "event": kill_at}}
    path = dump_spec(spec, tmp / f"{name}.json")
    result = subprocess.run(driver_command(path), env=driver_env(tmp), capture_output=True, text=True, timeout=timeout)
    if result.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"driver failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return result.returncode, result.stdout


def parse_events(stdout: str) -> dict[str, int]:
    import json

    line = next(line for line in stdout.splitlines() if line.startswith("EVENTS "))
    return json.loads(line[len("EVENTS ") :])


class References:
    """One uninterrupted run per scenario (same input files, own root): the expected artifacts."""

    def __init__(self, base: Path, cache: Path) -> None:
        self.base, self.cache, self.done = base, cache, {}

    def get(self, scenario: StageScenario) -> Reference:
        if scenario.stage not in self.done:
            tmp = self.base / scenario.stage
            tmp.mkdir(parents=True)
            data = tmp / "data"
            spec = scenario.spec(str(tmp / "reference-root"), data, self.cache)
            started = time.perf_counter()
            timed = follow(
                subprocess.Popen(
                    driver_command(dump_spec(spec, tmp / "reference.json")),
                    env=driver_env(tmp),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                    start_new_session=True,
                )
            )
            lines = timed.wait_done(300)
            seconds: dict[str, float] = {}
            for t, line in lines:
                if line.startswith("STAGE ") and line.endswith(" START"):
                    seconds[line.split()[1]] = -t
                elif line.startswith("STAGE ") and " DONE " in line:
                    seconds[line.split()[1]] += t
            assert timed.process.returncode == 0, f"reference run of {scenario.stage} failed"
            stdout = "\n".join(line for _, line in lines)
            self.done[scenario.stage] = Reference(data, artifact_files(tmp / "reference-root"), parse_events(stdout), seconds)
            assert time.perf_counter() - started >= 0
        return self.done[scenario.stage]


class follow:
    """Read a child's stdout lines as they come, with their arrival times."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process, self.lines, self.queue = process, [], queue.Queue()
        self.started = time.monotonic()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self.queue.put((time.monotonic() - self.started, line.rstrip("\n")))
        self.queue.put(None)

    def wait_for(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                item = self.queue.get(timeout=0.05)
            except queue.Empty:
                continue
            if item is None:
                self.queue.put(None)
                return False
            self.lines.append(item)
            if predicate(item[1]):
                return True
        return False

    def wait_done(self, timeout: float) -> list[tuple[float, str]]:
        self.wait_for(lambda line: False, timeout)
        self.process.wait(timeout=30)
        return self.lines


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> References:
    return References(tmp_path_factory.mktemp("references"), model_cache)


def finish_and_compare(
    scenario: StageScenario, spec: dict[str, Any], tmp: Path, reference: Reference, markers: dict[str, Marker]
) -> None:
    root = Path(spec["root"])
    code, _ = run_driver(spec, tmp, "resume")
    assert code == 0
    assert_markers_unchanged(markers, root)
    check_store(root, reference.files)
    assert artifact_files(root) == reference.files, "resumed artifacts differ from the uninterrupted run"
    store_root_files = {p for p in root.rglob("*") if p.is_file() and p.parent.name in ("data", "files")}
    listed = {root / rel.split("/", 2)[0] / rel.split("/", 2)[1] / rel.split("/", 2)[2] for rel in reference.files}
    stray = sorted(
        str(p.relative_to(root))
        for p in store_root_files
        if p not in listed and not p.name.startswith(".") and ".tmp-" not in p.name
    )
    assert not stray, f"visible files that no manifest lists: {stray}"


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS], ids=lambda s: s.stage)
def test_sigkill_at_storage_events_then_resume(
    scenario: StageScenario, references: References, tmp_path: Path, long_faults: bool, record
) -> None:
    wanted = scenario.long_kills if long_faults else scenario.quick_kills
    if not wanted:
        pytest.skip(f"no storage-event kills of {scenario.stage} in this variant")
    reference = references.get(scenario)
    total = reference.events[scenario.stage]
    rng = random.Random(f"{SEED}-events-{scenario.stage}")
    kills, chain = 0, 0
    while kills < wanted:
        chain += 1
        tmp = tmp_path / f"chain{chain}"
        tmp.mkdir()
        spec = scenario.spec(str(tmp / "root"), reference.data, references.cache)
        markers: dict[str, Marker] = {}
        for attempt in range(MAX_ATTEMPTS_PER_KILL):
            event = rng.randint(1, total)
            code, stdout = run_driver(spec, tmp, f"attempt{attempt}", kill_at=event, stage=scenario.stage)
            if code == 0:
                break  # finished before the chosen event: this chain is complete
            kills += 1
            where = next((line for line in stdout.splitlines() if line.startswith("KILL ")), "KILL ?")
            markers.update(check_store(tmp / "root", reference.files))
            assert_markers_unchanged(markers, tmp / "root")
            record(
                "kill",
                f"{scenario.stage}: SIGKILL at storage event {event}/{total}",
                "survived",
                f"{where.split(' ', 3)[-1]}; {len(markers)} shard records in the store kept unchanged",
            )
            if kills >= wanted or rng.random() < 0.5:
                break
        finish_and_compare(scenario, spec, tmp, reference, markers)
        assert chain < wanted * MAX_ATTEMPTS_PER_KILL + 5, "could not land enough kills"


TIMER_STAGES = ("corpus", "translate", "align", "train", "evaluate", "lengths", "base_model")


@pytest.mark.parametrize("stage", TIMER_STAGES)
def test_sigkill_at_random_times_while_a_reader_polls(
    stage: str, references: References, tmp_path: Path, long_faults: bool, record
) -> None:
    wanted = 2 if long_faults else (1 if stage == "evaluate" else 0)
    if not wanted:
        pytest.skip(f"no wall-clock kills of {stage} in this variant")
    scenario = next(s for s in SCENARIOS if s.stage == stage)
    reference = references.get(scenario)
    duration = max(reference.seconds[stage], 0.05)
    rng = random.Random(f"{SEED}-timer-{stage}")
    kills, attempts = 0, 0
    tmp = tmp_path / "run"
    tmp.mkdir()
    spec = scenario.spec(str(tmp / "root"), reference.data, references.cache)
    markers: dict[str, Marker] = {}
    while kills < wanted:
        attempts += 1
        assert attempts <= wanted * 6, "could not land enough kills"
        delay = rng.uniform(0.0, duration)
        process = subprocess.Popen(
            driver_command(dump_spec(spec, tmp / f"timer{attempts}.json")),
            env=driver_env(tmp),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        child = follow(process)
        try:
            assert child.wait_for(lambda line: line == f"STAGE {stage} START", 300) or process.poll() is not None
            deadline = time.monotonic() + delay
            polls = 0
            while time.monotonic() < deadline and process.poll() is None:
                check_store(tmp / "root", reference.files)  # a reader, concurrently with the writer
                polls += 1
            alive = process.poll() is None and not any(f"STAGE {stage} DONE" in line for _, line in child.lines)
            with contextlib.suppress(ProcessLookupError):  # it may have ended on its own meanwhile
                os.killpg(process.pid, signal.SIGKILL)
        finally:
            process.wait(timeout=30)
        if not alive:
            break  # it finished first: the store is complete
        kills += 1
        markers.update(check_store(tmp / "root", reference.files))
        assert_markers_unchanged(markers, tmp / "root")
        record(
            "kill",
            f"{stage}: SIGKILL {delay:.2f} s into the stage (stage takes {duration:.2f} s)",
            "survived",
            f"{polls} concurrent reader checks; {len(markers)} shard records in the store kept unchanged",
        )
    finish_and_compare(scenario, spec, tmp, reference, markers)
