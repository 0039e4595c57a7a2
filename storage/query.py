"""SQL over artifacts, lazily: polars' SQLContext over the Parquet files of committed artifacts.

A table name is a stage (`corpus`: the artifact a ref points to; the caller resolves it) or a
stage and a key or unique key prefix, `corpus@3f2a9c`. `@` cannot appear in an SQL identifier,
so before the SQL is parsed every `STAGE@KEY` outside a single-quoted string literal is
rewritten to `STAGE_KEY` (a `-` in the stage name becomes `_`; double quotes around it are
dropped), and the artifact is registered under that name: `SELECT count(*) FROM corpus@3f2a`
runs as `SELECT count(*) FROM corpus_3f2a`.

Nothing is read until the result is collected or sunk: polars scans the data files directly
(local paths, or `s3://` URLs with the store's endpoint and credentials), so a large artifact
is never loaded whole. File sizes are checked against the manifest before a query runs; full
sha256 checks are `xlembed artifacts verify`'s job (they would read everything).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from storage.store import ArtifactStore, CorruptArtifact, StoreError

# STAGE@KEY, optionally in double quotes; the stage as storage.keys.NAME_PATTERN allows it
TABLE_AT = re.compile(r'"?\b([a-z][a-z0-9_-]{0,63})@([0-9a-f]{1,64})\b"?')
STRING_LITERAL = re.compile(r"('(?:[^']|'')*')")
_MISSING_RELATION = re.compile(r"relation '([^']+)' was not found")
MAX_TABLES = 32


class QueryError(StoreError):
    """An SQL query that cannot run; the message is one line meant for the user."""


@dataclass(frozen=True)
class VersionedTable:
    """A `STAGE@KEY` mention: the name it was rewritten to, the stage, the key (or prefix) written."""

    name: str
    stage: str
    key: str


def registered_name(stage: str, key: str) -> str:
    return f"{stage.replace('-', '_')}_{key}"


def rewrite_table_names(sql: str) -> tuple[str, list[VersionedTable]]:
    """Replace each `STAGE@KEY` outside string literals by its registered name."""
    found: dict[str, VersionedTable] = {}

    def replace(match: re.Match[str]) -> str:
        stage, key = match.group(1), match.group(2)
        name = registered_name(stage, key)
        found.setdefault(name, VersionedTable(name, stage, key))
        return name

    parts = STRING_LITERAL.split(sql)  # odd indexes are the literals themselves
    rewritten = "".join(part if i % 2 else TABLE_AT.sub(replace, part) for i, part in enumerate(parts))
    return rewritten, list(found.values())


def _plain_error(exc: Exception) -> str:
    """The first line of a polars error, without polars' plan dump."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text


def s3_storage_options(store: ArtifactStore) -> dict[str, str]:
    """Options for polars' own S3 reader that reach the bucket the store's s3fs reaches: the
    endpoint s3fs was given (or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL / the profile's
    endpoint_url) and the credentials botocore's usual chain finds (environment, profile,
    config files, instance role). The values are secrets: never print or log them."""
    import botocore.session

    fs: Any = store.fs
    profile = (getattr(fs, "storage_options", None) or {}).get("profile") or os.environ.get("AWS_PROFILE") or None
    session = botocore.session.Session(profile=profile)
    options: dict[str, str] = {}
    key, secret, token = getattr(fs, "key", None), getattr(fs, "secret", None), getattr(fs, "token", None)
    if not (key and secret):
        credentials = session.get_credentials()
        if credentials is not None:
            frozen = credentials.get_frozen_credentials()
            key, secret, token = frozen.access_key, frozen.secret_key, frozen.token
    if key and secret:
        options.update(aws_access_key_id=key, aws_secret_access_key=secret)
        if token:
            options["aws_session_token"] = token
    elif getattr(fs, "anon", False):
        options["aws_skip_signature"] = "true"
    region = (getattr(fs, "client_kwargs", None) or {}).get("region_name") or session.get_config_variable("region")
    if region:
        options["aws_region"] = region
    endpoint = (
        getattr(fs, "endpoint_url", None)
        or (getattr(fs, "client_kwargs", None) or {}).get("endpoint_url")
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or _profile_endpoint(session)
    )
    if endpoint:
        options["aws_endpoint_url"] = endpoint
        if endpoint.startswith("http://"):
            options["aws_allow_http"] = "true"
        # moto, MinIO and most S3-compatible servers want path-style URLs
        options["aws_virtual_hosted_style_request"] = "false"
    return options


def _profile_endpoint(session: Any) -> str | None:
    try:
        return session.get_config_variable("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL")
    except Exception:  # noqa: BLE001 - an older botocore without the variable
        return os.environ.get("AWS_ENDPOINT_URL")


def scan_artifact(store: ArtifactStore, stage: str, key: str, storage_options: dict[str, str] | None = None) -> Any:
    """A polars LazyFrame over the artifact's data files (nothing is read yet). Each file's size
    is checked against the manifest first; an artifact of attached files only is refused."""
    import polars as pl

    manifest = store.manifest(stage, key)
    entries = manifest.table_files
    if not entries:
        raise QueryError(f"{stage}/{key[:12]} has no table (it holds attached files only)")
    base = store.artifact_dir(stage, key)
    folder = f"{base}/data"
    store.fs.invalidate_cache(folder)
    try:
        listed = {info["name"].rstrip("/").rsplit("/", 1)[-1]: info.get("size") for info in store.fs.ls(folder, detail=True)}
    except FileNotFoundError:
        listed = {}
    for entry in entries:
        size = listed.get(entry.path.rsplit("/", 1)[-1])
        if size != entry.bytes:
            what = "is missing" if size is None else f"has {size} bytes, its manifest says {entry.bytes}"
            raise CorruptArtifact(f"{stage}/{key}/{entry.path} {what}: not read (see `xlembed artifacts verify`)")
    if store.is_local:
        return pl.scan_parquet([f"{base}/{e.path}" for e in entries])
    uris = [f"{store.uri(stage, key)}/{e.path}" for e in entries]
    options = storage_options if storage_options is not None else s3_storage_options(store)
    return pl.scan_parquet(uris, storage_options=options)


def sql_query(sql: str, table: Callable[[str], Any | None], versioned: Callable[[VersionedTable], Any], available: Callable[[], list[str]]) -> Any:
    """Plan `sql` in a polars SQLContext and return the (lazy) result, its schema resolved.

    Each `STAGE@KEY` is rewritten and registered through `versioned`; other names are registered
    when polars asks for them, through `table(name)` (None: no such table). Errors become one
    QueryError line: an unknown table names the available ones (`available()`)."""
    import polars as pl

    rewritten, mentions = rewrite_table_names(sql)
    context = pl.SQLContext()
    for mention in mentions:
        context.register(mention.name, versioned(mention))
    for _ in range(MAX_TABLES):
        try:
            result = context.execute(rewritten, eager=False)
            result.collect_schema()  # resolves tables and columns; reads no more than Parquet footers
            return result
        except pl.exceptions.SQLInterfaceError as exc:
            missing = _MISSING_RELATION.search(str(exc))
            if missing is None:
                raise QueryError(f"SQL error: {_plain_error(exc)}") from None
            name = missing.group(1)
            if name in context.tables():  # registered, yet not found: do not loop
                raise QueryError(f"SQL error: {_plain_error(exc)}") from None
            frame = table(name)
            if frame is None:
                names = ", ".join(available()) or "none"
                raise QueryError(f"unknown table {name!r}; available: {names} (or STAGE@KEY for any version)") from None
            context.register(name, frame)
        except pl.exceptions.PolarsError as exc:
            raise QueryError(f"SQL error: {_plain_error(exc)}") from None
    raise QueryError(f"the query names more than {MAX_TABLES} tables")


def collect_error(exc: Exception, secrets: dict[str, str] | None = None) -> QueryError:
    """A failure while reading or computing the result, as one line, secrets masked."""
    text = _plain_error(exc)
    for name, value in (secrets or {}).items():
        if value and ("secret" in name or "token" in name or "key_id" in name):
            text = text.replace(value, "***")
    return QueryError(f"query failed: {text}")
