"""Real Prefect runs: in-process against a temporary server, and as killed/concurrent subprocesses."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore
from storage.refs import list_refs, read_ref
from storage.verify import verify_artifact
from tasks.reporting.narrow_tables import UI_TABLE_CHARS
from tests.flows.toy_pipeline import cli, subprocess_env, write_config

pytestmark = pytest.mark.slow


def committed(root: Path) -> dict[str, list[str]]:
    store = ArtifactStore(root)
    out: dict[str, list[str]] = {}
    for m in store.list_manifests():
        out.setdefault(m.stage, []).append(m.key)
    return out


def file_digests(root: Path) -> dict[str, list[str]]:
    store = ArtifactStore(root)
    return {m.stage: sorted(f.sha256 for f in m.files) for m in store.list_manifests()}


def test_flow_runs_dag_publishes_artifacts_and_second_run_computes_nothing(toy_pipeline: dict, prefect_server: None) -> None:
    from prefect.client.orchestration import get_client

    from flows.pipeline import pipeline_flow

    # the flow itself in-process (CliRunner swaps stdout, which Prefect's log handlers keep)
    keys = pipeline_flow(config_path=str(toy_pipeline["config"]))
    stores = committed(toy_pipeline["root"])
    assert sorted(stores) == ["corpus", "histogram", "lengths"]
    store = ArtifactStore(toy_pipeline["root"])
    refs = {r.stage: r.key for r in list_refs(store)}
    assert refs == {stage: found[0] for stage, found in stores.items()} == keys
    assert store.manifest("lengths", refs["lengths"]).rows_out == store.manifest("corpus", refs["corpus"]).rows_out
    assert all(verify_artifact(store, stage, key) == [] for stage, key in refs.items())

    with get_client(sync_client=True) as client:
        artifacts = {a.key: a for a in client.read_artifacts()}
    assert {"corpus-artifact", "lengths-artifact", "histogram-artifact", "corpus-drops", "toy-run", "histogram-report"} <= set(
        artifacts
    )
    # the stage's report.md is shown with its figure inlined: the UI cannot follow a link beside it
    figure = (Path(store.artifact_dir("histogram", refs["histogram"])) / "files/report/lengths.png").read_bytes()
    assert f"![Lengths](data:image/png;base64,{base64.b64encode(figure).decode('ascii')})" in artifacts["histogram-report"].data
    # and its tables cut to the UI's content column, every cell kept beside its row's label; the file keeps them whole
    shown = artifacts["histogram-report"].data
    report = (Path(store.artifact_dir("histogram", refs["histogram"])) / "files/report/report.md").read_text("utf-8")
    assert max(map(len, report.splitlines())) > UI_TABLE_CHARS
    rows = [[c.strip() for c in line.strip("| ").split(" | ")] for line in shown.splitlines() if line.startswith("| lang_")]
    assert len(rows) % 3 == 0 and len(rows) > 3  # several tables of the same three rows
    assert all(len(line) <= UI_TABLE_CHARS for line in shown.splitlines() if line.startswith("|"))
    assert all(value.startswith(row[0][len("lang_")]) for row in rows for value in row[1:])  # beside their label
    assert sorted(value for row in rows for value in row[1:]) == sorted(f"{r}{c}.0" for r in range(3) for c in range(12))
    assert "| Δ |" in shown and "Δ vs untrained base" not in shown

    with get_client(sync_client=True) as client:
        flow_runs_before = len(client.read_flow_runs())
    again = CliRunner().invoke(app, ["run", str(toy_pipeline["config"])])
    assert again.exit_code == 0, again.output
    assert "nothing to compute" in again.output
    with get_client(sync_client=True) as client:
        assert len(client.read_flow_runs()) == flow_runs_before  # an up-to-date run starts no flow


def test_flow_only_and_force(toy_pipeline: dict, prefect_server: None) -> None:
    from flows.pipeline import pipeline_flow

    pipeline_flow(config_path=str(toy_pipeline["config"]), only="lengths")
    assert sorted(committed(toy_pipeline["root"])) == ["corpus", "lengths"]
    store = ArtifactStore(toy_pipeline["root"])
    corpus_key = committed(toy_pipeline["root"])["corpus"][0]
    folder = Path(store.artifact_dir("corpus", corpus_key))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}
    keys = pipeline_flow(config_path=str(toy_pipeline["config"]), force=["corpus"])
    # recomputed although cached: as a new version beside the old one, which is left as it was
    assert keys["corpus"] != corpus_key and store.manifest("corpus", keys["corpus"]).rebuild_of == corpus_key
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()} == before
    assert read_ref(store, "toy", "corpus").key == keys["corpus"]
    assert [h.key for h in read_ref(store, "toy", "corpus").history] == [keys["corpus"], corpus_key]
    assert sorted(committed(toy_pipeline["root"])) == ["corpus", "histogram", "lengths"]
    # the rebuilt corpus is a new input: downstream stages are built on it, and a plain run keeps it
    assert store.manifest("lengths", keys["lengths"]).input_keys["corpus"] == keys["corpus"]
    again = pipeline_flow(config_path=str(toy_pipeline["config"]))
    assert again == keys


def test_runs_refresh_the_store_index_and_link_it_from_the_flow_run(
    toy_pipeline: dict, prefect_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import logging

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    import flows.pipeline
    from flows.pipeline import pipeline_flow

    root, config = toy_pipeline["root"], toy_pipeline["config"]
    index = root / "index.html"

    def index_links(state) -> list:
        this_run = ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])
        with get_client(sync_client=True) as client:
            return client.read_artifacts(
                artifact_filter=ArtifactFilter(flow_run_id=this_run, key=ArtifactFilterKey(any_=["toy-store-index"]))
            )

    state = pipeline_flow(config_path=str(config), return_state=True)
    keys = state.result()
    page = index.read_text(encoding="utf-8")
    assert '<h3 id="pipeline-toy">' in page
    for stage, key in keys.items():  # the run's artifacts, each with its manifest linked
        assert f'href="{stage}/{key}/manifest.json"' in page
    assert [p.name for p in root.iterdir() if p.name.startswith("index.html")] == ["index.html"]  # no temporary file left
    (link,) = index_links(state)
    assert link.data == f"[{index.as_uri()}]({index.as_uri()})"  # Prefect keeps a link artifact as markdown

    # [pipeline] write_index = false: no page, no link, and the same keys (the setting is in no key)
    quiet = toy_pipeline["tmp"] / "quiet.toml"
    quiet.write_text(
        config.read_text(encoding="utf-8").replace("[pipeline]\n", "[pipeline]\nwrite_index = false\n", 1), encoding="utf-8"
    )
    index.unlink()
    state = pipeline_flow(config_path=str(quiet), return_state=True)
    assert state.result() == keys and not index.exists() and index_links(state) == []

    # a page that cannot be written: one warning line, and the run still succeeds
    def broken(*args, **kwargs):
        raise OSError("No space left on device")

    warnings: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("prefect.flow_runs").addHandler(handler)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(flows.pipeline, "write_index", broken)
            state = pipeline_flow(config_path=str(config), return_state=True)
    finally:
        logging.getLogger("prefect.flow_runs").removeHandler(handler)
    assert state.is_completed() and state.result() == keys and index_links(state) == []
    assert warnings == [f"store index {index.as_uri()} not refreshed: OSError: No space left on device"]

    # a CLI run with everything cached starts no flow, but its refs may move: it rewrites the page too
    again = CliRunner().invoke(app, ["run", str(config)])
    assert again.exit_code == 0 and "nothing to compute" in again.output, again.output
    assert index.is_file() and f"{keys['histogram'][:12]}" in index.read_text(encoding="utf-8")


def test_bad_config_exits_2_with_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[pipeline]\nname = "x"\n[corpus]\nseed = "no"\n')
    result = CliRunner().invoke(app, ["run", str(bad)])
    assert result.exit_code == 2
    assert "corpus.seed" in result.output and str(bad) in result.output


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_sigkill_mid_stage_resumes_without_recomputing(toy_pipeline: dict, tmp_path: Path) -> None:
    write_config(toy_pipeline["config"], toy_pipeline["root"], toy_pipeline["text"], shards=6, max_workers=1)
    reference_root = tmp_path / "reference"
    reference_config = write_config(tmp_path / "reference.toml", reference_root, toy_pipeline["text"], shards=6, max_workers=1)
    subprocess.run(cli("run", str(reference_config)), env=subprocess_env(tmp_path), check=True, capture_output=True, timeout=300)

    env = subprocess_env(tmp_path, TOY_SHARD_SECONDS="1.0")
    process = subprocess.Popen(
        cli("run", str(toy_pipeline["config"])),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    lengths_dir = toy_pipeline["root"] / "lengths"
    try:
        assert wait_for(lambda: len(list(lengths_dir.glob("*/shards/*.json"))) >= 2, 240), "no lengths shard finished in time"
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the run and its temporary Prefect server, as a crash would
        process.wait(timeout=30)
    done = {p: p.stat().st_mtime_ns for p in lengths_dir.glob("*/shards/*.json")}
    assert 2 <= len(done) < 6
    assert not list(lengths_dir.glob("*/manifest.json")), "a partial artifact became visible"
    assert "lengths" not in committed(toy_pipeline["root"])

    resumed = subprocess.run(
        cli("run", str(toy_pipeline["config"])), env=subprocess_env(tmp_path), capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in done.items()), "a completed shard was recomputed"
    assert file_digests(toy_pipeline["root"]) == file_digests(reference_root)
    store = ArtifactStore(toy_pipeline["root"])
    for m in store.list_manifests():  # every visible file belongs to the manifest; a killed writer leaves only dot-temps
        folder = Path(store.artifact_dir(m.stage, m.key))
        assert {p.name for p in (folder / "data").iterdir() if not p.name.startswith(".")} == {
            Path(f.path).name for f in m.table_files
        }
        attached = {str(p.relative_to(folder)) for p in folder.glob("files/**/*") if p.is_file() and not p.name.startswith(".")}
        assert attached == {f.path for f in m.attached_files}
    assert all(verify_artifact(store, m.stage, m.key) == [] for m in store.list_manifests())


def test_two_concurrent_runs_commit_one_artifact_per_key(toy_pipeline: dict, tmp_path: Path) -> None:
    write_config(toy_pipeline["config"], toy_pipeline["root"], toy_pipeline["text"], shards=4)
    runs = [
        subprocess.Popen(
            cli("run", str(toy_pipeline["config"])),
            env=subprocess_env(tmp_path / f"run{i}", TOY_SHARD_SECONDS="0.3"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for run in runs:
        _, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-2000:]
    keys = committed(toy_pipeline["root"])
    assert {stage: len(k) for stage, k in keys.items()} == {"corpus": 1, "lengths": 1, "histogram": 1}
    store = ArtifactStore(toy_pipeline["root"])
    assert all(verify_artifact(store, m.stage, m.key) == [] for m in store.list_manifests())


def test_dask_cluster_run_equals_thread_run(toy_pipeline: dict, tmp_path: Path) -> None:
    """Shards fanned out to a local Dask cluster of 2 worker processes give byte-identical artifacts."""
    write_config(toy_pipeline["config"], toy_pipeline["root"], toy_pipeline["text"], shards=4)
    dask_root = tmp_path / "dask-artifacts"
    dask_config = write_config(tmp_path / "dask.toml", dask_root, toy_pipeline["text"], shards=4)
    dask_config.write_text(dask_config.read_text().replace("max_workers = 2", 'max_workers = 2\ntask_runner = "dask"'))
    logs = []
    for config in (toy_pipeline["config"], dask_config):
        result = subprocess.run(
            cli("run", str(config)), env=subprocess_env(tmp_path), capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, result.stderr[-2000:]
        logs.append(result.stdout + result.stderr)
    assert "LocalCluster" not in logs[0] and "Creating a new Dask cluster" in logs[1]
    assert file_digests(dask_root) == file_digests(toy_pipeline["root"])
    assert sorted(file_digests(dask_root)) == ["corpus", "histogram", "lengths"]


def test_a_run_validates_each_stage_config_once(
    toy_pipeline: dict, prefect_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow validates a stage's config when it loads the config file; its plan-shards, shard
    and commit tasks reuse that model (they used to validate it again each: 1 + 1 + shards + 1)."""
    from flows.pipeline import pipeline_flow
    from flows.stages import stage_registry

    config_model = stage_registry()["lengths"].config_model
    validate = config_model.model_validate
    calls: list[object] = []

    def counting(cls: type, obj: object, *args: object, **kwargs: object) -> object:
        calls.append(obj)
        return validate(obj, *args, **kwargs)

    monkeypatch.setattr(config_model, "model_validate", classmethod(counting))
    keys = pipeline_flow(config_path=str(toy_pipeline["config"]))
    shards = len(ArtifactStore(toy_pipeline["root"]).manifest("lengths", keys["lengths"]).shards)
    assert shards == 2 and len(calls) == 1, calls


def test_a_run_computes_each_new_stage_keyed_config_once(
    toy_pipeline: dict, prefect_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan computes a stage's keyed config (and its content-keyed locations) once; the key,
    the why-stale diff and the manifest's commit reuse it (they used to compute it again each:
    key, diff, manifest config, manifest locations). Counted where every computation of it passes:
    the config model's `keyed_view`."""
    from flows.pipeline import pipeline_flow
    from flows.stages import stage_registry

    calls: dict[str, int] = {}
    for name in ("lengths", "histogram"):
        config_model = stage_registry()[name].config_model

        def counting(self: object, data: dict, name: str = name, view=config_model.keyed_view) -> dict:
            calls[name] = calls.get(name, 0) + 1
            return view(self, data)

        monkeypatch.setattr(config_model, "keyed_view", counting)
    keys = pipeline_flow(config_path=str(toy_pipeline["config"]))
    store = ArtifactStore(toy_pipeline["root"])
    assert calls == {"lengths": 1, "histogram": 1}
    assert store.manifest("lengths", keys["lengths"]).config == {"shards": 2, "unit": "chars"}  # what the key was made of
    calls.clear()
    assert pipeline_flow(config_path=str(toy_pipeline["config"])) == keys  # cached: the plan's key only
    assert calls == {"lengths": 1, "histogram": 1}
