"""Plug-ins found through the `xlembed.plugins` entry-point group (tasks/registry.py): a fresh
process that never imported the plug-in's module (as a Dask or Ray worker, or the `xlembed`
command) validates a pipeline config naming it and runs it through the real corpus stage.

The plug-in here is an installed distribution in miniature: a module and a `.dist-info` folder
with `entry_points.txt` on the subprocess's `PYTHONPATH`, which is what `pip install` leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PLUGIN = '''
"""A corpus source of tab-separated English / Kazakh pairs, one per line."""
from typing import Literal

import polars as pl
from pydantic import Field

from tasks.corpus.readers import GroupBatch, open_binary
from tasks.corpus.sources import Source, register_source
from tasks.stage_config import CONTENT_KEYED, ConfigPath

IMPORTS = []


@register_source
class TsvPairs(Source):
    kind: Literal["tsv_pairs"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)

    def languages(self, shard=None):
        return ["eng_Latn", "kaz_Cyrl"]

    def read(self, shard, io):
        with open_binary(self.path) as stream:
            lines = [line.decode("utf-8").rstrip("\\n").split("\\t") for line in stream if line.strip()]
        rows = [{"locator": str(i), "eng_Latn": en, "kaz_Cyrl": kk} for i, (en, kk) in enumerate(lines, 1)]
        yield GroupBatch(pl.DataFrame(rows, schema=dict.fromkeys(["locator", "eng_Latn", "kaz_Cyrl"], pl.String)), "missing")

    def fingerprint(self, io):
        return io.fingerprint(self.path)
'''

WORKER = """
import json, sys
import polars as pl
from flows.config import load_config
from storage import ArtifactStore
from tasks.corpus import CORPUS_STAGE
from tasks.stage import run_stage

assert "tsv_plugin" not in sys.modules
config = load_config(sys.argv[1])
corpus = config.stage_configs["corpus"]
store = ArtifactStore(config.settings.root)
ref, manifest = run_stage(store, CORPUS_STAGE, corpus, {})
rows = pl.from_arrow(store.read_table("corpus", ref.key))
print(json.dumps({"kind": type(corpus.sources[0]).__module__, "texts": rows["text"].to_list(), "imported": "tsv_plugin" in sys.modules}))
"""


def install_plugin(site: Path, module: str, body: str, entry: str) -> None:
    """What `pip install` leaves for a distribution declaring `[project.entry-points."xlembed.plugins"]`."""
    (site / f"{module}.py").write_text(body, encoding="utf-8")
    dist = site / f"{module.replace('_', '-')}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(f"[xlembed.plugins]\n{entry}\n", encoding="utf-8")


def run_worker(tmp_path: Path, site: Path) -> subprocess.CompletedProcess:
    (tmp_path / "pairs.tsv").write_text("Good morning.\tҚайырлы таң.\nThank you.\tРақмет.\n", encoding="utf-8")
    (tmp_path / "pipeline.toml").write_text(
        textwrap.dedent(
            """
            [pipeline]
            name = "entry-point-plugin"
            root = "artifacts"

            [corpus]
            dev_fraction = 0.0
            sources = [{ name = "pairs", kind = "tsv_pairs", path = "pairs.tsv" }]
            """
        ),
        encoding="utf-8",
    )
    (tmp_path / "worker.py").write_text(WORKER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    return subprocess.run(
        [sys.executable, str(tmp_path / "worker.py"), str(tmp_path / "pipeline.toml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )


@pytest.mark.slow
def test_a_process_that_never_imported_the_plugin_finds_it_through_its_entry_point(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site, "tsv_plugin", PLUGIN, "pairs = tsv_plugin")
    done = run_worker(tmp_path, site)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"kind": "tsv_plugin", "texts": ["Good morning.", "Қайырлы таң.", "Thank you.", "Рақмет."], "imported": True}


@pytest.mark.slow
def test_without_the_entry_point_the_kind_is_unknown_and_a_broken_plugin_is_named(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "tsv_plugin.py").write_text(PLUGIN, encoding="utf-8")  # on the path, but not declared
    done = run_worker(tmp_path, site)
    assert done.returncode != 0 and "unknown source kind 'tsv_pairs'" in done.stderr

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "site").mkdir()
    install_plugin(broken / "site", "bad_plugin", "raise RuntimeError('needs a GPU driver')\n", "bad = bad_plugin")
    done = run_worker(broken, broken / "site")
    assert done.returncode != 0
    assert (
        "xlembed plug-in 'bad' = 'bad_plugin' (distribution bad_plugin) failed to import: RuntimeError: needs a GPU driver"
        in done.stderr
    )
