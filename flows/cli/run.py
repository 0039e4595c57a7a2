"""`xlembed plan`, `run` and `evaluate`: plan a pipeline, build it as a Prefect flow run, print its scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from flows.cli.common import (
    MODE,
    ConfigArg,
    ForceOpt,
    FromOpt,
    JsonOpt,
    OnlyOpt,
    QuietOpt,
    RootOpt,
    VerboseOpt,
    _load,
    _size,
    _store,
    app,
    check_root_option,
    err,
    fail,
    out,
    output_mode,
    print_json,
    print_plan_notes,
    refresh_index,
    result_line,
    run_prefect_flow,
)
from flows.cli.sweep import _sweep
from flows.config import PipelineConfig
from flows.plan import check_plan_data, make_plan
from storage import ArtifactStore, StoreError
from storage.build_locks import hold_build_lock
from storage.refs import set_ref


def _plan(
    config: PipelineConfig, only: str | None, from_stage: str | None, force: list[str], *, create: bool = True
) -> tuple[Any, list[Any]]:
    """The store and the plan; then every computing stage's input data is checked (line
    counts, columns, readable files), so that bad data fails now, not hours into a run."""
    from flows.stages import stage_registry  # lazy: every stage module (polars), not needed for --help

    store = _store(config.settings.root, must_exist=False) if create else None
    try:
        if store is None:  # `plan` reads only: a root that is not there yet is not created
            store = ArtifactStore(config.settings.root, create=False)
            if not store.check_root(must_exist=False) and not MODE.quiet:
                err.print(
                    Text(f"artifact root {store.root_uri} does not exist yet (`run` creates it)", style="yellow"), highlight=False
                )
        steps = make_plan(config, store, stage_registry(), only=only, from_stage=from_stage, force=force)
    except StoreError as exc:
        raise fail(str(exc), 1 if type(exc).__name__ == "StoreAccessError" else 2) from None
    except (ValueError, FileNotFoundError) as exc:
        raise fail(str(exc), 2) from None
    problems = check_plan_data(config, steps, stage_registry())
    if problems:
        _print_plan(steps)
        for problem in problems:
            err.print(Text.assemble(("error:", "red"), " ", problem), highlight=False)
        raise fail(f"{len(problems)} input data problem(s) found before running anything; fix the data or the config", 1)
    return store, steps


def _print_plan(steps: list[Any]) -> None:
    """The plan table (none with --json: `out` is quiet then)."""
    out.print(_plan_table(steps))


def _plan_record(steps: list[Any]) -> list[dict[str, Any]]:
    return [{"stage": step.stage, "action": step.action, "key": step.key, "why": list(step.reasons)} for step in steps]


def _plan_table(plan: list[Any]) -> Table:
    table = Table(title="plan", title_justify="left")
    for column in ("stage", "action", "key", "why"):
        table.add_column(column)
    colour = {"cached": "green", "compute": "yellow", "skip": "dim"}
    for step in plan:
        table.add_row(step.stage, Text(step.action, style=colour[step.action]), step.key[:12], Text("\n".join(step.reasons)))
    return table


GridOpt = Annotated[
    Optional[Path], typer.Option("--grid", help="a sweep grid TOML: plan every variant of it (docs/experiments.md)")
]


@app.command()
def plan(
    config: ConfigArg, only: OnlyOpt = None, from_stage: FromOpt = None, force: ForceOpt = [], root: RootOpt = None, grid: GridOpt = None,  # noqa: B006
    verbose: VerboseOpt = False, quiet: QuietOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Show, per stage, whether it is cached or will compute, and why. Computes nothing."""
    output_mode(verbose, quiet, as_json)
    if grid is not None:
        if only is not None or from_stage is not None or force:
            raise fail("--grid plans whole variants: it cannot be combined with --only, --from or --force", 2)
        if MODE.as_json:
            raise fail("--json does not apply to --grid yet: plan one variant's config", 2)

        check_root_option(root)
        _sweep(config, grid, None, root, dry_run=True)
        return
    cfg = _load(config, root)
    _, steps = _plan(cfg, only, from_stage, force, create=False)
    if MODE.as_json:
        print_json({"pipeline": cfg.name, "root": cfg.settings.root, "stages": _plan_record(steps)})
        return
    out.print(_plan_table(steps))
    print_plan_notes(steps)


def _pipeline_flow() -> Any:
    from flows.pipeline import pipeline_flow  # lazy: prefect, only when something is computed

    return pipeline_flow


def _execute(
    cfg: PipelineConfig, config: Path, only: str | None, from_stage: str | None, force: list[str], root: str | None
) -> tuple[Any, dict[str, str]]:
    """Plan, then run the Prefect flow unless everything is cached. Returns (store, stage -> key)."""
    from flows.server import TemporaryServer  # lazy: sockets, subprocess and urllib, not needed for --help

    server = TemporaryServer.start_early()  # starts while the run plans (flows/server.py)
    store, steps = _plan(cfg, only, from_stage, force)
    if not MODE.quiet:
        out.print(_plan_table(steps))
    print_plan_notes(steps)
    if not any(step.action == "compute" for step in steps):
        for step in steps:  # nothing to build: just make the refs agree with the config
            if step.action == "cached":
                with hold_build_lock(store, step.stage, step.key):  # gc keeps it until the ref moved
                    set_ref(store, cfg.name, step.stage, step.key, note="up to date", expected=step.ref_key)
        refresh_index(store, cfg)
        if not MODE.quiet:
            out.print("[green]Everything is up to date; nothing to compute.[/green]")
        server.stop()
        return store, {step.stage: step.key for step in steps if step.action == "cached"}
    keys = run_prefect_flow(
        server,
        cfg,
        "run",
        _pipeline_flow,
        config_path=str(config),
        only=only,
        from_stage=from_stage,
        force=list(force),
        root=root,
    )
    if not MODE.quiet:
        table = Table(title="artifacts", title_justify="left")
        for column in ("stage", "key", "rows in", "rows out", "dropped"):
            table.add_column(column, justify="right" if column.startswith(("rows", "dropped")) else "left")
        for stage, key in keys.items():
            m = store.manifest(stage, key)
            table.add_row(stage, key[:12], f"{m.rows_in:,}", produced(m), f"{sum(m.dropped.values()):,}")
        out.print(table)
    for stage, key in keys.items():  # whole, one per line: the part a user copies
        result_line(f"{stage}: {store.uri(stage, key)}")
    return store, keys


def produced(manifest: Any) -> str:
    """What a stage produced, for the summary: its rows, or for a stage that writes files only (a
    model) their count and size; "0 rows" there would read as a failure."""
    if manifest.columns:
        return f"{manifest.rows_out:,}"
    files = manifest.attached_files
    return f"{len(files)} files, {_size(sum(f.bytes for f in files))}"


def _artifacts_record(store: Any, keys: dict[str, str]) -> dict[str, Any]:
    record = {}
    for stage, key in keys.items():
        m = store.manifest(stage, key)
        record[stage] = {
            "key": key,
            "uri": store.uri(stage, key),
            "rows_in": m.rows_in,
            "rows_out": m.rows_out,
            "dropped": dict(m.dropped),
        }
    return record


@app.command()
def run(
    config: ConfigArg, only: OnlyOpt = None, from_stage: FromOpt = None, force: ForceOpt = [], root: RootOpt = None,  # noqa: B006
    verbose: VerboseOpt = False, quiet: QuietOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Build every stale stage (or only some, with --only/--from), as a Prefect flow run."""
    output_mode(verbose, quiet, as_json)
    cfg = _load(config, root)
    store, keys = _execute(cfg, config, only, from_stage, force, root)
    evaluation = _print_evaluation(store, keys["evaluate"]) if "evaluate" in keys else None
    model = _print_model(store, keys, cfg.name) if "train" in keys else None
    if MODE.as_json:
        print_json({"pipeline": cfg.name, "artifacts": _artifacts_record(store, keys), "evaluation": evaluation, "model": model})


def _print_model(store: Any, keys: dict[str, str], pipeline: str) -> dict[str, str]:
    """The run's last lines: where the trained model is, and the command that exports it as a
    sentence-transformers folder with its card (printed with -q too; returned for --json)."""
    import shlex

    folder = f"{store.uri('train', keys['train'])}/files/model"
    command = f"xlembed export train {shlex.quote(pipeline)}-model --pipeline {shlex.quote(pipeline)} --root {shlex.quote(store.root_uri)}"
    result_line(f"model: {folder}")
    result_line(f"export it: {command}")
    return {"key": keys["train"], "folder": folder, "export": command}


@app.command()
def evaluate(
    config: ConfigArg, force: Annotated[bool, typer.Option("--force", help="re-evaluate even if cached")] = False, root: RootOpt = None,
    verbose: VerboseOpt = False, quiet: QuietOpt = False, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Evaluate the pipeline's model (building what it needs) and print the scores and the report's location."""
    output_mode(verbose, quiet, as_json)
    cfg = _load(config, root)
    if "evaluate" not in cfg.stages:
        raise fail(f"{config}: no [evaluate] section", 2)
    store, keys = _execute(cfg, config, "evaluate", None, ["evaluate"] if force else [], root)
    evaluation = _print_evaluation(store, keys["evaluate"])
    if MODE.as_json:
        print_json({"pipeline": cfg.name, "artifacts": _artifacts_record(store, keys), "evaluation": evaluation})


def _points(value: float) -> str:
    return f"{value:+.1f}"


def headline_lines(metrics: dict[str, Any]) -> list[str]:
    """The last lines of `run` and `evaluate`, from the evaluate manifest's metrics: per
    benchmark/dataset, the change of each language group's (else all languages') accuracy with
    its 95% interval over the base, e.g. "retrieval/corpus-dev wacse-4: +1.3 [+0.8, +1.7] points of
    accuracy over the untrained base (significant)"; without a baseline, the headline score."""
    changes = metrics.get("headline_change") or []
    lines = []
    by_dataset: dict[str, list[dict[str, Any]]] = {}
    for change in changes:
        by_dataset.setdefault(f"{change['benchmark']}/{change['dataset']}", []).append(change)
    for name, rows in by_dataset.items():
        shown = [r for r in rows if r["kind"] == "group"] or [r for r in rows if r["kind"] == "all"]
        for r in shown:
            verdict = "significant" if r["significant"] else "within noise: the interval contains 0"
            lines.append(
                f"{name} {r['label']}: {_points(r['delta'])} [{_points(r['low'])}, {_points(r['high'])}] points of accuracy "
                f"over the {r['baseline']} ({verdict})"
            )
    if not lines:  # no paired comparison: the scores themselves
        for name, headline in (metrics.get("headline") or {}).items():
            lines.append(
                f"{name}: {headline['metric']} {headline['mean']:.4g} (mean over {headline['pairs']} language pairs; no baseline to compare with)"
            )
    return lines


def _print_evaluation(store: Any, key: str) -> dict[str, Any]:
    """Print the scores (unless -q), the report's location and the headline lines; returns them for --json."""
    import polars as pl

    from tasks.evaluate.stage import main_metric_rows  # lazy: the evaluate stage (polars), only for `xlembed evaluate`

    main = main_metric_rows(store.read_table("evaluate", key))  # each benchmark's main metric
    if not MODE.quiet:
        with out.frame_config(60):
            out.print(
                str(main.select("benchmark", "dataset", "src_lang", "tgt_lang", "metric", pl.col("value").round(4), "n")),
                markup=False,
                highlight=False,
            )
    manifest = store.manifest("evaluate", key)
    report = next((f.path for f in manifest.attached_files if f.path.endswith("report.html")), None)
    report_uri = f"{store.uri('evaluate', key)}/{report}" if report else None
    if report_uri:
        result_line(f"report: {report_uri}")
    lines = headline_lines(manifest.metrics)
    for line in lines:
        result_line(line)
    return {
        "key": key, "report": report_uri, "headline": manifest.metrics.get("headline", {}),
        "base_headline": manifest.metrics.get("base_headline"), "headline_change": manifest.metrics.get("headline_change", []),
        "summary": lines,
    }  # fmt: skip
