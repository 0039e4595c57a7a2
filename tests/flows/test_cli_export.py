"""`xlembed export ARTIFACT DIR [--push REPO_ID]`: resolving the artifact, local and s3 roots, and
the upload to a model hub, tested against a local HTTP server that plays the hub's API."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore
from storage.transfer import copy_artifact, copy_refs
from tasks.reporting.model_card import front_matter
from tasks.tiny_models import build_tiny_model
from tests.storage.conftest import s3_root, s3_server  # noqa: F401 - the moto S3 fixtures
from tests.tasks.train.publish_fixtures import build_store

TOKEN = "hf_testtoken_5b8e1c"  # distinctive, so a leak is easy to spot


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("cli-export")
    return build_store(tmp, build_tiny_model(tmp / "tiny-bert"))


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.slow
def test_export_by_stage_name_and_by_key_prefix(tmp_path, published):
    by_ref = invoke("export", "train", str(tmp_path / "a"), "--root", str(published.root))
    assert by_ref.exit_code == 0, by_ref.output
    assert (
        f"exported train {published.train[:12]}" in by_ref.output
        and f"evaluate artifact {published.evaluate[:12]}" in by_ref.output
    )
    by_key = invoke("export", published.train[:8], str(tmp_path / "b"), "--root", str(published.root))
    assert by_key.exit_code == 0, by_key.output
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    # an evaluate artifact exports the model it scored, with its card
    by_evaluation = invoke("export", published.evaluate[:8], str(tmp_path / "c"), "--root", str(published.root))
    assert by_evaluation.exit_code == 0, by_evaluation.output
    assert (tmp_path / "c" / "README.md").read_text() == (tmp_path / "a" / "README.md").read_text()


def test_other_stages_and_bad_targets_are_clear_errors(tmp_path, published):
    base = invoke("export", published.base_model[:8], str(tmp_path / "x"), "--root", str(published.root))
    assert base.exit_code == 2 and "cannot export a base_model artifact" in base.output
    unknown = invoke("export", "nonsense", str(tmp_path / "x"), "--root", str(published.root))
    assert unknown.exit_code == 2 and "names no stage and no artifact key" in unknown.output
    corpus = invoke("export", published.corpus[:8], str(tmp_path / "dataset"), "--root", str(published.root))
    assert corpus.exit_code == 0 and (tmp_path / "dataset" / "README.md").is_file(), corpus.output  # a dataset
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    taken = invoke("export", "train", str(tmp_path / "full"), "--root", str(published.root))
    assert taken.exit_code == 2 and "not an empty folder" in taken.output


@pytest.mark.slow
def test_export_from_an_s3_root(tmp_path, published, s3_root, monkeypatch):  # noqa: F811 - fixture
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    remote = ArtifactStore(s3_root)
    for stage in ("corpus", "base_model", "train", "evaluate"):
        for manifest in published.store.list_manifests(stage):
            copy_artifact(published.store, remote, stage, manifest.key)
    copy_refs(published.store, remote)
    local = invoke("export", "train", str(tmp_path / "local"), "--root", str(published.root))
    result = invoke("export", "train", str(tmp_path / "s3"), "--root", s3_root)
    assert local.exit_code == 0 and result.exit_code == 0, result.output
    for name in ("model.safetensors", "README.md", "config_sentence_transformers.json", "modules.json"):
        assert (tmp_path / "s3" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name


class FakeHub:
    """The three hub endpoints `create_repo` + `upload_folder` call; every file is "regular", so
    its bytes arrive inline (base64) in the commit, where the test can read them."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, body: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hub.requests.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path == "/api/repos/create":
                    return self._reply({"url": f"{hub.url}/me/xl-encoder", "name": "me/xl-encoder"})
                if self.path == "/api/validate-yaml":  # the hub checks a README's front matter before the commit
                    try:
                        front_matter(json.loads(body)["content"])
                    except ValueError as exc:
                        return self._reply({"errors": [{"message": str(exc)}]}, 400)
                    return self._reply({"errors": [], "warnings": []})
                if "/preupload/" in self.path:
                    files = json.loads(body)["files"]
                    return self._reply(
                        {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
                    )
                if "/commit/" in self.path:
                    return self._reply(
                        {"commitUrl": f"{hub.url}/me/xl-encoder/commit/{'a' * 40}", "commitOid": "a" * 40, "pullRequestUrl": None}
                    )
                return self._reply({"error": "unexpected"}, 404)

            def do_GET(self) -> None:
                hub.requests.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, b""))
                self._reply({"error": "not found"}, 404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def committed_files(self) -> dict[str, bytes]:
        files = {}
        for method, path, _, body in self.requests:
            if method == "POST" and "/commit/" in path:
                for line in body.decode().splitlines():
                    item = json.loads(line)
                    if item["key"] == "file":
                        files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
        return files


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    hub = FakeHub()
    thread = threading.Thread(target=hub.server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    yield hub
    hub.server.shutdown()


def test_push_uploads_exactly_the_exported_folder_and_never_prints_the_token(tmp_path, published, fake_hub):
    result = invoke(
        "export", "train", str(tmp_path / "model"), "--push", "me/xl-encoder", "--private", "--root", str(published.root)
    )
    assert result.exit_code == 0, result.output
    assert f"pushed    {fake_hub.url}/me/xl-encoder/commit/" in result.output
    assert TOKEN not in result.output
    create = next(r for r in fake_hub.requests if r[1] == "/api/repos/create")
    assert json.loads(create[3]) == {"name": "xl-encoder", "organization": "me", "type": "model", "visibility": "private"}
    assert all(headers.get("authorization") == f"Bearer {TOKEN}" for _, _, headers, _ in fake_hub.requests)
    folder = tmp_path / "model"
    expected = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert fake_hub.committed_files() == expected
    assert b'SentenceTransformer("me/xl-encoder")' in expected["README.md"]
    validated = [json.loads(body)["content"] for _, path, _, body in fake_hub.requests if path == "/api/validate-yaml"]
    assert validated == [expected["README.md"].decode()]


def test_a_failed_push_is_one_line_without_the_token(tmp_path, published, fake_hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url + "/broken")  # every call 404s
    result = invoke("export", "train", str(tmp_path / "model"), "--push", "me/xl-encoder", "--root", str(published.root))
    assert result.exit_code == 1
    assert "me/xl-encoder" in result.output and "is kept" in result.output and TOKEN not in result.output
    assert (tmp_path / "model" / "README.md").exists()


def test_a_stage_name_with_refs_of_two_pipelines_is_refused_with_the_refs_listed(tmp_path):
    """Issue 36: with the demo and the smoke run in one store, `export train DIR` took the last one
    built without saying which; now it refuses as `artifacts head` does, and --pipeline picks."""
    from tasks.corpus import CORPUS_STAGE
    from tasks.corpus.config import CorpusConfig
    from tasks.stage import run_stage

    store = ArtifactStore(tmp_path / "artifacts")
    keys = {}
    for pipeline, lines in (("demo", ["a cat.", "a dog."]), ("smoke", ["a bird.", "a fish."])):
        files = {}
        for lang, prefix in (("eng_Latn", ""), ("fra_Latn", "le ")):
            path = tmp_path / f"{pipeline}.{lang}"
            path.write_text("\n".join(prefix + line for line in lines) + "\n", encoding="utf-8")
            files[lang] = str(path)
        config = CorpusConfig.model_validate(
            {"sources": [{"name": pipeline, "kind": "text", "files": files}], "dev_fraction": 0.0}
        )
        ref, _ = run_stage(store, CORPUS_STAGE, config, {}, pipeline=pipeline)
        keys[pipeline] = ref.key
    refused = invoke("export", "corpus", str(tmp_path / "out"), "--root", str(store.root_uri))
    assert refused.exit_code == 2, refused.output
    assert "2 pipelines have a corpus ref" in refused.output and "--pipeline" in refused.output
    assert f"demo/corpus -> {keys['demo'][:12]}" in refused.output and f"smoke/corpus -> {keys['smoke'][:12]}" in refused.output
    assert not (tmp_path / "out").exists()
    chosen = invoke("export", "corpus", str(tmp_path / "out"), "--root", str(store.root_uri), "--pipeline", "demo")
    assert chosen.exit_code == 0 and keys["demo"][:12] in chosen.output, chosen.output
