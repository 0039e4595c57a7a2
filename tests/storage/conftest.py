"""Fixtures for the artifact store tests: a local root and an S3 root served by moto.

The S3 tests talk to moto's real HTTP server on 127.0.0.1 (as s3fs's own test suite
does); the store is never told where S3 is: it must find the endpoint, like the
credentials, in the standard AWS environment variables.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import ArtifactStore, Manifest, ShardRecord, artifact_key, columns_of, utc_now

BUCKET = "xlembed-test"
DUMMY_KEY_ID = "testing-key"
DUMMY_SECRET = "testing-secret-7f3a9c"  # distinctive, so a leak is easy to spot

# Anything in the developer's environment that could steer boto elsewhere.
_AWS_VARS_TO_CLEAR = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
)

SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("n", pa.int64()),
    ]
)


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    key_id: str
    secret: str

    def client(self) -> Any:
        """An independent boto3 client (explicit endpoint) to look behind the store's back."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    import boto3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    endpoint = f"http://127.0.0.1:{port}"
    aws_home = tmp_path_factory.mktemp("aws-home")
    with pytest.MonkeyPatch.context() as mp:
        for var in _AWS_VARS_TO_CLEAR:
            mp.delenv(var, raising=False)
        mp.setenv("AWS_ACCESS_KEY_ID", DUMMY_KEY_ID)
        mp.setenv("AWS_SECRET_ACCESS_KEY", DUMMY_SECRET)
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        mp.setenv("AWS_ENDPOINT_URL", endpoint)
        # no user config or credentials file may interfere (they do not exist)
        mp.setenv("AWS_CONFIG_FILE", str(aws_home / "config"))
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(aws_home / "credentials"))
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        s3fs.S3FileSystem.clear_instance_cache()
        boto3.client("s3").create_bucket(Bucket=BUCKET)  # endpoint from the environment, too
        try:
            yield S3Server(endpoint=endpoint, bucket=BUCKET, key_id=DUMMY_KEY_ID, secret=DUMMY_SECRET)
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            server.stop()


@pytest.fixture
def s3_root(s3_server: S3Server) -> Iterator[str]:
    """A fresh, empty `s3://bucket/<uuid>` root, with no cached s3fs instance."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    yield f"s3://{s3_server.bucket}/{uuid.uuid4().hex}"
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def local_root(tmp_path: Path) -> str:
    return str(tmp_path / "store")


@pytest.fixture
def scratch_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The store stages S3 uploads in the temp dir: keep that inside tmp_path."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def root(backend: str, request: pytest.FixtureRequest, scratch_tmp: Path) -> str:
    return request.getfixturevalue("local_root" if backend == "local" else "s3_root")


@pytest.fixture
def store(root: str) -> ArtifactStore:
    return ArtifactStore(root)


# ------------------------------------------------------------------ builders
def make_table(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": [f"id-{i:05d}" for i in ids],
            "text": [f"sentence {i} ünïcödé" for i in ids],
            "n": [i * 10 for i in ids],
        },
        schema=SCHEMA,
    )


class Kit:
    """Builds artifacts through the store's own API, as `tasks.stage` does."""

    schema = SCHEMA
    table = staticmethod(make_table)

    def key(self, stage: str, config: dict[str, Any], input_keys: dict[str, str] | None = None, code_version: str = "1") -> str:
        return artifact_key(stage, code_version, config, input_keys or {}, {})

    def write(
        self,
        store: ArtifactStore,
        stage: str,
        key: str,
        rows: int = 10,
        shards: Sequence[str] = ("s0",),
        max_rows_per_file: int = 4,
    ) -> list[ShardRecord]:
        records, start = [], 0
        per_shard = [rows // len(shards) + (1 if i < rows % len(shards) else 0) for i in range(len(shards))]
        for shard_id, count in zip(shards, per_shard):
            files = store.write_shard_files(
                stage, key, shard_id, [make_table(start, count)], SCHEMA, max_rows_per_file=max_rows_per_file
            )
            start += count
            record = ShardRecord(shard_id=shard_id, files=files, rows_in=count, rows_out=sum(f.rows for f in files))
            records.append(store.commit_shard(stage, key, record))
        return records

    def manifest(
        self,
        stage: str,
        key: str,
        config: dict[str, Any],
        records: list[ShardRecord],
        *,
        created_at: str | None = None,
        input_keys: dict[str, str] | None = None,
        dropped: dict[str, int] | None = None,
        code_version: str = "1",
    ) -> Manifest:
        dropped = dropped or {}
        rows_out = sum(r.rows_out for r in records)
        return Manifest(
            stage=stage,
            key=key,
            code_version=code_version,
            config=config,
            input_keys=input_keys or {},
            files=[f for r in records for f in r.files],
            shards=[r.shard_id for r in records],
            columns=columns_of(SCHEMA),
            created_at=created_at or utc_now(),
            wall_time_s=0.25,
            rows_in=rows_out + sum(dropped.values()),
            rows_out=rows_out,
            dropped=dropped,
            package_version="0.1.0",
        )

    def build(
        self,
        store: ArtifactStore,
        stage: str = "embed",
        config: dict[str, Any] | None = None,
        *,
        rows: int = 10,
        shards: Sequence[str] = ("s0",),
        max_rows_per_file: int = 4,
        commit: bool = True,
        **manifest_kwargs: Any,
    ) -> Manifest:
        config = config if config is not None else {"model": "labse"}
        key = self.key(stage, config, manifest_kwargs.get("input_keys"), manifest_kwargs.get("code_version", "1"))
        records = self.write(store, stage, key, rows, shards, max_rows_per_file)
        manifest = self.manifest(stage, key, config, records, **manifest_kwargs)
        return store.commit(manifest) if commit else manifest


@pytest.fixture
def kit() -> Kit:
    return Kit()


def all_files(store: ArtifactStore) -> dict[str, bytes]:
    """Every object under the store root, by path relative to the root."""
    store.backend.fs.invalidate_cache()
    base = store.root_path.rstrip("/")
    try:
        paths = store.backend.fs.find(base)
    except FileNotFoundError:
        return {}
    return {p[len(base) + 1 :]: store.backend.fs.cat_file(p) for p in paths}


@pytest.fixture
def read_all() -> Any:
    return all_files
