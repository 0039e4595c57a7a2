"""Regenerate docs/reliability.md: run the fault and bad-input suite, list every fault and bad
input tried with its outcome.

    python -m tests.reliability.report            # the default (CI-sized) suite, ~3 min on 2 cores
    python -m tests.reliability.report --long     # + the long variants (20+ kills, more S3 seeds)
    python -m tests.reliability.report --audit    # + pip-audit of constraints.txt (needs PyPI's JSON API)

Without --audit the pip-audit section of the current docs/reliability.md is kept as it is.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "reliability.md"
AUDIT_START, AUDIT_END = "<!-- audit:start -->", "<!-- audit:end -->"
CATEGORIES = {
    "kill": "SIGKILL, then resume",
    "s3": "S3 faults (fault proxy in front of moto)",
    "disk": "Disk full",
    "corrupt": "Corrupt files behind a manifest",
    "bad-input": "Bad inputs (tests/data/bad/)",
    "security": "Security",
    "concurrency": "Concurrent runs of one config",
    "gc": "gc beside running builds",
}


def run_suite(long: bool, results: Path) -> tuple[str, float, int]:
    command = [sys.executable, "-m", "pytest", "tests/reliability", "-q", "-p", "no:cacheprovider", "-rN"] + (
        ["--long-faults"] if long else []
    )
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=REPO, env={**os.environ, "XLEMBED_RELIABILITY_RESULTS": str(results)}, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    summary = next(
        (line.strip("= ") for line in reversed(done.stdout.splitlines()) if re.search(r"\d+ (passed|failed)", line)), "no summary"
    )
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-5000:])
    return summary, seconds, done.returncode


def run_audit() -> str:
    tool = shutil.which("pip-audit") or str(Path(sys.executable).with_name("pip-audit"))
    if not Path(tool).exists():
        return "pip-audit is not installed (`pip install pip-audit==2.10.1`)."
    lines = [f"`pip-audit -r constraints.txt --no-deps --disable-pip` on {dt.date.today().isoformat()} (pip-audit 2.10.1):", ""]
    for service in ("pypi", "osv"):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "audit.json"
            done = subprocess.run(
                [
                    tool,
                    "-r",
                    "constraints.txt",
                    "--no-deps",
                    "--disable-pip",
                    "--progress-spinner",
                    "off",
                    "-s",
                    service,
                    "-f",
                    "json",
                    "-o",
                    str(out),
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=900,
            )
            if not out.exists():
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                lines.append(f"- service `{service}`: could not run ({last[:200]})")
                continue
            deps = json.loads(out.read_text())["dependencies"]
        skipped = [d for d in deps if "skip_reason" in d]
        vulnerable = [d for d in deps if d.get("vulns")]
        audited = len(deps) - len(skipped)
        found = "; ".join(f"{d['name']} {d['version']}: {', '.join(v['id'] for v in d['vulns'])}" for d in vulnerable) or "none"
        verdict = f"vulnerabilities: {found}" if audited else "INCONCLUSIVE: nothing could be audited"
        lines.append(f"- service `{service}`: {len(deps)} pinned packages, {audited} audited, {len(skipped)} skipped, {verdict}")
        if skipped:
            lines.append(
                f'  (skipped: "{skipped[0]["skip_reason"]}" and alike: the vulnerability data could not be fetched from this machine)'
            )
    return "\n".join(lines)


def kept_audit() -> str:
    if DOC.exists():
        text = DOC.read_text(encoding="utf-8")
        if AUDIT_START in text and AUDIT_END in text:
            return text.split(AUDIT_START, 1)[1].split(AUDIT_END, 1)[0].strip()
    return "Not run yet: `python -m tests.reliability.report --audit`."


def scenario_table() -> str:
    sys.path.insert(0, str(REPO))
    from tests.reliability.scenarios import SCENARIOS

    rows = ["| stage under fault | stages run | kills (default / long) | flaky S3 | notes |", "| --- | --- | ---: | --- | --- |"]
    for s in SCENARIOS:
        rows.append(f"| {s.stage} | {' → '.join(s.stages)} | {s.quick_kills} / {s.long_kills} | {s.s3} | {s.notes} |")
    return "\n".join(rows)


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(records: list[dict], summary: str, seconds: float, long: bool, audit: str) -> str:
    by_category: dict[str, list[dict]] = defaultdict(list)
    for item in records:
        by_category[item["category"]].append(item)
    kills = len(by_category.get("kill", []))
    out = [
        "# Reliability and security",
        "",
        "Generated by `python -m tests.reliability.report" + (" --long" if long else "") + "` on "
        f"{dt.date.today().isoformat()}: `pytest tests/reliability{' --long-faults' if long else ''}` — {summary} in {seconds:.0f} s wall "
        f"({os.cpu_count()} cores, shared). Every fault and bad input the suite tried is listed below with its outcome; "
        f"{kills} SIGKILLs in this run. Nothing was lost in any of them: each row is a passing assertion.",
        "",
        "Run the short suite (CI) with `pytest tests/reliability`; the long variants with `pytest tests/reliability --long-faults` "
        "(or `XLEMBED_LONG_FAULTS=1`). Regenerate this page with `python -m tests.reliability.report [--long] [--audit]`.",
        "",
        "## What is checked",
        "",
        "- **Kills** (`test_kills.py`): a driver (`tests/reliability/driver.py`) runs the stages with `tasks.stage.run_stage` in its own "
        "process and SIGKILLs itself at a seeded storage event of the stage under test (a part file growing, a file put in place, a "
        "record written but not renamed, ...), or the parent SIGKILLs it a seeded random time into the stage while a reader polls the "
        "store. After every kill, everything a reader can see is checked: committed artifacts verify and read; visible data and "
        "attached files are byte-equal to the uninterrupted run's; every shard record's files are there with its checksums. After "
        "resuming, shard records seen before are unchanged (no completed shard recomputed) and the final artifacts' checksums equal "
        "an uninterrupted run's. `train` keeps its durable checkpoints outside the store (`checkpoint_dir`, pointed into the "
        "test's folder): their writes are storage events too, so kills land mid-training, and the resumed run must give "
        "bit-identical weights; its `metrics.json` is compared without its two wall-clock fields (`train_seconds`, "
        "`examples_per_second`, `VOLATILE` in `invariants.py`), and `evaluate`'s MTEB result files without their "
        "`evaluation_time`, every other file byte for byte. "
        "`tests/flows/test_pipeline_flow.py` kills `xlembed run` (Prefect) itself.",
        "- **S3** (`test_s3_faults.py`, `s3proxy.py`): a threaded proxy in front of moto's server fails a seeded share of requests "
        "(500/503, answers lost after the write happened, connections dropped mid-response), or stops taking writes after N bytes "
        "(PUT bodies and multipart parts cut halfway). Afterwards `xlembed artifacts verify` runs against moto directly.",
        "- **Disk full** (`test_storage_faults.py`): a real ENOSPC on a small tmpfs where mounting is allowed, and RLIMIT_FSIZE "
        "(EFBIG) in a subprocess everywhere; then the disk grows and the run resumes.",
        "- **Corruption**: files changed behind a manifest; `xlembed artifacts verify` and every reader must refuse them.",
        "- **Bad inputs** (`test_bad_inputs.py`, files in `tests/data/bad/`): each gives a clear error naming file, line and field "
        "before anything is written, or a counted drop in the manifest.",
        "- **Security** (`test_security.py`): code scan for pickle and unsafe loading, artifacts scanned for pickles, path/key "
        "properties, credentials searched for in everything a run on S3 writes.",
        "- **Forced rebuilds** (`test_forced_and_concurrent.py`): `--force` of corpus, train and evaluate is SIGKILLed at "
        "seeded storage events of an uninterrupted forced run; the version it replaces (its files' bytes and mtimes), "
        "`verify` and the ref (still on it, or on the committed rebuild when the kill came after the rebuild's commit) are "
        "checked, then the rerun resumes and commits a rebuild equal to the uninterrupted one.",
        "- **Concurrent runs of one config** (`test_forced_and_concurrent.py`): 2 processes (4 with `--long-faults`) run "
        "corpus, base_model, align and train at once on one local root and on moto's S3; all exit 0, every artifact "
        "verifies and equals one uninterrupted run's, every ref is at a committed artifact. Also "
        "`tests/flows/test_pipeline_flow.py::test_two_concurrent_runs_commit_one_artifact_per_key`; refs moved by "
        "compare-and-swap and push/pull over damaged or diverged destinations: `tests/storage/test_refs_and_integrity.py` "
        '(docs/storage.md, "What the store guarantees").',
        "- **gc beside running builds, killed transfers** (`test_gc_and_transfers.py`): the driver pauses a build between "
        "its commit and its ref move while `xlembed artifacts gc --grace 0 --yes` runs (local root and moto S3): the build's "
        "lock keeps its artifact; a build SIGKILLed there leaves a lock that gc reports as stale and ignores. `pull` and "
        "`push` are SIGKILLed between two files: nothing may be left in the system temp folder, and the next transfer "
        "removes the killed one's scratch.",
        "",
        "## Stages under fault",
        "",
        scenario_table(),
        "",
        "A new stage joins every kill and S3 test by one `StageScenario` entry in "
        "`tests/reliability/scenarios.py`: the stage names to run (upstream first), and a function that writes small inputs and "
        "returns the config sections. Nothing else changes; the tests are parametrised over the table.",
        "",
    ]
    for category, title in CATEGORIES.items():
        items = by_category.get(category, [])
        out += [f"## {title}", ""]
        if not items:
            out += ["(nothing recorded in this run)", ""]
            continue
        out += ["| tried | outcome | detail |", "| --- | --- | --- |"]
        out += [f"| {cell(i['name'])} | {cell(i['outcome'])} | {cell(i['detail'])} |" for i in items]
        out.append("")
    out += ["## Dependency audit", "", AUDIT_START, audit, AUDIT_END, ""]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--long", action="store_true", help="include the long fault variants")
    parser.add_argument("--audit", action="store_true", help="run pip-audit on constraints.txt (network)")
    parser.add_argument("--results", type=Path, help="render from an existing results file instead of running the suite")
    args = parser.parse_args()
    if args.results:
        results, summary, seconds, code = args.results, "rendered from a results file", 0.0, 0
    else:
        results = Path(tempfile.mkstemp(prefix="reliability-", suffix=".jsonl")[1])
        results.write_text("")
        summary, seconds, code = run_suite(args.long, results)
    records = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line.strip()]
    audit = run_audit() if args.audit else kept_audit()
    DOC.write_text(render(records, summary, seconds, args.long, audit), encoding="utf-8")
    print(f"wrote {DOC} ({len(records)} rows; suite: {summary})")
    return code


if __name__ == "__main__":
    sys.exit(main())
