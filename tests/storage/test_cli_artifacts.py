"""`xlembed artifacts ...` against a local and an S3 (moto) root populated through the store API."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore, Manifest
from storage.build_locks import hold_build_lock
from storage.gc import delete_artifact, uncommitted_keys
from storage.refs import list_refs, read_ref, set_ref

STAGE = "embed"


@pytest.fixture(autouse=True)
def wide_plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("XLEMBED_ROOT", raising=False)
    monkeypatch.delenv("XLEMBED_DEBUG", raising=False)


class Cli:
    """Runs the app and remembers every output, so that leaks can be checked at the end."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.runner = CliRunner()
        self.outputs: list[str] = []

    def __call__(self, *args: str, code: int = 0, root: str | None = None) -> Any:
        argv = ["artifacts", *args, "--root", root or self.root]
        result = self.runner.invoke(app, argv, catch_exceptions=False)
        self.outputs.append(result.output)
        assert result.exit_code == code, f"{argv} exited {result.exit_code}:\n{result.output}"
        return result


@pytest.fixture
def cli(store: ArtifactStore) -> Cli:
    return Cli(store.root_uri)


@pytest.fixture
def populated(store: ArtifactStore, kit: Any) -> dict[str, Manifest]:
    """old -> current in refs/demo/embed, a stray artifact, and a referenced corpus."""
    old = kit.build(store, STAGE, {"model": "labse", "batch": 8}, rows=10, created_at="2024-01-01T00:00:00+00:00")
    current = kit.build(store, STAGE, {"model": "laser", "batch": 8}, rows=7, dropped={"too_long": 3}, code_version="2")
    stray = kit.build(store, STAGE, {"model": "stray", "batch": 1}, rows=2)
    corpus = kit.build(store, "corpus", {"langs": ["de"]}, rows=5)
    set_ref(store, "demo", STAGE, old.key)
    set_ref(store, "demo", STAGE, current.key)
    set_ref(store, "demo", "corpus", corpus.key)
    return {"old": old, "current": current, "stray": stray, "corpus": corpus}


def line_with(text: str, needle: str) -> str:
    lines = [line for line in text.splitlines() if needle in line]
    assert len(lines) == 1, f"{needle!r} on {len(lines)} lines of:\n{text}"
    return lines[0]


@pytest.mark.slow
def test_ls(cli: Cli, populated: dict[str, Manifest]) -> None:
    out = cli("ls").stdout
    assert cli.root in out
    old, current, stray, corpus = (populated[k] for k in ("old", "current", "stray", "corpus"))
    row = line_with(out, current.key[:12])
    assert STAGE in row and " 7 " in row and "demo" in row
    row = line_with(out, old.key[:12])
    assert " 10 " in row and "demo" not in row  # only in the ref's history
    assert "demo" not in line_with(out, stray.key[:12])
    assert "demo" in line_with(out, corpus.key[:12])
    assert current.key not in out  # keys are abbreviated

    only = cli("ls", STAGE).stdout
    assert corpus.key[:12] not in only and current.key[:12] in only


@pytest.mark.slow
def test_ls_empty_root_and_root_from_environment(
    cli: Cli, populated: dict[str, Manifest], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty").mkdir()
    empty = cli("ls", root=str(tmp_path / "empty"))
    assert "no artifacts" in empty.output
    missing = cli("ls", root=str(tmp_path / "missing"), code=2)  # a mistyped root is not an empty store
    assert f"artifact root {tmp_path / 'missing'} does not exist" in missing.output
    assert not (tmp_path / "missing").exists()
    monkeypatch.setenv("XLEMBED_ROOT", cli.root)
    result = cli.runner.invoke(app, ["artifacts", "ls"], catch_exceptions=False)
    assert result.exit_code == 0
    assert populated["current"].key[:12] in result.stdout


@pytest.mark.slow
def test_show(cli: Cli, populated: dict[str, Manifest]) -> None:
    old = populated["old"]
    out = cli("show", STAGE, old.key[:10], "-n", "3").stdout
    assert out.splitlines()[0] == f"{STAGE} {old.key}"  # a summary first, not the manifest's JSON
    assert " 10 out" in out and "{" not in out
    assert "id-00000" in out and "id-00002" in out and "id-00003" not in out
    assert "sentence 1 ünïcödé" in out
    manifest = cli("show", STAGE, old.key[:10], "--json").stdout  # everything, as JSON
    assert f'"key": "{old.key}"' in manifest and '"rows_out": 10' in manifest
    assert '"model": "labse"' in manifest and "data/s0-00000.parquet" in manifest
    assert "id-00000" not in manifest

    # without a key: what the (only) ref points at
    current = populated["current"]
    out = cli("show", STAGE, "--rows", "0").stdout
    assert out.splitlines()[0] == f"{STAGE} {current.key}"
    assert "id-00000" not in out


@pytest.mark.slow
def test_show_errors(cli: Cli, populated: dict[str, Manifest], store: ArtifactStore) -> None:
    set_ref(store, "other", STAGE, populated["stray"].key)  # two pipelines disagree
    out = cli("show", STAGE, code=2).output
    assert "2 pipelines have a embed ref" in out and "give --pipeline NAME or a key" in out
    assert f"other/embed -> {populated['stray'].key[:12]}" in out
    assert f'"key": "{populated["stray"].key}"' in cli("show", STAGE, "--pipeline", "other", "--json").stdout
    assert "no committed" in cli("show", STAGE, "ffffffffff", code=2).output


@pytest.mark.slow
def test_diff(cli: Cli, populated: dict[str, Manifest]) -> None:
    old, current = populated["old"], populated["current"]
    out = cli("diff", STAGE, old.key[:12], current.key[:12]).stdout
    assert f"{STAGE} {old.key[:12]} -> {current.key[:12]}" in out
    assert "embed.model: 'labse' -> 'laser'" in out
    assert "batch" not in out  # unchanged keys are not reported
    assert "code version: 1 -> 2" in out
    assert "rows out: 10 -> 7 (-3)" in out
    assert "rows in" not in out  # 10 -> 10
    assert "dropped too_long: 0 -> 3 (+3)" in out
    same = cli("diff", STAGE, old.key, old.key).stdout
    assert "no differences" in same


@pytest.mark.slow
def test_verify(cli: Cli, populated: dict[str, Manifest], store: ArtifactStore, request: pytest.FixtureRequest) -> None:
    out = cli("verify").stdout
    assert "4 artifacts verified" in out
    assert "CORRUPT" not in out

    current = populated["current"]
    entry = current.files[0]
    path = f"{store.artifact_dir(STAGE, current.key)}/{entry.path}"
    blob = bytearray(store.backend.fs.cat_file(path))
    blob[len(blob) // 2] ^= 0x01
    if store.backend.is_local:
        Path(path).write_bytes(bytes(blob))
    else:  # corrupt it behind the store's back
        server = request.getfixturevalue("s3_server")
        bucket, key = path.split("/", 1)
        server.client().put_object(Bucket=bucket, Key=key, Body=bytes(blob))

    result = cli("verify", code=1)
    assert f"CORRUPT {STAGE}/{current.key[:12]}" in result.stdout
    assert entry.path in result.stdout and "sha256" in result.stdout
    assert f"ok      {STAGE}/{populated['old'].key[:12]}" in result.stdout
    assert "1 of 4 artifacts failed verification" in result.output
    # one artifact, by stage and key prefix
    cli("verify", STAGE, populated["old"].key[:8])
    cli("verify", STAGE, current.key[:8], code=1)
    assert "1 artifacts verified" in cli("verify", "corpus").stdout


@pytest.mark.slow
def test_gc(cli: Cli, populated: dict[str, Manifest], store: ArtifactStore) -> None:
    old, stray = populated["old"], populated["stray"]
    young = cli("gc")  # stray was committed a moment ago: inside the default grace period; old in 2024
    assert f"would delete {STAGE}/{old.key[:12]}" in young.stdout and stray.key[:12] not in young.stdout
    assert "1 unreferenced artifact(s) kept: younger than the grace period (1h)" in young.output
    dry = cli("gc", "--grace", "0").stdout
    assert f"would delete {STAGE}/{old.key[:12]}" in dry
    assert f"would delete {STAGE}/{stray.key[:12]}" in dry
    assert "2 artifacts; run again with --yes" in dry
    assert all(store.is_committed(m.stage, m.key) for m in populated.values())  # dry run: nothing gone

    kept = cli("gc", "--grace", "0", "--keep-history").stdout
    assert old.key[:12] not in kept and f"would delete {STAGE}/{stray.key[:12]}" in kept

    done = cli("gc", "--grace", "0", "--keep-history", "--yes").stdout
    assert f"delete {STAGE}/{stray.key[:12]}" in done and "would" not in done
    assert not store.is_committed(STAGE, stray.key)
    assert store.is_committed(STAGE, old.key)

    cli("gc", "--grace", "0", "--yes")
    assert not store.is_committed(STAGE, old.key)
    assert {(m.stage, m.key) for m in store.list_manifests()} == {
        (STAGE, populated["current"].key),
        ("corpus", populated["corpus"].key),
    }
    assert "nothing to collect" in cli("gc").stdout
    cli("verify")


def test_gc_keeps_a_build_between_commit_and_ref_move_and_refuses_a_bad_grace(cli: Cli, store: ArtifactStore, kit: Any) -> None:
    built = kit.build(store, STAGE, {"model": "just-committed"}, rows=3)  # committed; its ref not moved yet
    assert store.is_committed(STAGE, built.key) and not any(r.key == built.key for r in list_refs(store))
    out = cli("gc", "--yes").output
    assert "younger than the grace period (1h)" in out and store.is_committed(STAGE, built.key)
    assert "younger than the grace period (30m)" in cli("gc", "--grace", "30m").output
    for bad in ("1w", "-1h", "soon", "5"):
        assert f"--grace {bad!r}: give a duration such as 30m, 2h or 1d" in cli("gc", "--grace", bad, code=2).output
    assert store.is_committed(STAGE, built.key)
    cli("gc", "--grace", "0", "--yes")
    assert not store.is_committed(STAGE, built.key)


def test_gc_include_partial(cli: Cli, store: ArtifactStore, kit: Any) -> None:
    partial = kit.build(store, STAGE, {"model": "partial"}, rows=3, commit=False)
    assert "nothing to collect" in cli("gc").stdout
    young = cli("gc", "--include-partial", "--yes")  # as a build in progress: written a moment ago
    assert "1 unreferenced artifact(s) kept: younger than the grace period" in young.output
    assert uncommitted_keys(store) == [(STAGE, partial.key)]
    assert f"would delete {STAGE}/{partial.key[:12]}" in cli("gc", "--grace", "0", "--include-partial").stdout
    cli("gc", "--grace", "0", "--include-partial", "--yes")
    assert uncommitted_keys(store) == []


def test_gc_include_partial_collects_temporary_files_inside_committed_folders(
    cli: Cli, store: ArtifactStore, kit: Any, read_all: Any
) -> None:
    built = kit.build(store, STAGE, {"model": "partial-file"}, rows=5)
    set_ref(store, "demo", STAGE, built.key)
    base = store.artifact_dir(STAGE, built.key)

    def committed() -> dict[str, bytes]:
        return {k: v for k, v in read_all(store).items() if k.startswith(f"{STAGE}/{built.key}/") and ".tmp-" not in k}

    listed = committed()
    partial = f"{base}/data/.s0-00000.parquet.tmp-{'a' * 32}"  # what a copy killed mid-file leaves
    store.backend.write_object(partial, b"half a file")
    young = cli("gc", "--include-partial", "--yes").output  # written a moment ago: a copy may be writing it
    assert store.backend.fs.exists(partial) and "partial file" not in young
    assert "kept 1: 1 a ref points to it" in young and "nothing to collect" in young
    assert (
        f"would delete partial file {STAGE}/{built.key}/data/.s0-00000.parquet.tmp-"
        in cli("gc", "--include-partial", "--grace", "0").output
    )
    assert "partial file" not in cli("gc", "--grace", "0").output  # only with --include-partial
    assert store.backend.fs.exists(partial)
    done = cli("gc", "--include-partial", "--grace", "0", "--yes").output
    assert f"delete partial file {STAGE}/{built.key}/data/.s0-00000.parquet.tmp-" in done
    store.backend.fs.invalidate_cache()
    assert not store.backend.fs.exists(partial)
    assert committed() == listed and len(listed) >= len(built.files) + 1  # the data files, shard records, manifest
    assert store.is_committed(STAGE, built.key)
    cli("verify")


def test_gc_says_what_it_kept_and_why_and_honours_build_locks(cli: Cli, store: ArtifactStore, kit: Any) -> None:
    from storage import build_locks

    referenced = kit.build(store, STAGE, {"model": "ref"}, rows=3)
    set_ref(store, "demo", STAGE, referenced.key)
    young = kit.build(store, STAGE, {"model": "young"}, rows=3)
    held = kit.build(store, STAGE, {"model": "held"}, rows=3, created_at="2024-01-01T00:00:00+00:00")
    with hold_build_lock(store, STAGE, held.key):
        out = cli("gc", "--yes").output
    assert store.is_committed(STAGE, held.key) and store.is_committed(STAGE, young.key)
    assert f"{STAGE}/{held.key[:12]} kept: a running build holds a lock on it (pid " in out
    assert "kept 3: 1 a ref points to it, 1 younger than the grace period (1h), 1 a running build holds a lock on it" in out, out
    assert build_locks.list_locks(store) == [], "the lock outlived its holder's body"
    assert f"would delete {STAGE}/{held.key[:12]}" in cli("gc").output

    # a lock another host has not refreshed for longer than STALE_AFTER, and one that cannot be read
    old = (datetime.now(timezone.utc) - build_locks.STALE_AFTER - timedelta(minutes=5)).isoformat()
    record = {"pid": 1, "host": "elsewhere.example", "started_at": old, "refreshed_at": old, "what": "build"}
    lock_dir = build_locks.lock_dir(store, STAGE, held.key)
    store.backend.write_object(f"{lock_dir}/elsewhere-1-0.json", json.dumps(record).encode())
    store.backend.write_object(f"{build_locks.lock_dir(store, STAGE, young.key)}/x-2-0.json", b"{ not json")
    fresh = {**record, "refreshed_at": datetime.now(timezone.utc).isoformat()}
    store.backend.write_object(
        f"{build_locks.lock_dir(store, STAGE, referenced.key)}/elsewhere-3-0.json", json.dumps(fresh).encode()
    )
    out = cli("gc", "--grace", "0").output
    assert f"stale lock {STAGE}/{held.key[:12]} ignored: pid 1 on elsewhere.example has not refreshed it for 2.1h" in out
    assert f"stale lock {STAGE}/{young.key[:12]} ignored: its file cannot be read" in out
    assert f"would delete {STAGE}/{held.key[:12]}" in out and f"would delete {STAGE}/{young.key[:12]}" in out
    assert len(build_locks.list_locks(store)) == 3
    cli("gc", "--grace", "0", "--yes")
    assert [lock.key for lock in build_locks.list_locks(store)] == [referenced.key]  # the live one stays
    assert {m.key for m in store.list_manifests()} == {referenced.key}
    assert store.stages() == [STAGE], "the lock folder was taken for a stage"


@pytest.mark.slow
def test_refs_and_rollback(cli: Cli, populated: dict[str, Manifest], store: ArtifactStore) -> None:
    old, current, stray = populated["old"], populated["current"], populated["stray"]
    refs = cli("refs").stdout
    row = line_with(refs, current.key[:12])
    assert "demo" in row and STAGE in row and " 2 " in row

    out = cli("rollback", "demo", STAGE).stdout
    assert f"demo/{STAGE}: {current.key[:12]} -> {old.key[:12]}" in out
    ref = read_ref(store, "demo", STAGE)
    assert ref is not None and ref.key == old.key
    assert [h.key for h in ref.history] == [old.key, current.key, old.key]
    assert ref.history[0].note == f"rollback from {current.key[:12]} (version -1)"

    cli("rollback", "demo", STAGE, "--to", stray.key[:10])
    assert read_ref(store, "demo", STAGE).key == stray.key  # type: ignore[union-attr]
    # the ls view follows the ref
    assert "demo" in line_with(cli("ls").stdout, stray.key[:12])


@pytest.mark.slow
def test_rollback_errors(cli: Cli, populated: dict[str, Manifest], store: ArtifactStore) -> None:
    assert "no ref nobody/embed" in cli("rollback", "nobody", STAGE, code=2).output
    assert "no earlier version" in cli("rollback", "demo", "corpus", code=2).output
    assert "no committed" in cli("rollback", "demo", STAGE, "--to", "ffffffff", code=2).output
    assert read_ref(store, "demo", STAGE).key == populated["current"].key  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", ["s3://AKIAEXAMPLE:hunter2-secret@bucket/x", "s3://bucket/x?token=hunter2-secret"])
def test_root_with_credentials_is_refused(bad: str) -> None:
    result = CliRunner().invoke(app, ["artifacts", "ls", "--root", bad])
    assert result.exit_code == 2
    assert "hunter2-secret" not in result.output
    assert "not allowed" in result.output


@pytest.mark.slow
def test_secret_never_appears(s3_root: str, s3_server: Any, kit: Any, read_all: Any, scratch_tmp: Path) -> None:
    store = ArtifactStore(s3_root)
    cli = Cli(s3_root)
    a = kit.build(store, STAGE, {"model": "a"}, rows=4)
    b = kit.build(store, STAGE, {"model": "b"}, rows=5)
    set_ref(store, "demo", STAGE, a.key)
    set_ref(store, "demo", STAGE, b.key)
    cli("ls")
    cli("show", STAGE, b.key[:8])
    cli("diff", STAGE, a.key[:8], b.key[:8])
    cli("verify")
    cli("refs")
    cli("rollback", "demo", STAGE)
    cli("gc")
    cli("gc", "--grace", "0", "--yes")
    cli("show", STAGE, "0000", code=2)
    cli("query", f"SELECT n >= 20 AS big, count(*) AS c FROM {STAGE} GROUP BY big")
    cli("lineage", STAGE, "--json")
    cli("index")
    assert len(cli.outputs) == 12 and all(cli.outputs)
    for output in cli.outputs:
        assert s3_server.secret not in output
    blobs = read_all(store)
    checked = [p for p in blobs if p.endswith("manifest.json") or p.startswith("refs/") or "/shards/" in p]
    assert any(p.startswith("refs/") for p in checked) and any(p.endswith("manifest.json") for p in checked)
    for path in checked:
        assert s3_server.secret.encode() not in blobs[path], path
        assert s3_server.key_id.encode() not in blobs[path], path
    for blob in blobs.values():
        assert s3_server.secret.encode() not in blob


@pytest.mark.slow
def test_query_group_by_over_a_ref_and_a_key_prefix(cli: Cli, populated: dict[str, Manifest]) -> None:
    """DuckDB reads the Parquet files through the store's filesystem: from the folder, or from moto."""

    def counts(output: str) -> dict[str, str]:
        cells = [
            [c.strip() for c in line.strip("|").split("|")] for line in output.splitlines() if line.startswith("|")
        ]  # a pipe: Markdown rows
        return {row[0]: row[1] for row in cells if row[0] in ("true", "false")}

    sql = "SELECT n >= 30 AS big, count(*) AS c FROM {table} GROUP BY big ORDER BY big"
    assert counts(cli("query", sql.format(table=STAGE)).stdout) == {"false": "3", "true": "4"}  # current: n = 0, 10, ..., 60
    old = populated["old"]
    assert counts(cli("query", sql.format(table=f"{STAGE}@{old.key[:10]}")).stdout) == {"false": "3", "true": "7"}
    out = cli("query", f"SELECT e.id FROM {STAGE} e JOIN corpus c USING (id) ORDER BY e.id").stdout
    assert "id-00004" in out and "id-00005" not in out  # the corpus has 5 rows


@pytest.mark.slow
def test_query_unknown_table_names_the_available_ones(cli: Cli, populated: dict[str, Manifest], store: ArtifactStore) -> None:
    out = cli("query", "SELECT * FROM nope", code=2).output
    assert "unknown table 'nope'; available: corpus, embed (or STAGE@KEY for any version)" in out
    set_ref(store, "other", STAGE, populated["stray"].key)  # two pipelines disagree: as `show`, ask which
    assert "give --pipeline NAME or a key" in cli("query", f"SELECT count(*) FROM {STAGE}", code=2).output
    assert "| 2 " in cli("query", f"SELECT count(*) AS c FROM {STAGE}", "--pipeline", "other").stdout


@pytest.mark.slow
def test_query_refuses_what_lies_outside_the_store(
    cli: Cli, populated: dict[str, Manifest], store: ArtifactStore, tmp_path: Path
) -> None:
    """On a local and an S3 root alike: the registered artifacts are read, any other file or object is not."""
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n", encoding="utf-8")
    object_uri = f"{store.uri(STAGE, populated['current'].key)}/{populated['current'].table_files[0].path}"
    for sql, tried in (
        (f"SELECT * FROM read_csv('{outside}')", str(outside)),
        (f"SELECT count(*) FROM read_parquet('{object_uri}')", object_uri),
    ):
        out = cli("query", sql, code=2).output
        assert (
            out.strip()
            == f"error: query refused: it tries to read '{tried}', outside the store; artifacts query reads only the store's artifacts (STAGE or STAGE@KEY)"
        ), out


@pytest.mark.slow
def test_index_page_in_the_root(cli: Cli, populated: dict[str, Manifest], store: ArtifactStore, kit: Any, tmp_path: Path) -> None:
    from html.parser import HTMLParser
    from urllib.parse import unquote

    # an artifact with a report and a figure attached, and a sweep report beside the stages
    report, figure = tmp_path / "report.html", tmp_path / "curves.png"
    report.write_text("<h1>scores</h1>", encoding="utf-8")
    figure.write_bytes(b"\x89PNG fake")
    config = {"model": "<b>trained</b>"}
    key = kit.key("train", config)
    records = kit.write(store, "train", key, rows=1)
    attached = store.write_attached_files("train", key, {"report/report.html": report, "curves.png": figure})
    manifest = kit.manifest("train", key, config, records)
    store.commit(manifest.model_copy(update={"files": [*manifest.files, *attached]}))
    set_ref(store, "demo", "train", key)
    store.backend.fs.makedirs(f"{store.root_path}/sweeps/grid-1", exist_ok=True)
    store.backend.fs.pipe_file(f"{store.root_path}/sweeps/grid-1/report.html", b"<p>sweep</p>")

    assert "index.html: 5 artifacts" in cli("index").stdout
    html = store.backend.fs.cat_file(f"{store.root_path}/index.html").decode("utf-8")

    class Links(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.hrefs: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "a":
                self.hrefs.append(dict(attrs)["href"] or "")

    parser = Links()
    parser.feed(html)
    files = [h for h in parser.hrefs if not h.startswith("#")]
    assert f"train/{key}/files/report/report.html" in files and f"train/{key}/files/curves.png" in files
    assert "sweeps/grid-1/report.html" in files
    for href in files:
        assert store.backend.fs.exists(f"{store.root_path}/{unquote(href)}"), href
    for m in [*populated.values()]:
        assert m.key[:12] in html
    from flows.store_index import AGE_SCRIPT

    # names from configs are escaped; the one script is the page's own (ages computed when read)
    assert "<b>trained</b>" not in html and html.count("<script") == 1 and AGE_SCRIPT in html
    assert "index.html" not in store.stages() and store.list_manifests("train")


# ------------------------------------------------------------ issue 15: the store's own checks
@pytest.mark.slow
def test_rollback_walks_back_through_history(cli: Cli, store: ArtifactStore, kit: Any) -> None:
    """Rolling back twice goes two versions back (it used to flip between the last two)."""
    built = [kit.build(store, STAGE, {"model": f"v{i}"}, rows=2) for i in range(3)]
    for manifest in built:
        set_ref(store, "demo", STAGE, manifest.key)
    first = cli("rollback", "demo", STAGE).stdout
    assert f"{built[2].key[:12]} -> {built[1].key[:12]}" in first and "version -1 of 3" in first
    second = cli("rollback", "demo", STAGE).stdout
    assert f"{built[1].key[:12]} -> {built[0].key[:12]}" in second and "oldest" in second
    assert "no earlier version -3" in cli("rollback", "demo", STAGE, code=2).output
    listing = cli("rollback", "demo", STAGE, "--list").stdout
    assert [line.lstrip("* ").split()[0] for line in listing.splitlines() if "where the ref" not in line] == ["0", "-1", "-2"]
    assert line_with(listing, built[0].key[:12]).startswith("*")
    cli("rollback", "demo", STAGE, "--to", built[2].key[:10])
    assert read_ref(store, "demo", STAGE).key == built[2].key  # type: ignore[union-attr]
    cli("rollback", "demo", STAGE, "--steps", "2")
    assert read_ref(store, "demo", STAGE).key == built[0].key  # type: ignore[union-attr]
    cli("rollback", "demo", STAGE, "--steps", "0", code=2)


@pytest.mark.slow
def test_verify_checks_refs_and_stage_names(cli: Cli, populated: dict[str, Manifest], store: ArtifactStore) -> None:
    delete_artifact(store, "corpus", populated["corpus"].key)  # refs/demo/corpus now points at nothing
    result = cli("verify", code=1)
    assert f"BROKEN REF refs/demo/corpus -> {populated['corpus'].key[:12]}" in result.stdout
    assert "1 ref(s) point at missing artifacts" in result.output
    assert "no stage 'nosuch'" in cli("verify", "nosuch", code=2).output
    assert "no stage 'nosuch'" in cli("ls", "nosuch", code=2).output


@pytest.mark.slow
def test_a_truncated_manifest_is_reported_and_the_rest_listed(
    cli: Cli, populated: dict[str, Manifest], store: ArtifactStore
) -> None:
    stray = populated["stray"]
    path = f"{store.artifact_dir(STAGE, stray.key)}/manifest.json"
    blob = store.backend.fs.cat_file(path)
    store.backend.write_object(path, blob[: len(blob) // 2])
    listing = cli("ls")
    assert "damaged" in line_with(listing.stdout, stray.key[:12])
    assert populated["current"].key[:12] in listing.stdout and populated["corpus"].key[:12] in listing.stdout
    result = cli("verify", code=1)
    assert f"DAMAGED {STAGE}/{stray.key[:12]}" in result.stdout
    assert f"ok      {STAGE}/{populated['current'].key[:12]}" in result.stdout
    assert "1 of 4 artifacts failed verification" in result.output


def test_read_commands_refuse_a_missing_root(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = tmp_path / "no-such-root"
    for args in (["ls"], ["verify"], ["refs"], ["gc"], ["show", STAGE], ["rollback", "demo", STAGE]):
        result = runner.invoke(app, ["artifacts", *args, "--root", str(missing)])
        assert result.exit_code == 2, (args, result.output)
        assert "does not exist" in result.output
    assert not missing.exists()


def test_missing_bucket_is_an_error_not_an_empty_store(s3_server: Any, tmp_path: Path, kit: Any) -> None:
    runner = CliRunner()
    root = "s3://missing-bucket-xl/x"
    for args in (["ls"], ["verify"], ["refs"]):
        result = runner.invoke(app, ["artifacts", *args, "--root", root])
        assert result.exit_code == 2, (args, result.output)
        assert "bucket 'missing-bucket-xl' does not exist" in result.output and "aws s3 mb" in result.output
        assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    local = ArtifactStore(tmp_path / "local")
    kit.build(local, STAGE, rows=2)
    push = runner.invoke(app, ["artifacts", "push", root, "--root", str(tmp_path / "local")])
    assert push.exit_code == 2 and "does not exist" in push.output and "Traceback" not in push.output


def test_s3_credential_and_endpoint_problems_are_one_line(s3_server: Any, s3_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import s3fs

    runner = CliRunner()

    def one_line(code: int, *needles: str) -> None:
        s3fs.S3FileSystem.clear_instance_cache()
        result = runner.invoke(app, ["artifacts", "ls", "--root", s3_root])
        assert result.exit_code == code, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert s3_root in result.output
        for needle in needles:
            assert needle in result.output, result.output

    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    one_line(1, "no S3 credentials", "AWS_ACCESS_KEY_ID")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret-7f3a9c")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    one_line(1, "cannot reach the S3 endpoint http://127.0.0.1:9", "AWS_ENDPOINT_URL")


def test_wrong_credentials_and_unknown_protocols_are_one_line() -> None:
    from storage.errors import explain

    class ClientError(Exception):
        def __init__(self, code: str) -> None:
            super().__init__(f"An error occurred ({code})")
            self.response = {"Error": {"Code": code}}

    wrapped = PermissionError("The AWS Access Key Id you provided does not exist in our records.")
    wrapped.__cause__ = ClientError("InvalidAccessKeyId")
    message = explain(wrapped, "s3://b/x")
    assert message is not None and "s3://b/x" in message and "InvalidAccessKeyId" in message and "AWS_ACCESS_KEY_ID" in message
    denied = PermissionError("Forbidden")
    denied.__cause__ = ClientError("403")
    assert "access denied" in (explain(denied, "s3://b/x") or "")
    runner = CliRunner()
    gs = runner.invoke(app, ["artifacts", "ls", "--root", "gs://bucket/x"])
    assert gs.exit_code == 1 and "pip install gcsfs" in gs.output and len(gs.output.strip().splitlines()) == 1
    unknown = runner.invoke(app, ["artifacts", "ls", "--root", "nosuchproto://bucket/x"])
    assert unknown.exit_code == 1 and "unknown protocol nosuchproto://" in unknown.output


@pytest.mark.slow
def test_argument_values_are_validated(cli: Cli, populated: dict[str, Manifest]) -> None:
    for args in (
        ["show", STAGE, "-n", "-1"],
        ["head", STAGE, "-n", "-5"],
        ["show", "nosuch"],
        ["head", "nosuch"],
        ["push", "", "nosuch"],
    ):
        result = cli(*args, code=2)
        assert "Traceback" not in result.output


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_odd_arguments_are_one_line_each(cli: Cli, populated: dict[str, Manifest], tmp_path: Path) -> None:
    """A row count beyond any integer, a ref name with '..', a root that is a file: one line each, no traceback."""
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x", encoding="utf-8")
    cases = [
        (["head", STAGE, "-n", "99999999999999999999999"], "-n"),
        (["rollback", "../../x", STAGE], "../../x"),
        (["rollback", "demo", "../x"], "../x"),
        (["ls", "--root", str(a_file)], "is a file, not a folder"),
        (["push", str(a_file)], "is a file, not a folder"),
    ]
    for args, needle in cases:
        argv = ["artifacts", *args] + ([] if "--root" in args else ["--root", cli.root])
        result = cli.runner.invoke(app, argv)
        assert result.exit_code in (1, 2), (argv, result.exit_code, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (argv, repr(result.exception))
        text = result.output.strip()
        assert "Traceback" not in text and needle in text, (argv, text)
        said = [
            line for line in text.splitlines() if line.strip() and not line.startswith(("Usage: ", "Try '"))
        ]  # click's usage hint
        assert len(said) == 1, (argv, text)
