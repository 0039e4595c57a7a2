"""`export_dataset`: a corpus artifact as a hub dataset that `datasets` loads offline, its card,
and `push_dataset` against a local HTTP server that answers as the hub does (offline)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from storage import ArtifactStore, Manifest
from storage.refs import set_ref
from tasks.corpus.config import CorpusConfig
from tasks.corpus.stage import CORPUS_STAGE
from tasks.languages import hub_language
from tasks.publish import ExportError
from tasks.publish.dataset import export_dataset, push_dataset
from tasks.publish.dataset_card import LICENCES, known_datasets, size_category, source_dataset
from tasks.stage import run_stage

REPO = Path(__file__).resolve().parents[3]
LANGS = ["eng_Latn", "kaz_Cyrl", "fra_Latn"]
LINES = 40


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[ArtifactStore, Manifest]:
    """Two sources: a FLORES-named multi-way folder (40 lines, some French lines empty, so some
    groups lack French) and a plain English-Kazakh text pair of unknown licence."""
    base = tmp_path_factory.mktemp("publish")
    flores = base / "flores200-dev"
    flores.mkdir()
    texts = {
        "eng_Latn": [f"Sentence number {i} in English." for i in range(LINES)],
        "kaz_Cyrl": [f"Қазақша {i} сөйлем." for i in range(LINES)],
        "fra_Latn": ["" if i % 5 == 0 else f"Phrase numéro {i} en français." for i in range(LINES)],
    }
    for lang, lines in texts.items():
        (flores / f"{lang}.dev").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (base / "en.txt").write_text("".join(f"Private line {i}.\n" for i in range(10)), encoding="utf-8")
    (base / "kk.txt").write_text("".join(f"Жеке жол {i}.\n" for i in range(10)), encoding="utf-8")
    config = CorpusConfig.model_validate(
        {
            "sources": [
                {"name": "flores", "kind": "multiway_dir", "path": str(flores), "langs": LANGS},
                {"name": "mine", "kind": "text", "files": {"en": str(base / "en.txt"), "kk": str(base / "kk.txt")}},
            ],
            "filters": {"min_langs_per_group": 2},
            "dev_fraction": 0.25,
        }
    )
    store = ArtifactStore(base / "store")
    _, manifest = run_stage(store, CORPUS_STAGE, config, {})
    return store, manifest


def artifact_groups(store: ArtifactStore, manifest: Manifest) -> dict[str, dict[str, Any]]:
    """The artifact's rows as {group_id: {split, source, lang: text}}."""
    groups: dict[str, dict[str, Any]] = {}
    for row in store.read_table("corpus", manifest.key).to_pylist():
        group = groups.setdefault(row["group_id"], {"split": row["split"], "source": row["source"]})
        group[row["lang"]] = row["text"]
    return groups


def load(folder: Path, config: str) -> Any:
    import datasets

    return datasets.load_dataset(str(folder), config, cache_dir=str(folder.parent / f"hf-cache-{folder.name}"))


def front_matter(card: str) -> dict[str, Any]:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


def test_export_loads_with_datasets_offline_and_holds_every_row(
    corpus: tuple[ArtifactStore, Manifest], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import datasets
    import huggingface_hub

    # offline for this test only (both libraries read the environment once, at import)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    store, manifest = corpus
    result = export_dataset(store, "corpus", manifest.key, tmp_path / "dataset")
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "dataset").rglob("*") if p.is_file()} == {0o644}
    expected = artifact_groups(store, manifest)
    assert result.groups == len(expected) == manifest.metrics["groups"]
    # the pivot is the language with most rows (English and Kazakh tie at 50; names break the tie)
    assert [c.name for c in result.configs] == ["multiway", "eng_Latn-fra_Latn", "eng_Latn-kaz_Cyrl"]

    multiway = load(tmp_path / "dataset", "multiway")
    assert sorted(multiway) == ["train", "validation"]  # the corpus's dev split, as the hub names it
    # the card's dataset_info is whole: `datasets` reads it without "Ignoring part of dataset_info"
    # (its own stderr handler; the library's logger does not propagate)
    assert "dataset_info" not in capfd.readouterr().err
    seen = {}
    for split in multiway:
        # text columns first: sentence-transformers takes a dataset's leading columns as inputs
        assert multiway[split].column_names == ["eng_Latn", "fra_Latn", "kaz_Cyrl", "group_id", "source"]
        for row in multiway[split]:
            corpus_split = {"validation": "dev"}.get(split, split)
            seen[row["group_id"]] = {
                "split": corpus_split,
                "source": row["source"],
                **{lang: row[lang] for lang in LANGS if row[lang] is not None},
            }
    assert seen == expected  # every group, its split, its source and each language's text

    pairs = load(tmp_path / "dataset", "eng_Latn-fra_Latn")
    with_french = {g for g, row in expected.items() if "fra_Latn" in row}
    assert 0 < len(with_french) < len(expected)  # the empty French lines left groups without French
    assert {row["group_id"] for split in pairs for row in pairs[split]} == with_french
    assert pairs["train"].column_names == ["anchor", "positive", "group_id", "source"]
    by_group = {row["group_id"]: row for split in pairs for row in pairs[split]}
    assert all(
        expected[g]["eng_Latn"] == row["anchor"] and expected[g]["fra_Latn"] == row["positive"] for g, row in by_group.items()
    )
    # the card's dataset_info says the features and split sizes that `datasets` finds
    meta = front_matter(result.card)
    info = {c["config_name"]: c for c in meta["dataset_info"]}
    for name, loaded in (("multiway", multiway), ("eng_Latn-fra_Latn", pairs)):
        assert [f["name"] for f in info[name]["features"]] == loaded["train"].column_names
        assert all(
            f["dtype"] == "string" and loaded["train"].features[f["name"]].dtype == "string" for f in info[name]["features"]
        )
        assert {s["name"]: s["num_examples"] for s in info[name]["splits"]} == {split: loaded[split].num_rows for split in loaded}
        # every split entry has the three fields `datasets` requires, num_bytes its rows' Arrow size
        assert all(set(s) == {"name", "num_bytes", "num_examples"} and s["num_bytes"] > 0 for s in info[name]["splits"])
        assert info[name]["dataset_size"] == sum(s["num_bytes"] for s in info[name]["splits"])
        assert info[name]["download_size"] == sum(
            p.stat().st_size for p in (tmp_path / "dataset" / "data" / name).glob("*.parquet")
        )
    assert sum(c.rows["train"] for c in result.configs if c.name == "eng_Latn-kaz_Cyrl") == sum(
        1 for row in expected.values() if row["split"] == "train" and "kaz_Cyrl" in row
    )


def test_card_front_matter_is_what_the_hub_reads(corpus: tuple[ArtifactStore, Manifest], tmp_path: Path) -> None:
    from huggingface_hub import DatasetCard

    store, manifest = corpus
    result = export_dataset(store, "corpus", manifest.key, tmp_path / "dataset")
    card = (tmp_path / "dataset" / "README.md").read_text(encoding="utf-8")
    assert card == result.card
    meta = front_matter(card)
    assert meta["language"] == ["en", "fr", "kk"]
    assert meta["license"] == ["cc-by-sa-4.0", "unknown"]  # FLORES-200, and a source of unknown licence
    assert meta["task_categories"] == ["translation", "sentence-similarity"]
    assert meta["size_categories"] == ["n<1K"]
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert configs["multiway"]["default"] is True
    assert configs["eng_Latn-kaz_Cyrl"]["data_files"] == [
        {"split": "train", "path": "data/eng_Latn-kaz_Cyrl/train-*.parquet"},
        {"split": "validation", "path": "data/eng_Latn-kaz_Cyrl/validation-*.parquet"},
    ]
    parsed = DatasetCard(card).data  # huggingface_hub's own parser
    assert parsed.license == ["cc-by-sa-4.0", "unknown"] and parsed.task_categories == ["translation", "sentence-similarity"]
    # the prose: sources with their licences, row counts, filters with drop counts, the key
    assert "| flores | FLORES-200 | [CC-BY-SA 4.0](https://creativecommons.org/licenses/by-sa/4.0/) |" in card
    assert "| mine | text source | unknown: check it before publishing |" in card
    rows = manifest.metrics["rows_by_lang"]
    assert f"| fra_Latn | fr | {rows['fra_Latn']:,} |" in card
    assert f"| empty | {manifest.dropped['empty']:,} |" in card and "| min_langs_per_group | 2 |" in card
    assert manifest.key in card


def test_batches_split_inside_a_group_give_the_same_files(corpus: tuple[ArtifactStore, Manifest], tmp_path: Path) -> None:
    store, manifest = corpus
    whole = export_dataset(store, "corpus", manifest.key, tmp_path / "whole", batch_rows=100_000)
    small = export_dataset(store, "corpus", manifest.key, tmp_path / "small", batch_rows=7, rows_per_file=6)
    assert small.groups == whole.groups
    for config in whole.configs:
        for split, files in config.files.items():
            smaller = next(c for c in small.configs if c.name == config.name).files[split]
            assert len(smaller) > 1 and all(name.endswith(f"-of-{len(smaller):05d}.parquet") for name in smaller)
            a = pq.read_table(tmp_path / "whole" / files[0])
            b = pq.ParquetDataset([str(tmp_path / "small" / f) for f in smaller]).read()
            assert b.equals(a)


def test_refusals_name_what_is_wrong(corpus: tuple[ArtifactStore, Manifest], tmp_path: Path) -> None:
    store, manifest = corpus
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ExportError, match="full: exists and is not an empty folder"):
        export_dataset(store, "corpus", manifest.key, tmp_path / "full")
    with pytest.raises(ExportError, match="pivot 'deu_Latn' has no rows"):
        export_dataset(store, "corpus", manifest.key, tmp_path / "new", pivot="deu_Latn")
    assert not (tmp_path / "new").exists() and not (tmp_path / "new.partial").exists()
    # a partial export (an error half-way) leaves no folder behind
    with pytest.raises(ExportError):
        export_dataset(store, "corpus", manifest.key, tmp_path / "half", layout="pairs", pivot="xxx_Latn")
    assert not list(tmp_path.glob("half*"))


def test_licence_of_a_source_by_kind_name_or_location() -> None:
    assert source_dataset({"kind": "tatoeba", "name": "t"}) == "tatoeba"
    assert source_dataset({"kind": "cldr", "name": "phrases"}) == "cldr"
    assert source_dataset({"kind": "multiway_dir", "name": "dev"}, ['"/data/ntrex-128/"']) == "ntrex-128"
    assert source_dataset({"kind": "multiway_dir", "name": "flores200-dev"}) == "flores-200"
    assert source_dataset({"kind": "opus_moses", "name": "wiki"}, ['"https://opus.nlpl.eu/x.zip"']) is None
    assert source_dataset({"kind": "text", "name": "tatoeba-dev"}) == "tatoeba"  # a kind's data set, named
    known = known_datasets()
    assert known["tatoeba"][1].name == "CC-BY 2.0 FR" and known["cldr"][1].hub_id == "other" and "flores-200" in LICENCES
    assert hub_language("kaz_Cyrl") == "kk" and hub_language("ace_Latn") == "ace"
    assert size_category(999) == "n<1K" and size_category(1000) == "1K<n<10K" and size_category(2_000_000) == "1M<n<10M"


# ------------------------------------------------------------------ the hub, offline
class FakeHub:
    """A local HTTP server answering the hub endpoints `create_repo` and `upload_folder` call:
    it records every request and keeps the committed files. Its YAML check only requires the
    keys; the real hub's metadata schema and its LFS/xet upload of large files are not here."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.files: dict[str, bytes] = {}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hub.requests.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path == "/api/validate-yaml":
                    content = json.loads(body)["content"]
                    meta = yaml.safe_load(content.split("---\n", 2)[1]) if content.startswith("---\n") else None
                    missing = [
                        k
                        for k in ("configs", "language", "license", "task_categories", "size_categories")
                        if not isinstance(meta, dict) or k not in meta
                    ]
                    self.reply(
                        400 if missing else 200, {"errors": [{"message": f"missing {k}"} for k in missing], "warnings": []}
                    )
                elif self.path == "/api/repos/create":
                    payload = json.loads(body)
                    self.reply(200, {"url": f"{hub.url}/datasets/{payload['organization']}/{payload['name']}"})
                elif "/preupload/" in self.path:
                    files = json.loads(body)["files"]
                    self.reply(
                        200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
                    )
                elif "/commit/" in self.path:
                    for line in body.splitlines():
                        item = json.loads(line)
                        if item["key"] == "file":
                            hub.files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                    repo = self.path.split("/api/datasets/", 1)[1].split("/commit/", 1)[0]
                    self.reply(
                        200,
                        {
                            "commitUrl": f"{hub.url}/datasets/{repo}/commit/{'a' * 40}",
                            "commitOid": "a" * 40,
                            "pullRequestUrl": None,
                        },
                    )
                else:
                    self.reply(404, {"error": f"no {self.path} here"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def paths(self) -> list[str]:
        return [path for _, path, _, _ in self.requests]


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    server = FakeHub()
    yield server
    server.server.shutdown()


def test_push_creates_the_dataset_repo_and_commits_every_file(
    corpus: tuple[ArtifactStore, Manifest], tmp_path: Path, hub: FakeHub
) -> None:
    store, manifest = corpus
    result = export_dataset(store, "corpus", manifest.key, tmp_path / "dataset")
    url = push_dataset(result.folder, "someone/kk-corpus", token="hf_test_token", endpoint=hub.url, private=True)
    assert url == f"{hub.url}/datasets/someone/kk-corpus/commit/{'a' * 40}"
    assert hub.paths() == [
        "/api/repos/create",
        "/api/validate-yaml",
        "/api/datasets/someone/kk-corpus/preupload/main",
        "/api/datasets/someone/kk-corpus/commit/main",
    ]
    create = json.loads(hub.requests[0][3])
    assert create == {"name": "kk-corpus", "organization": "someone", "visibility": "private", "type": "dataset"}
    assert all(headers["authorization"] == "Bearer hf_test_token" for _, _, headers, _ in hub.requests)
    local = {p.relative_to(result.folder).as_posix(): p.read_bytes() for p in result.folder.rglob("*") if p.is_file()}
    assert hub.files == local  # the card and every Parquet file, byte for byte


def test_push_of_a_folder_without_a_card_is_refused(tmp_path: Path, hub: FakeHub) -> None:
    with pytest.raises(ExportError, match="no README.md"):
        push_dataset(tmp_path, "someone/x", token="t", endpoint=hub.url)
    assert hub.requests == []


@pytest.mark.slow
def test_cli_export_by_stage_name_and_push_through_hf_endpoint(
    corpus: tuple[ArtifactStore, Manifest], tmp_path: Path, hub: FakeHub
) -> None:
    store, manifest = corpus
    root = Path(store.root_uri.removeprefix("file://"))
    set_ref(store, "demo", "corpus", manifest.key)
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_ENDPOINT=hub.url, HF_TOKEN="hf_cli_token", HF_HUB_DISABLE_TELEMETRY="1")
    args = [
        sys.executable,
        "-m",
        "flows.cli",
        "export",
        "corpus",
        str(tmp_path / "out"),
        "--root",
        str(root),
        "--layout",
        "multiway",
        "--push",
        "someone/from-cli",
    ]
    run = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    assert f"corpus {manifest.key[:12]}: {manifest.metrics['groups']:,} groups" in run.stdout and "pushed: " in run.stdout
    assert sorted(hub.files) == [
        "README.md",
        "data/multiway/train-00000-of-00001.parquet",
        "data/multiway/validation-00000-of-00001.parquet",
    ]
    assert hub.requests[0][2]["authorization"] == "Bearer hf_cli_token"
    # a key prefix works too; a name that is neither a stage nor a key is a usage error naming the stages
    again = subprocess.run(
        [*args[:4], manifest.key[:8], str(tmp_path / "out2"), "--root", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert again.returncode == 0, again.stderr
    bad = subprocess.run(
        [*args[:4], "nothing", str(tmp_path / "out3"), "--root", str(root)], env=env, capture_output=True, text=True, timeout=180
    )
    assert bad.returncode == 2 and "'nothing' names no stage and no artifact key" in bad.stderr and "stages: corpus" in bad.stderr
