"""`xlembed artifacts ...`: the command group, and the commands that look into the artifact store
(ls, show, head, lineage, query, index, diff). Copying between stores and keeping one in order
(pull, push, verify, gc, refs, rollback) live in `flows.cli.artifacts_admin`."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from flows.cli.common import (
    MODE,
    JsonOpt,
    QuietOpt,
    StoreRootOpt,
    VerboseOpt,
    _age,
    _known_stage,
    _load,
    _report_damaged_refs,
    _resolve,
    _size,
    _store,
    artifacts_app,
    err,
    fail,
    out,
    output_mode,
    print_json,
    refuse_inside_store,
)
from flows.plan import config_changes
from flows.store_index import INDEX_FILE, build_index, write_index
from flows.store_index import REPORTS_DIR as SWEEPS_DIR
from storage import StoreError
from storage.keys import KEY_SCHEME, KEY_SCHEMES
from storage.lineage import flatten, lineage, node_record
from storage.query import QueryError, collect_error, scan_artifact, sql_query
from storage.refs import list_refs
from tasks.rejects import REJECTS_DIR
from tasks.stage_config import keyed_config

# the most rows a terminal command prints: beyond it polars' row counts overflow (a traceback);
# --output FILE writes more
MAX_ROWS = 2**31 - 1


@artifacts_app.command("ls")
def artifacts_ls(
    stage: Annotated[Optional[str], typer.Argument(help="only this stage")] = None, root: StoreRootOpt = "artifacts",
    verbose: VerboseOpt = False, quiet: QuietOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """List committed artifacts with rows, size, age and the refs pointing at them (-q: STAGE KEY lines)."""
    output_mode(verbose, quiet, as_json)
    store = _store(root)
    refs: dict[tuple[str, str], list[str]] = {}
    damaged_refs: list[Any] = []
    for ref in list_refs(store, damaged=damaged_refs):
        refs.setdefault((ref.stage, ref.key), []).append(ref.pipeline)
    table = Table(title=f"artifacts in {store.root_uri}", title_justify="left")
    for column in ("stage", "key", "rows", "size", "age", "refs"):
        table.add_column(column, justify="right" if column in ("rows", "size", "age") else "left")
    if stage is not None:
        _known_stage(store, stage)
    damaged: list[Any] = []
    manifests = store.list_manifests(stage, damaged=damaged)
    if MODE.as_json:
        print_json(
            [
                {"stage": m.stage, "key": m.key, "rows": m.rows_out, "bytes": m.total_bytes, "created_at": m.created_at,
                 "refs": refs.get((m.stage, m.key), []), "damaged": None}
                for m in manifests
            ]
            + [{"stage": d.stage, "key": d.key, "damaged": d.problem, "refs": refs.get((d.stage, d.key), [])} for d in damaged]
        )  # fmt: skip
    elif MODE.quiet:  # one artifact a line, whole keys: for scripts (`xargs`)
        for m in manifests:
            typer.echo(f"{m.stage} {m.key}")
    else:
        for m in manifests:
            table.add_row(
                m.stage,
                m.key[:12],
                f"{m.rows_out:,}",
                _size(m.total_bytes),
                _age(m.created_at),
                ", ".join(refs.get((m.stage, m.key), [])),
            )
        for item in damaged:
            table.add_row(
                item.stage, item.key[:12], Text("damaged", style="red"), "", "", ", ".join(refs.get((item.stage, item.key), []))
            )
        out.print(table)
    for item in damaged:
        err.print(Text(f"damaged: {item.problem}"), highlight=False)
    _report_damaged_refs(damaged_refs)
    if not manifests and not damaged and not MODE.as_json:
        err.print("no artifacts")


@artifacts_app.command("show")
def artifacts_show(
    stage: str,
    key: Annotated[Optional[str], typer.Argument(help="key or unique prefix; default: what the ref points to")] = None,
    pipeline: Annotated[Optional[str], typer.Option(help="take the key from this pipeline's ref")] = None,
    rows: Annotated[int, typer.Option("--rows", "-n", min=0, help="first rows to print")] = 10,
    as_json: Annotated[
        bool, typer.Option("--json", help="print the whole manifest as JSON instead (config, files, checksums)")
    ] = False,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Summarise an artifact (rows, drops, inputs, files) and print its first rows; --json: the manifest."""
    import polars as pl

    store = _store(root)
    full = _resolve(store, stage, key, pipeline)
    manifest = store.manifest(stage, full)
    if as_json:
        typer.echo(manifest.model_dump_json(indent=2))
        return
    for line in _manifest_summary(store, manifest):
        out.print(line, highlight=False, markup=False)
    if rows > 0 and manifest.table_files:
        batch = next(iter(store.iter_batches(stage, full, batch_size=rows)), None)
        if batch is not None:
            out.print()
            with out.frame_config(rows):
                out.print(str(pl.from_arrow(batch).head(rows)), highlight=False, markup=False)


def _manifest_summary(store: Any, m: Any) -> list[str]:
    """A few lines that say what an artifact is; `--json` has everything."""
    refs = [f"{r.pipeline}" for r in list_refs(store) if r.stage == m.stage and r.key == m.key]
    drops = ", ".join(f"{reason} {n:,}" for reason, n in sorted(m.dropped.items(), key=lambda kv: -kv[1]))
    attached = m.attached_files
    lines = [
        f"{m.stage} {m.key}",
        f"  uri       {store.uri(m.stage, m.key)}",
        f"  created   {m.created_at} ({_age(m.created_at)} ago), {m.wall_time_s:.1f} s; code {m.code_version}, xlembed {m.package_version}",
        f"  rows      {m.rows_in:,} in, {m.rows_out:,} out" + (f"; dropped {drops}" if drops else ""),
        f"  files     {len(m.files)} ({_size(m.total_bytes)}): {len(m.table_files)} Parquet, {len(attached)} attached",
    ]
    if m.rebuild_of:
        lines.append(
            f"  rebuild   attempt {m.attempt} of {m.rebuild_of[:12]} (--force built it beside that version, which is kept)"
        )
    if m.columns:
        lines.append("  columns   " + ", ".join(f"{c.name} ({c.type})" for c in m.columns))
    if m.input_keys:
        lines.append("  inputs    " + ", ".join(f"{name} {k[:12]}" for name, k in m.input_keys.items()))
    scalars = {k: v for k, v in m.metrics.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
    if scalars:
        lines.append(
            "  metrics   "
            + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in list(scalars.items())[:8])
        )
    if refs:
        lines.append("  refs      " + ", ".join(refs))
    lines.append(f"  config, files and checksums: xlembed artifacts show {m.stage} {m.key[:12]} --json")
    return lines


@artifacts_app.command("head")
def artifacts_head(
    stage: str,
    key: Annotated[Optional[str], typer.Argument(help="key or unique prefix; default: what the ref points to")] = None,
    pipeline: Annotated[Optional[str], typer.Option(help="take the key from this pipeline's ref")] = None,
    rows: Annotated[int, typer.Option("--rows", "-n", min=1, max=MAX_ROWS, help="rows to print")] = 10,
    rejects: Annotated[
        bool, typer.Option("--rejects", help="the rows the stage dropped, per reason (kept up to a cap, then a sample)")
    ] = False,
    reason: Annotated[Optional[str], typer.Option(help="with --rejects: this reason only")] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Print the first rows of a Parquet artifact (streamed: nothing else is read); --rejects: of the rows it dropped."""
    import polars as pl

    store = _store(root)
    full = _resolve(store, stage, key, pipeline)
    if rejects:
        _print_rejects(store, stage, full, rows, reason)
        return
    batch = next(iter(store.iter_batches(stage, full, batch_size=max(rows, 1))), None)
    if batch is None:
        raise fail(f"{stage}/{full[:12]} has no table rows (an artifact of attached files only?)")
    with out.frame_config(rows):
        out.print(str(pl.from_arrow(batch).head(rows)), highlight=False, markup=False)


def _print_rejects(store: Any, stage: str, key: str, rows: int, reason: str | None) -> None:
    """Per reason: how many rows were dropped (the manifest), how many are kept, and the first `rows` of them."""
    import polars as pl

    manifest = store.manifest(stage, key)
    files = [e.path.removeprefix("files/") for e in manifest.attached_files if e.path.startswith(f"files/{REJECTS_DIR}/")]
    if not files:
        raise fail(f"{stage}/{key[:12]} keeps no rejected rows (dropped: {dict(manifest.dropped) or 'none'})")
    folder = store.attached_dir(stage, key)
    frame = pl.concat([pl.read_parquet(folder / name) for name in sorted(files)], how="vertical_relaxed")
    if reason is not None:
        if reason not in set(frame["reason"]):
            raise fail(f"{stage}/{key[:12]} keeps no rows dropped as {reason!r}; it keeps {sorted(set(frame['reason']))}")
        frame = frame.filter(pl.col("reason") == reason)
    for (name,), part in sorted(frame.partition_by("reason", as_dict=True).items()):
        out.print(f"{name}: {manifest.dropped.get(name, 0):,} dropped, {part.height:,} kept", highlight=False, markup=False)
        with out.frame_config(rows):
            out.print(str(part.drop("reason").head(rows)), highlight=False, markup=False)


# lineage, query and index: looking into the store
def _config_line(name: str, value: Any) -> str:
    import json

    return f"{name} = {json.dumps(value, ensure_ascii=False, default=str)}"


def _leaf_tables(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts down to the innermost tables of scalars (one fingerprint per line)."""
    if isinstance(value, dict) and (not prefix or any(isinstance(v, dict) for v in value.values())):
        found: dict[str, Any] = {}
        for name, item in value.items():
            found.update(_leaf_tables(item, f"{prefix}.{name}" if prefix else str(name)))
        return found
    return {prefix: value}


def _fingerprint_text(value: Any) -> str:
    """A recorded fingerprint as a reader wants it: `sha256 3fa2b1c4d5e6…` (with the size when
    recorded), `12.4 KiB, modified 2026-…` for key scheme 1's size and mtime; else as recorded."""
    import json

    if isinstance(value, dict):
        size = value.get("bytes", value.get("size"))
        shown_size = f"  {_size(size)}" if isinstance(size, int) and not isinstance(size, bool) else ""
        if isinstance(value.get("sha256"), str) and set(value) <= {"sha256", "bytes", "size"}:
            return f"sha256 {value['sha256'][:12]}…{shown_size}"
        if set(value) == {"size", "mtime_ns"} and shown_size and isinstance(value["mtime_ns"], int):
            modified = dt.datetime.fromtimestamp(value["mtime_ns"] / 1e9, dt.timezone.utc).isoformat(timespec="seconds")
            return f"{shown_size.strip()}, modified {modified}"
    return json.dumps(value, ensure_ascii=False, default=str)


def _lineage_tree(node: Any, record: dict[str, Any], seen: set[tuple[str, str]], tree: Any | None = None, via: str = "") -> Any:
    from rich.text import Text
    from rich.tree import Tree

    head = Text.assemble(
        (f"{via}: " if via and via != node.stage else "", "dim"), (node.stage, "bold"), " ", (node.key[:12], "cyan")
    )
    if node.missing:
        head.append("  missing from the store (collected?)", style="red")
    elif (node.stage, node.key) in seen:
        head.append("  (shown above)", style="dim")
    else:
        m = node.manifest
        head.append(
            f"  created {m.created_at} ({_age(m.created_at)} ago) · code {m.code_version} · xlembed {m.package_version} · ",
            style="dim",
        )
        head.append(
            f"key scheme {m.key_scheme} ({KEY_SCHEMES.get(m.key_scheme, 'unknown')})",
            style="dim" if m.key_scheme == KEY_SCHEME else "yellow",
        )
        head.append(f" · {m.rows_out:,} rows · {_size(m.total_bytes)}", style="dim")
    branch = tree.add(head) if tree is not None else Tree(head)
    if node.missing or (node.stage, node.key) in seen:
        return branch
    seen.add((node.stage, node.key))
    changes = record.get("config_changes")
    if "config_changes" in record and changes is None:
        title = Text.assemble("config ", ("(stage not in --config)", "yellow"))
    elif changes:
        title = Text.assemble(
            "config ", (f"({len(changes)} {'differs' if len(changes) == 1 else 'differ'} from --config: marked ≠)", "yellow")
        )
    else:
        title = Text("config" + (" (same as --config)" if changes == {} else ""))
    config_branch = branch.add(title)
    recorded = flatten(node.manifest.config)
    for name in sorted(set(recorded) | set(changes or {})):
        if changes and name in changes:
            change = changes[name]
            shown = _config_line(name, change["recorded"]) if "recorded" in change else f"{name} (not set)"
            now = _config_line("now", change["current"]).removeprefix("now = ") if "current" in change else "(not set)"
            config_branch.add(Text.assemble(("≠ " + shown, "bold yellow"), ("  current: " + now, "yellow")))
        else:
            config_branch.add(Text(_config_line(name, recorded[name])))
    sources = record["sources"]
    if sources["locations"] or sources["fingerprints"]:
        source_branch = branch.add("sources")
        for name, value in sources["locations"].items():
            for dotted, place in flatten(value, name).items():
                source_branch.add(Text(_config_line(dotted, place)))
        for name, value in _leaf_tables(sources["fingerprints"]).items():
            source_branch.add(Text(f"fingerprint {name}: {_fingerprint_text(value)}", style="dim"))
    for name, child in node.inputs.items():
        _lineage_tree(child, record["inputs"][name], seen, branch, name)
    return branch


@artifacts_app.command("lineage")
def artifacts_lineage(
    stage: str,
    key: Annotated[Optional[str], typer.Argument(help="key or unique prefix; default: what the ref points to")] = None,
    pipeline: Annotated[Optional[str], typer.Option(help="take the key from this pipeline's ref")] = None,
    config: Annotated[
        Optional[Path], typer.Option("--config", help="pipeline config TOML to compare each artifact's config with")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the tree as JSON")] = False,
    root: StoreRootOpt = "artifacts",
) -> None:
    """The tree of artifacts this one was built from: keys, configs, sources, creation time, code version."""
    import json

    store = _store(root)
    full = _resolve(store, stage, key, pipeline)
    compare = None
    if config is not None:
        cfg = _load(config, None)
        compare = {name: keyed_config(section) for name, section in cfg.stage_configs.items()}
    tree = lineage(store, stage, full)
    record = node_record(tree, compare)
    if as_json:
        typer.echo(json.dumps(record, indent=2, ensure_ascii=False, default=str))
        return
    out.print(_lineage_tree(tree, record, set()), highlight=False)


@artifacts_app.command("query")
def artifacts_query(
    sql: Annotated[
        str,
        typer.Argument(
            help='SQL; tables: STAGE (what its ref points to) or STAGE@KEY (a key or prefix), e.g. "SELECT lang, count(*) FROM corpus GROUP BY lang"',
            show_default=False,
        ),
    ],
    pipeline: Annotated[Optional[str], typer.Option(help="take STAGE's key from this pipeline's ref")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="rows to print (--output writes them all)")] = 20,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="write the whole result to FILE.parquet or FILE.csv (streamed)")
    ] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """SQL over artifacts by stage name, read lazily from the store (local or s3://) with DuckDB;
    the query reads the store's artifacts and nothing else."""
    import duckdb

    if output is not None and output.suffix.lower() not in (".parquet", ".csv"):
        raise fail(f"--output {output}: write .parquet or .csv", 2)
    store = _store(root)
    if output is not None:
        refuse_inside_store(store, output, "--output")
    committed = set(store.stages())

    def named(name: str) -> Any:
        if name not in committed:
            return None
        return scan_artifact(store, name, _resolve(store, name, None, pipeline))

    def versioned(mention: Any) -> Any:
        if mention.stage not in committed:
            raise fail(
                f"unknown stage {mention.stage!r} in {mention.stage}@{mention.key}; stages: {', '.join(sorted(committed)) or 'none'}",
                2,
            )
        return scan_artifact(store, mention.stage, _resolve(store, mention.stage, mention.key, None))

    def available() -> list[str]:
        refs = [r for r in list_refs(store) if r.stage in committed and (pipeline is None or r.pipeline == pipeline)]
        return sorted(
            {r.stage for r in refs if store.is_committed(r.stage, r.key) and store.manifest(r.stage, r.key).table_files}
        )

    try:
        result = sql_query(sql, named, versioned, available)
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            rows = _write_result(result.relation, output)
            out.print(f"wrote {rows:,} rows to {output}", highlight=False, markup=False)
            return
        shown = result.relation.limit(limit + 1).pl()
    except QueryError as exc:
        raise fail(str(exc), 2) from None
    except StoreError:
        raise
    except (duckdb.Error, OSError) as exc:
        raise fail(str(collect_error(exc))) from None
    more = shown.height > limit
    with out.frame_config(limit, str_lengths=80):
        out.print(str(shown.head(limit)), highlight=False, markup=False)
    if more:
        err.print(f"first {limit} rows shown; --limit N shows more, --output FILE.parquet writes them all", highlight=False)


def _write_result(relation: Any, output: Path) -> int:
    """Stream a query result into a local Parquet or CSV file (written here, not by the SQL
    engine, whose file access is switched off); returns the rows written."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    reader = relation.to_arrow_reader(64 * 1024)
    writer = (
        pq.ParquetWriter(output, reader.schema) if output.suffix.lower() == ".parquet" else pacsv.CSVWriter(output, reader.schema)
    )
    rows = 0
    with writer:
        for batch in reader:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


@artifacts_app.command("index")
def artifacts_index(
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="write the page here instead of ROOT/index.html (links stay relative to it)"),
    ] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Write a static HTML page (index.html in the root) listing pipelines, refs, versions, reports and figures."""
    store = _store(root)
    if output is None:
        page = write_index(store, reports_dir=SWEEPS_DIR)
        where = f"{store.root_uri}/{INDEX_FILE}"
    else:
        if output.suffix.lower() not in (".html", ".htm"):
            output = output / INDEX_FILE
        output = output.expanduser().resolve()
        if store.backend.is_local:
            base = os.path.relpath(store.root_uri, output.parent).replace(os.sep, "/")
            link_base = "" if base == "." else f"{base}/"
        else:  # a local page over a remote store: absolute links, which a browser may not open
            link_base = f"{store.root_uri}/"
        page = build_index(store, link_base=link_base, reports_dir=SWEEPS_DIR)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(page.html, encoding="utf-8")
        where = str(output)
    out.print(f"{where}: {page.artifacts} artifacts, {len(page.links)} links", highlight=False, markup=False, soft_wrap=True)


@artifacts_app.command("diff")
def artifacts_diff(stage: str, key_a: str, key_b: str, root: StoreRootOpt = "artifacts") -> None:
    """Differences between two versions of a stage: config, code, inputs, rows and drops."""
    store = _store(root)
    a = store.manifest(stage, _resolve(store, stage, key_a, None))
    b = store.manifest(stage, _resolve(store, stage, key_b, None))
    lines = config_changes(a.config, b.config, stage)
    if a.code_version != b.code_version:
        lines.append(f"code version: {a.code_version} -> {b.code_version}")
    for name in sorted(set(a.input_keys) | set(b.input_keys)):
        if a.input_keys.get(name) != b.input_keys.get(name):
            lines.append(f"input {name}: {str(a.input_keys.get(name))[:12]} -> {str(b.input_keys.get(name))[:12]}")
    for name in sorted(set(a.source_fingerprints) | set(b.source_fingerprints)):
        if a.source_fingerprints.get(name) != b.source_fingerprints.get(name):
            lines.append(f"source {name} changed")
    for label, x, y in (("rows in", a.rows_in, b.rows_in), ("rows out", a.rows_out, b.rows_out)):
        if x != y:
            lines.append(f"{label}: {x:,} -> {y:,} ({y - x:+,})")
    for reason in sorted(set(a.dropped) | set(b.dropped)):
        x, y = a.dropped.get(reason, 0), b.dropped.get(reason, 0)
        if x != y:
            lines.append(f"dropped {reason}: {x:,} -> {y:,} ({y - x:+,})")
    out.print(f"{stage} {a.key[:12]} -> {b.key[:12]}")
    for line in lines or ["no differences"]:
        out.print(f"  {line}", highlight=False, markup=False)
