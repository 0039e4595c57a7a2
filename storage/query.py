"""SQL over artifacts, lazily: DuckDB over the Parquet files of committed artifacts, and nothing else.

A table name is a stage (`corpus`: the artifact a ref points to; the caller resolves it) or a
stage and a key or unique key prefix, `corpus@3f2a9c`. `@` cannot appear in an SQL identifier,
so before the SQL is parsed every `STAGE@KEY` outside a single-quoted string literal is
rewritten to `STAGE_KEY` (a `-` in the stage name becomes `_`; double quotes around it are
dropped), and the artifact is registered under that name: `SELECT count(*) FROM corpus@3f2a`
runs as `SELECT count(*) FROM corpus_3f2a`.

The query reads the store and nothing else. The store's artifacts are handed to DuckDB as
Arrow datasets, which the store's own filesystem (local or s3fs) reads; the connection itself
is opened with DuckDB's `enable_external_access = false` and its configuration locked, so SQL
cannot read a file, a URL or an object (`read_csv('/etc/passwd')`, `FROM 's3://…'`), attach a
database, load an extension, scan a Python variable, or switch that back on. This is the
engine's own switch, not a list of forbidden function names.

Nothing is read until the result is fetched: DuckDB pushes column selections and filters
into the Arrow scans, so a large artifact is never loaded whole. File sizes are checked against
the manifest before a query runs; full sha256 checks are `xlembed artifacts verify`'s job (they
would read everything).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from storage.store import ArtifactStore, CorruptArtifact, StoreError

# STAGE@KEY, optionally in double quotes; the stage as storage.keys.NAME_PATTERN allows it
TABLE_AT = re.compile(r'"?\b([a-z][a-z0-9_-]{0,63})@([0-9a-f]{1,64})\b"?')
STRING_LITERAL = re.compile(r"('(?:[^']|'')*')")
_MISSING_TABLE = re.compile(r"Table with name (.+?) does not exist")
_OUTSIDE = re.compile(r'Cannot access (?:file|directory) "([^"]*)"')
_LOCKED = re.compile(r'Cannot change configuration option "([^"]*)"')
MAX_TABLES = 32

# DuckDB settings of the query connection: no file, URL or object outside the registered
# tables, no extension loaded behind the user's back, no Python variable scanned by name, and
# none of it can be switched back on by the query (`lock_configuration`).
SANDBOX = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "python_enable_replacements": False,
    "lock_configuration": True,
}


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


def _first_line(exc: BaseException) -> str:
    """The first line of an engine error, without DuckDB's suggestions and context lines."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def scan_artifact(store: ArtifactStore, stage: str, key: str) -> Any:
    """An Arrow dataset over the artifact's data files (nothing is read yet), read through the
    store's filesystem. Each file's size is checked against the manifest first; an artifact of
    attached files only is refused."""
    import pyarrow.dataset as ds

    manifest = store.manifest(stage, key)
    entries = manifest.table_files
    if not entries:
        raise QueryError(f"{stage}/{key[:12]} has no table (it holds attached files only)")
    base = store.artifact_dir(stage, key)
    sizes = store.file_sizes(stage, key, [entry.path for entry in entries])
    for entry in entries:
        size = sizes.get(entry.path)
        if size != entry.bytes:
            what = "is missing" if size is None else f"has {size} bytes, its manifest says {entry.bytes}"
            raise CorruptArtifact(f"{stage}/{key}/{entry.path} {what}: not read (see `xlembed artifacts verify`)")
    paths = [f"{base}/{e.path}" for e in entries]
    return ds.dataset(paths, format="parquet", filesystem=store.backend.arrow_filesystem)


@dataclass
class QueryResult:
    """A planned query: its relation (fetch with `.limit(n).pl()` or `.to_arrow_reader()`) and
    the sandboxed connection it lives in, kept open as long as the result is."""

    connection: Any
    relation: Any


def sandboxed_connection() -> Any:
    import duckdb

    return duckdb.connect(":memory:", config=dict(SANDBOX))


def sql_query(
    sql: str, table: Callable[[str], Any | None], versioned: Callable[[VersionedTable], Any], available: Callable[[], list[str]]
) -> QueryResult:
    """Plan `sql` in a sandboxed DuckDB connection and return the (lazy) result, its columns bound.

    Each `STAGE@KEY` is rewritten and registered through `versioned`; every other table the query
    names is registered through `table(name)` (None: no such table). Errors become one
    QueryError line: an unknown table names the available ones (`available()`), a query that
    reaches outside the store names what it tried."""
    import duckdb

    rewritten, mentions = rewrite_table_names(sql)
    check_one_select(rewritten)  # before any connection exists: a refused statement never runs in part
    connection = sandboxed_connection()
    registered: set[str] = set()
    for mention in mentions:
        connection.register(mention.name, versioned(mention))
        registered.add(mention.name)
    try:
        named = duckdb.get_table_names(rewritten, qualified=False)
    except duckdb.Error:
        named = set()  # DuckDB could not list them (a join on unknown tables): found one by one below
    for name in sorted(named - registered)[:MAX_TABLES]:
        frame = table(name)
        if frame is not None:
            connection.register(name, frame)
            registered.add(name)
    for _ in range(MAX_TABLES):
        try:
            relation = connection.sql(rewritten)
            break
        except duckdb.CatalogException as exc:
            missing = _MISSING_TABLE.search(str(exc))
            if missing is None:
                raise QueryError(f"SQL error: {_first_line(exc)}") from None
            name = missing.group(1)
            frame = None if name in registered else table(name)
            if frame is None:
                names = ", ".join(available()) or "none"
                raise QueryError(f"unknown table {name!r}; available: {names} (or STAGE@KEY for any version)") from None
            connection.register(name, frame)
            registered.add(name)
        except duckdb.Error as exc:
            raise refusal(exc) or QueryError(f"SQL error: {_first_line(exc)}") from None
    else:
        raise QueryError(f"the query names more than {MAX_TABLES} tables")
    if relation is None:
        raise QueryError("SQL error: the statement returns no rows; artifacts query runs a SELECT over the store's tables")
    return QueryResult(connection, relation)


def check_one_select(sql: str) -> None:
    """Refuse, before anything executes, whatever is not exactly one SELECT (a `FROM t`, a `WITH`
    or a `UNION` included): DuckDB's own parser says what each statement is, so COPY, EXPORT,
    CREATE, ATTACH, SET, PRAGMA and a second statement after a SELECT are refused unrun."""
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL error: {_first_line(exc)}") from None
    if len(statements) != 1:
        raise QueryError(
            f"query refused: {len(statements)} statements; artifacts query runs one SELECT over the store's tables (nothing was run)"
        )
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryError(
            f"query refused: {kind.name} statement; artifacts query runs one SELECT over the store's tables (nothing was run)"
        )


def refusal(exc: BaseException) -> QueryError | None:
    """The one-line refusal of a query that tried to reach outside the store (a file, a URL, an
    object) or to change the sandbox's settings; None for any other error."""
    text = str(exc)
    outside = _OUTSIDE.search(text)
    if outside is not None:
        return QueryError(
            f"query refused: it tries to read {outside.group(1)!r}, outside the store; artifacts query reads only the store's artifacts (STAGE or STAGE@KEY)"
        )
    locked = _LOCKED.search(text)
    if locked is not None:
        return QueryError(
            f"query refused: it tries to change the setting {locked.group(1)!r}; artifacts query runs with the store's tables only"
        )
    return None


def collect_error(exc: BaseException) -> QueryError:
    """A failure while reading or computing the result, as one line."""
    return refusal(exc) or QueryError(f"query failed: {_first_line(exc)}")
