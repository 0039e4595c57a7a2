"""Safe loading and no leaks: no pickle anywhere (code or artifacts), trust_remote_code only
from explicit config, artifact paths that cannot leave the store, and AWS credentials never
written to manifests, Prefect artifacts or logs."""

from __future__ import annotations

import ast
import posixpath
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from storage import FileEntry, InvalidNameError
from storage.keys import check_key, check_name
from storage.refs import read_ref
from tests.reliability.conftest import REPO

PRODUCTION = ("flows", "tasks", "storage", "benchmarks", "scripts")
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}
PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")


def python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def unsafe_loading(path: Path) -> list[str]:
    """Pickle imports/loads, torch.load without weights_only=True, np.load(allow_pickle=True),
    read_pickle, and trust_remote_code=True written as a literal."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] in PICKLE_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PICKLE_MODULES:
            found.append(f"{where}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            literal = {k: v.value for k, v in keywords.items() if isinstance(v, ast.Constant)}
            if name.endswith("torch.load") or name == "load" and False:
                if literal.get("weights_only") is not True:
                    found.append(f"{where}: torch.load without weights_only=True")
            if name.split(".")[-1] in ("load", "loads") and name.split(".")[0] in PICKLE_MODULES:
                found.append(f"{where}: {name}")
            if name.endswith("read_pickle"):
                found.append(f"{where}: {name}")
            if name.split(".")[-1] == "load" and name.split(".")[0] in ("np", "numpy") and literal.get("allow_pickle") is True:
                found.append(f"{where}: {name}(allow_pickle=True)")
            if literal.get("trust_remote_code") is True:
                found.append(f"{where}: trust_remote_code=True")
            value = keywords.get("trust_remote_code")
            if value is not None and not isinstance(value, ast.Constant) and not _dotted(value).endswith("trust_remote_code"):
                found.append(f"{where}: trust_remote_code from {ast.unparse(value)} (not a config field)")
    return found


@pytest.mark.slow
def test_no_pickle_or_unsafe_loading_in_the_code(record) -> None:
    files = python_files(*PRODUCTION)
    assert len(files) > 20
    problems = [p for f in files for p in unsafe_loading(f)]
    assert problems == [], "\n".join(problems)
    record(
        "security",
        f"code scan: pickle, torch.load without weights_only=True, np.load(allow_pickle), trust_remote_code=True ({len(files)} files)",
        "none found",
        f"folders {', '.join(PRODUCTION)}",
    )


def test_the_scanner_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = REPO / "tests" / "reliability" / f".scan-sample-{uuid.uuid4().hex}.py"
    sample.write_text(
        "import pickle\nimport torch\nfrom transformers import AutoModel\n"
        "pickle.loads(b'')\ntorch.load('x')\ntorch.load('x', weights_only=True)\n"
        "AutoModel.from_pretrained('m', trust_remote_code=True)\nAutoModel.from_pretrained('m', trust_remote_code=flag)\n"
        "AutoModel.from_pretrained('m', trust_remote_code=spec.trust_remote_code)\n",
        encoding="utf-8",
    )
    try:
        found = unsafe_loading(sample)
    finally:
        sample.unlink()
    kinds = [line.split(": ", 1)[1] for line in found]
    assert kinds == [
        "import pickle",
        "pickle.loads",
        "torch.load without weights_only=True",
        "trust_remote_code=True",
        "trust_remote_code from flag (not a config field)",
    ]


def test_trust_remote_code_is_off_unless_configured() -> None:
    from tasks.encoders import EncoderSpec

    assert EncoderSpec("some/model").trust_remote_code is False
    with pytest.raises(ValueError, match="trust_remote_code"):
        EncoderSpec("some/model", trust_remote_code="yes")  # type: ignore[arg-type]


@pytest.mark.slow
def test_artifacts_hold_no_pickles(tmp_path: Path, model_cache: Path, record) -> None:
    from tests.reliability.driver import run as run_spec
    from tests.reliability.scenarios import scenario

    run_spec(scenario("evaluate").spec(str(tmp_path / "root"), tmp_path / "data", model_cache))
    files = [p for p in (tmp_path / "root").rglob("*") if p.is_file()]
    suffixes = {p.suffix for p in files}
    assert not suffixes & {".bin", ".pt", ".pth", ".pkl", ".pickle", ".joblib", ".npy", ".npz"}, suffixes
    for path in files:
        head = path.read_bytes()[:4]
        assert not head.startswith(PICKLE_MAGIC), f"{path} looks like a pickle"
        assert head != b"PK\x03\x04" or path.suffix not in ("", ".bin"), f"{path} looks like a torch zip checkpoint"
    assert any(p.suffix == ".safetensors" for p in files) and any(p.suffix == ".parquet" for p in files)
    record(
        "security",
        "artifacts of corpus, base_model and evaluate scanned for pickles",
        "none found",
        f"{len(files)} files: {', '.join(sorted(s or '(none)' for s in suffixes))}",
    )


# ------------------------------------------------------------------ key and path validation
segments = st.sampled_from(["..", ".", "", "a", "data", "files", "x.parquet", "/", "\\", "C:", "~", "%2e%2e", "..\\..", "\x00"])


@pytest.mark.slow
@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(segments, min_size=1, max_size=6).map("/".join))
def test_manifest_file_paths_never_leave_the_artifact(path: str) -> None:
    try:
        FileEntry(path=path, bytes=0, sha256="0" * 64)
    except ValidationError:
        return
    base = "/root/stage/key"
    resolved = posixpath.normpath(posixpath.join(base, path))
    assert resolved.startswith(base + "/"), f"{path!r} resolves to {resolved}"


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(max_size=70))
def test_names_and_keys_are_single_safe_path_components(text: str) -> None:
    for check in (check_name, check_key):
        try:
            check(text)
        except InvalidNameError:
            continue
        assert "/" not in text and "\\" not in text and text not in (".", "..") and not text.startswith(".") and "\n" not in text


def test_store_paths_refuse_traversal(tmp_path: Path, record) -> None:
    from storage import ArtifactStore

    store = ArtifactStore(tmp_path / "root")
    for stage, key in (("../etc", "a" * 64), ("corpus", "../../" + "a" * 58), ("refs", "a" * 64), ("/abs", "a" * 64)):
        with pytest.raises(InvalidNameError):
            store.artifact_dir(stage, key)
    with pytest.raises(InvalidNameError):
        read_ref(store, "../x", "corpus")
    record(
        "security",
        "artifact keys, stage, shard and pipeline names, manifest file paths (traversal, absolute, backslash, drive)",
        "refused",
        "property tests: any accepted manifest path resolves inside its artifact; names and keys are single path components",
    )


# ------------------------------------------------------------------ credentials
@pytest.mark.slow
def test_credentials_never_reach_manifests_prefect_or_logs(s3_server, tmp_path: Path, long_faults: bool, record) -> None:
    """`xlembed run` against moto with credentials in the environment, then every byte it wrote
    (bucket objects, the Prefect home with its database of logs and artifacts, the temp dir,
    stdout/stderr) is searched for the key id and the secret. A failing run too."""
    from tests.flows.toy_pipeline import subprocess_env, write_corpus_text

    key_id, secret = f"AKIARELIABILITY{uuid.uuid4().hex[:8].upper()}", f"s3cr3t-{uuid.uuid4().hex}"
    prefix = uuid.uuid4().hex
    text = write_corpus_text(tmp_path / "data")
    config = tmp_path / "creds.toml"
    config.write_text(
        f'[pipeline]\nname = "creds"\nroot = "s3://{s3_server.bucket}/{prefix}"\nmax_workers = 1\n'
        f'[corpus]\nseed = 3\n[[corpus.sources]]\nname = "pairs"\nkind = "text"\nfiles = {{ en = "{text["en"]}", kk = "{text["kk"]}" }}\n'
        f"[lengths]\nshards = 2\n[histogram]\nbucket = 10\n",
        encoding="utf-8",
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = subprocess_env(
        tmp_path,
        TMPDIR=str(scratch),
        AWS_ACCESS_KEY_ID=key_id,
        AWS_SECRET_ACCESS_KEY=secret,
        PREFECT_LOGGING_LEVEL="DEBUG",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
    )
    home = Path(env["PREFECT_HOME"])
    command = [sys.executable, "-m", "flows.cli", "run", str(config)]
    ok = subprocess.run(command, env=env, capture_output=True, text=True, timeout=400)
    assert ok.returncode == 0, ok.stderr[-3000:]
    bad_config = tmp_path / "creds-bad.toml"
    short = tmp_path / "short.kk"  # a run that fails inside the stage, on S3, with the credentials in its environment
    short.write_text("one line\n", encoding="utf-8")
    bad_config.write_text(
        config.read_text().replace(text["kk"].as_posix(), short.as_posix()).replace("seed = 3", "seed = 4"), encoding="utf-8"
    )
    if long_faults:  # a second Prefect start (~30 s): the failing run is in the long variant
        failed = subprocess.run(
            [sys.executable, "-m", "flows.cli", "run", str(bad_config)], env=env, capture_output=True, text=True, timeout=400
        )
        assert failed.returncode != 0 and "line counts" in failed.stderr + failed.stdout, failed.stderr[-2000:]
    else:
        failed = subprocess.CompletedProcess([], 0, "", "")
    client = s3_server.client()
    objects = client.list_objects_v2(Bucket=s3_server.bucket, Prefix=prefix).get("Contents", [])
    assert any(o["Key"].endswith("manifest.json") for o in objects)
    blobs = {
        f"s3://{s3_server.bucket}/{o['Key']}": client.get_object(Bucket=s3_server.bucket, Key=o["Key"])["Body"].read()
        for o in objects
    }
    for folder in (home, scratch, tmp_path / "data"):
        blobs.update({str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file()})
    blobs.update(
        {
            "stdout": ok.stdout.encode(),
            "stderr": ok.stderr.encode(),
            "failed stdout": failed.stdout.encode(),
            "failed stderr": failed.stderr.encode(),
        }
    )
    assert any(name.endswith(".db") for name in blobs), "the Prefect database (logs, artifacts) was not found"
    for needle in (secret, key_id):
        leaks = [name for name, data in blobs.items() if needle.encode() in data]
        assert leaks == [], f"credential found in {leaks}"
    runs = "one run ok and one failing in the stage" if long_faults else "one run"
    record(
        "security",
        f"AWS key id and secret in the environment of `xlembed run` on S3 (moto), {runs}",
        "never written",
        f"searched {len(blobs)} files: {len(objects)} bucket objects, the Prefect home (database of logs and artifacts), temp files, stdout/stderr",
    )
