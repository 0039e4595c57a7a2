"""`xlembed artifacts lineage | query | index` over a real three-stage run (corpus -> lengths ->
histogram) into a temporary root, built in-process as the Prefect flow would build it."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.config import load_config
from flows.plan import make_plan
from storage import ArtifactStore
from storage.gc import delete_artifact
from storage.refs import set_ref
from tasks.stage import run_stage
from tests.flows.toy_pipeline import write_config


@pytest.fixture(autouse=True)
def wide_plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("XLEMBED_ROOT", raising=False)
    monkeypatch.delenv("XLEMBED_DEBUG", raising=False)


@pytest.fixture
def built(toy_pipeline: dict, toy_stages: dict) -> dict[str, Any]:
    """The toy pipeline built once; refs toy/{corpus,lengths,histogram} point at it."""
    config = load_config(toy_pipeline["config"])
    store = ArtifactStore(config.settings.root)
    keys = {}
    for step in make_plan(config, store, toy_stages):
        run_stage(store, toy_stages[step.stage], config.stage_configs[step.stage], step.input_keys)
        set_ref(store, config.name, step.stage, step.key)
        keys[step.stage] = step.key
    return {**toy_pipeline, "store": store, "keys": keys}


def artifacts(*args: str, root: Path, code: int = 0) -> str:
    result = CliRunner().invoke(app, ["artifacts", *args, "--root", str(root)], catch_exceptions=False)
    assert result.exit_code == code, f"{args} exited {result.exit_code}:\n{result.output}"
    return result.output


# ------------------------------------------------------------------ lineage
def test_lineage_tree_names_every_upstream_artifact_with_config_sources_and_code(built: dict) -> None:
    keys, root = built["keys"], built["root"]
    text = artifacts("lineage", "histogram", root=root)
    for stage in ("histogram", "lengths", "corpus"):
        assert f"{stage} {keys[stage][:12]}" in text
        assert "code 1 · xlembed 0.1.0" in text
    assert "bucket = 10" in text and 'unit = "chars"' in text and "seed = 7" in text
    assert "key scheme 2 (content keys)" in text
    # the corpus source: the paths its manifest recorded (out of the key), named by source, and
    # the content hashes it was keyed by, readably
    for lang in ("en", "kk"):
        assert f'sources[pairs].files.{lang} = "{built["text"][lang]}"' in text
    digest = built["store"].manifest("corpus", keys["corpus"]).source_fingerprints["pairs"]["en"]["sha256"]
    assert f"fingerprint pairs.en: sha256 {digest[:12]}…" in text and digest not in text
    assert "≠" not in text  # nothing to compare with

    by_prefix = artifacts("lineage", "lengths", keys["lengths"][:8], root=root)
    assert keys["histogram"][:12] not in by_prefix and keys["corpus"][:12] in by_prefix


def test_lineage_json_and_differences_from_a_config(built: dict) -> None:
    keys, root = built["keys"], built["root"]
    tree = json.loads(artifacts("lineage", "histogram", "--json", root=root))
    assert tree["key"] == keys["histogram"] and tree["code_version"] == "1" and tree["created_at"]
    lengths = tree["inputs"]["lengths"]
    corpus = lengths["inputs"]["corpus"]
    assert (lengths["key"], corpus["key"], corpus["inputs"]) == (keys["lengths"], keys["corpus"], {})
    assert lengths["config"] == {"shards": 2, "unit": "chars"}
    assert corpus["sources"]["locations"]["sources[pairs].files"] == {
        "en": str(built["text"]["en"]),
        "kk": str(built["text"]["kk"]),
    }
    assert corpus["sources"]["fingerprints"] == built["store"].manifest("corpus", keys["corpus"]).source_fingerprints
    assert corpus["key_scheme"] == 2 and "files" not in corpus["config"]["sources"][0]  # the paths: only in locations
    assert "config_changes" not in tree

    # compared with an edited config: lengths differs, the others are the same
    edited = built["tmp"] / "edited.toml"
    write_config(edited, root, built["text"], unit="bytes")
    compared = json.loads(artifacts("lineage", "histogram", "--json", "--config", str(edited), root=root))
    assert compared["config_changes"] == {}
    assert compared["inputs"]["lengths"]["config_changes"] == {"unit": {"recorded": "chars", "current": "bytes"}}
    assert compared["inputs"]["lengths"]["inputs"]["corpus"]["config_changes"] == {}
    text = artifacts("lineage", "histogram", "--config", str(edited), root=root)
    assert '≠ unit = "chars"  current: "bytes"' in text and "1 differs from --config" in text


def test_lineage_of_a_manifest_from_before_content_keys_shows_its_config_paths_and_sizes(built: dict) -> None:
    """Key scheme 1 kept the paths in the config and fingerprinted files by size and mtime."""
    keys, root, store = built["keys"], built["root"], built["store"]
    path = Path(store.artifact_dir("corpus", keys["corpus"])) / "manifest.json"
    manifest = json.loads(path.read_text())
    locations = manifest.pop("locations")
    del manifest["key_scheme"]
    manifest["config"]["sources"][0]["files"] = locations["sources[0].files"]
    en = built["text"]["en"]
    manifest["source_fingerprints"] = {
        "pairs": {"en": {"size": 12_400, "mtime_ns": 1_790_000_000_000_000_000}, "kk": {"size": 3, "mtime_ns": 1}}
    }
    path.write_text(json.dumps(manifest))

    text = artifacts("lineage", "corpus", root=root)
    assert "key scheme 1 (size and mtime keys)" in text
    assert f'sources[pairs].files.en = "{en}"' in text
    assert "fingerprint pairs.en: 12.1 KiB, modified 2026-09-21T" in text
    tree = json.loads(artifacts("lineage", "corpus", "--json", root=root))
    assert tree["key_scheme"] == 1 and tree["sources"]["locations"] == {
        "sources[pairs].files": {"en": str(en), "kk": str(built["text"]["kk"])}
    }


def test_lineage_marks_a_collected_input_missing_and_refuses_an_unknown_key(built: dict) -> None:
    keys, root, store = built["keys"], built["root"], built["store"]
    delete_artifact(store, "corpus", keys["corpus"])
    text = artifacts("lineage", "histogram", root=root)
    assert f"corpus {keys['corpus'][:12]}  missing from the store" in text
    tree = json.loads(artifacts("lineage", "histogram", "--json", root=root))
    assert tree["inputs"]["lengths"]["inputs"]["corpus"] == {
        "stage": "corpus",
        "key": keys["corpus"],
        "uri": store.uri("corpus", keys["corpus"]),
        "missing": True,
    }
    assert "no committed histogram artifact with key starting 'ffff'" in artifacts(
        "lineage", "histogram", "ffff", root=root, code=2
    )


# -------------------------------------------------------------------- query
def test_query_group_by_over_a_ref_and_over_stage_at_key(built: dict, tmp_path: Path) -> None:
    keys, root, store = built["keys"], built["root"], built["store"]
    corpus = pl.from_arrow(store.read_table("corpus", keys["corpus"]))
    expected = corpus.group_by("lang").len().sort("lang")
    text = artifacts("query", "SELECT lang, count(*) AS n FROM corpus GROUP BY lang ORDER BY lang", root=root)
    for lang, n in expected.iter_rows():
        assert any(
            line.split("|")[1].strip() == lang and line.split("|")[2].strip() == str(n)
            for line in text.splitlines()
            if line.startswith("|")
        ), text

    # STAGE@KEY (a prefix, quoted or not) joined with a ref; '@' inside a string literal stays
    prefix = keys["lengths"][:10]
    out = tmp_path / "out" / "joined.parquet"
    sql = f"SELECT c.lang, sum(l.length) AS chars FROM \"lengths@{prefix}\" l JOIN corpus c USING (id) WHERE c.text <> 'x@{prefix}' GROUP BY c.lang"
    assert "wrote 2 rows" in artifacts("query", sql, "--output", str(out), root=root)
    lengths = pl.from_arrow(store.read_table("lengths", keys["lengths"]))
    want = lengths.join(corpus, on="id").group_by("lang").agg(pl.col("length").sum().alias("chars")).sort("lang")
    assert pl.read_parquet(out).sort("lang").equals(want)

    csv = tmp_path / "all.csv"
    assert f"wrote {lengths.height} rows" in artifacts("query", f"SELECT * FROM lengths@{prefix}", "-o", str(csv), root=root)
    assert pl.read_csv(csv).height == lengths.height


def test_query_prints_at_most_limit_rows(built: dict) -> None:
    result = CliRunner().invoke(
        app, ["artifacts", "query", "SELECT id FROM lengths ORDER BY id", "--limit", "3", "--root", str(built["root"])]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.count("| pairs:") == 3
    assert "first 3 rows shown" in result.stderr


def test_query_errors_are_one_line(built: dict, tmp_path: Path) -> None:
    root = built["root"]
    unknown = artifacts("query", "SELECT * FROM nope", root=root, code=2)
    assert "unknown table 'nope'; available: corpus, histogram, lengths" in unknown and "Traceback" not in unknown
    assert 'SQL error: Parser Error: syntax error at or near "SELEC"' in artifacts(
        "query", "SELEC lang FROM corpus", root=root, code=2
    )
    assert 'SQL error: Binder Error: Referenced column "nope" not found' in artifacts(
        "query", "SELECT nope FROM corpus", root=root, code=2
    )
    assert "no committed corpus artifact with key starting 'ffff'" in artifacts(
        "query", "SELECT * FROM corpus@ffff", root=root, code=2
    )
    assert "write .parquet or .csv" in artifacts("query", "SELECT 1", "-o", str(tmp_path / "x.json"), root=root, code=2)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sql", "tried"),
    [
        ("SELECT * FROM read_csv('{secret}')", "{secret}"),
        ("SELECT * FROM '{secret}'", "{secret}"),
        ("SELECT count(*) FROM corpus WHERE lang IN (SELECT content FROM read_text('{secret}'))", "{secret}"),
        ("SELECT * FROM read_parquet('{artifact}')", "{artifact}"),
        ("SELECT * FROM read_parquet('https://example.invalid/x.parquet')", "https://example.invalid/x.parquet"),
        ("SELECT * FROM 's3://some-bucket/x.parquet'", "s3://some-bucket/x.parquet"),
    ],
)
def test_query_reads_the_store_and_nothing_else(built: dict, tmp_path: Path, sql: str, tried: str) -> None:
    """A file, a path, a URL or an object outside the registered tables is refused with one line
    naming what the query tried; nothing is read and nothing is written."""
    root, store, keys = built["root"], built["store"], built["keys"]
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n", encoding="utf-8")
    manifest = store.manifest("corpus", keys["corpus"])
    artifact_file = (
        f"{store.artifact_dir('corpus', keys['corpus'])}/{manifest.table_files[0].path}"  # even the store's own files, by path
    )
    written = tmp_path / "written.db"
    values = {"secret": str(secret), "artifact": artifact_file, "written": str(written)}
    text = artifacts("query", sql.format(**values), root=root, code=2)
    assert f"query refused: it tries to read '{tried.format(**values)}', outside the store" in text, text
    assert "hunter2" not in text and "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    assert not written.exists()


def test_query_cannot_switch_the_sandbox_off(built: dict) -> None:
    text = artifacts("query", "SET enable_external_access = true", root=built["root"], code=2)
    assert "query refused: SET statement" in text, text


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("COPY (SELECT * FROM corpus) TO '{written}'", "COPY statement"),
        ("ATTACH '{written}' AS other", "ATTACH statement"),
        ("EXPORT DATABASE '{folder}'", "EXPORT statement"),
        ("CREATE TABLE t AS SELECT * FROM corpus", "CREATE statement"),
        ("PRAGMA version", "PRAGMA statement"),
        ("SELECT 1; EXPORT DATABASE '{folder}'", "2 statements"),
    ],
)
def test_only_one_select_runs_and_a_refused_statement_never_ran(built: dict, tmp_path: Path, sql: str, kind: str) -> None:
    """Issue 35: DuckDB ran part of a refused statement (EXPORT DATABASE created its folder before
    the refusal). The statement is parsed first; anything but one SELECT exits 2, unrun."""
    written, folder = tmp_path / "written.db", tmp_path / "exported"
    text = artifacts("query", sql.format(written=written, folder=folder), root=built["root"], code=2)
    assert f"query refused: {kind}" in text and "nothing was run" in text and len(text.strip().splitlines()) == 1, text
    assert not written.exists() and not folder.exists()


def test_query_output_and_export_never_land_inside_the_store(built: dict) -> None:
    """Issue 35: `query -o` and `export` wrote wherever pointed, a committed artifact's folder included."""
    root, store, keys = built["root"], built["store"], built["keys"]
    committed = Path(store.artifact_dir("corpus", keys["corpus"])) / "files" / "x.parquet"
    text = artifacts("query", "SELECT * FROM corpus", "-o", str(committed), root=root, code=2)
    assert "inside the artifact store" in text and not committed.exists(), text
    refs = Path(root) / "refs" / "out.csv"
    assert "inside the artifact store" in artifacts("query", "SELECT 1 AS one", "-o", str(refs), root=root, code=2)
    result = CliRunner().invoke(
        app, ["export", keys["corpus"][:12], str(Path(root) / "corpus" / "exported"), "--root", str(root)]
    )
    assert result.exit_code == 2 and "inside the artifact store" in result.output, result.output
    assert not (Path(root) / "corpus" / "exported").exists()


# -------------------------------------------------------------------- index
class PageLinks(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "a" and values.get("href"):
            self.hrefs.append(values["href"] or "")
        if values.get("id"):
            self.ids.add(values["id"] or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_page(path: Path) -> PageLinks:
    page = PageLinks()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def check_links(page: PageLinks, folder: Path) -> None:
    from urllib.parse import unquote

    for href in page.hrefs:
        if href.startswith("#"):
            assert href[1:] in page.ids, href
        else:
            assert "://" not in href and not href.startswith("/"), href
            target = folder / unquote(href)
            assert target.is_dir() if href.endswith("/") else target.is_file(), href


def test_index_page_lists_every_artifact_with_working_relative_links(built: dict, tmp_path: Path) -> None:
    keys, root, store = built["keys"], built["root"], built["store"]
    sweep = root / "sweeps" / "demo-grid"
    sweep.mkdir(parents=True)
    (sweep / "report.html").write_text("<p>sweep</p>", encoding="utf-8")
    (sweep / "report.md").write_text("# sweep", encoding="utf-8")

    assert f"{root}/index.html: 3 artifacts" in artifacts("index", root=root)
    index = root / "index.html"
    page = parse_page(index)
    text = " ".join(page.text)
    for stage, key in keys.items():
        assert key[:12] in text, stage
        manifest = store.manifest(stage, key)
        assert f"{manifest.rows_out:,}" in text
    assert "sweeps/demo-grid/report.html" in page.hrefs and "sweeps/demo-grid/report.md" in page.hrefs
    assert sum(h.endswith("manifest.json") for h in page.hrefs) == len(keys)
    check_links(page, root)
    from flows.store_index import AGE_SCRIPT

    written = index.read_text(encoding="utf-8")
    assert written.count("<script") == 1 and AGE_SCRIPT in written  # only the script that computes ages when read

    # written elsewhere, the links lead back into the root
    site = tmp_path / "site"
    artifacts("index", "--output", str(site), root=root)
    elsewhere = parse_page(site / "index.html")
    assert len(elsewhere.hrefs) == len(page.hrefs)
    check_links(elsewhere, site)


def _chromium() -> str | None:
    return next(
        (found for name in ("chromium", "chromium-browser", "google-chrome", "chrome") if (found := shutil.which(name))), None
    )


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no chromium binary on PATH (Debian: apt-get install -y chromium)")
def test_index_page_renders_in_headless_chromium(built: dict) -> None:
    keys, root = built["keys"], built["root"]
    artifacts("index", root=root)
    run = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", (root / "index.html").as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    for stage, key in keys.items():
        assert f'<h3 id="stage-{stage}">' in dom and key[:12] in dom
    assert dom.count("manifest.json") == len(keys) and "<table>" in dom
