"""The `xlembed` command line.

Exit codes: 0 success, 1 the run or a check failed, 2 bad usage or config.
Heavy imports (Prefect, polars) happen only in the commands that need them, so
`xlembed plan` and an up-to-date `xlembed run` answer quickly.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
import typer.core
from rich.console import Console
from rich.table import Table
from rich.text import Text

from flows.config import ROOT_ENV, ConfigError, PipelineConfig, load_config
from flows.output import Output

# Prefect's temporary server gets 20 s to start by default, which a busy 2-core machine
# exceeds; a user's own setting still wins.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")

# Help that reads in 80 columns: click's plain layout (not rich panels that squeeze the text
# into a narrow column and cut env var names), flags without a type, and each value named for
# what it is (--only STAGE, --root URI, CONFIG) instead of <str>, <path> and {config}.
_METAVARS = {"only": "STAGE", "from_stage": "STAGE", "force": "STAGE", "root": "URI", "remote": "URI", "rows": "N", "limit": "N",
             "examples": "N", "interval": "SECONDS", "timezone": "TZ", "src_lang": "LANG", "tgt_lang": "LANG", "output": "FILE",
             "gold": "FILE", "src": "FILE", "tgt": "FILE", "train_src": "FILE", "train_tgt": "FILE", "baseline": "VARIANT", "to": "KEY"}  # fmt: skip


def _readable_params(command: Any) -> None:
    for param in command.params:
        if getattr(param, "is_flag", False) or getattr(param, "count", False) or param.name is None:
            continue
        param.metavar = param.metavar or _METAVARS.get(param.name, param.name.upper())
        if param.param_type_name == "argument":
            param._usage_display_name = lambda p=param: (p.metavar if p.required else f"[{p.metavar}]") + ("..." if p.nargs != 1 else "")
            param.display_type_rich = lambda ctx: None  # "CONFIG  pipeline config TOML", not "CONFIG <path>"


class _ReadableHelp(typer.core.TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for command in self.commands.values():
            _readable_params(command)


app = typer.Typer(
    cls=_ReadableHelp,
    name="xlembed",
    help="Staged, cached pipelines for cross-lingual sentence encoders.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: readable in 80 columns, nothing cut (see _help_formatting)
)
artifacts_app = typer.Typer(
    cls=_ReadableHelp, help="Inspect and maintain the artifact store (local folder or s3://).", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(artifacts_app, name="artifacts")

out = Output()  # plain lines when stdout is not a terminal; paths and URIs never wrapped or cut
err = Console(stderr=True, soft_wrap=True)  # an error line stays one line (paths in it are copied), in a pipe too

ConfigArg = Annotated[Path, typer.Argument(help="pipeline config TOML, e.g. configs/demo.toml", show_default=False)]
OnlyOpt = Annotated[Optional[str], typer.Option("--only", help="run only this stage (building missing inputs)")]
FromOpt = Annotated[Optional[str], typer.Option("--from", help="run this stage and everything downstream")]
ForceOpt = Annotated[list[str], typer.Option("--force", help="recompute this stage even if cached (repeatable)")]
RootOpt = Annotated[Optional[str], typer.Option("--root", help=f"artifact root URI (overrides the config; env {ROOT_ENV})")]
StoreRootOpt = Annotated[str, typer.Option("--root", envvar=ROOT_ENV, help="artifact root: a folder or s3://bucket/prefix")]


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print `error: MESSAGE` (the message literally: paths and TOML sections hold brackets)."""
    err.print(Text.assemble(("error:", "red"), " ", str(message)), highlight=False)
    return typer.Exit(code)


def _one_line(exc: BaseException, root: str | None = None) -> str:
    """An exception as the one line a user reads: a storage failure explained (root, cause, fix),
    a data error as its own message, anything else as `Type: message` (never an empty message)."""
    from storage.errors import explain
    from tasks.stage import DataError

    explained = explain(exc, root)
    if explained is not None:
        return explained
    text = str(exc) or repr(exc)
    return text if isinstance(exc, DataError) else f"{type(exc).__name__}: {text}"


class _DropDataTracebacks:
    """A logging filter: bad input data and store problems are reported by their message, so
    Prefect's task-failure logs leave out the traceback (about 100 lines) for them."""

    def filter(self, record: Any) -> bool:
        from storage import StoreError
        from tasks.stage import DataError

        if record.exc_info and isinstance(record.exc_info[1], (DataError, StoreError)) and not os.environ.get("XLEMBED_DEBUG"):
            record.exc_info, record.exc_text = None, None
        return True


def _one_line_data_errors() -> None:
    import logging

    quiet = _DropDataTracebacks()
    for name in ("", "prefect", "prefect.flow_runs", "prefect.task_runs"):
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, _DropDataTracebacks) for f in handler.filters):
                handler.addFilter(quiet)


def stopped(exc: BaseException) -> typer.Exit:
    """Ctrl-C or SIGTERM stopped a run at a safe point: what was kept, exit 130."""
    err.print(f"interrupted: {exc}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(130)


def _version(value: bool) -> None:
    if value:
        from tasks.stage import PACKAGE_VERSION

        out.print(f"xlembed {PACKAGE_VERSION}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="show tracebacks and debug logs")] = False,
) -> None:
    if verbose:
        os.environ["XLEMBED_DEBUG"] = "1"


def _load(config: Path, root: str | None) -> PipelineConfig:
    try:
        return load_config(config, root=root)
    except ConfigError as exc:
        raise fail(str(exc), 2) from None


def _plan(config: PipelineConfig, only: str | None, from_stage: str | None, force: list[str], *, create: bool = True) -> tuple[Any, list[Any]]:
    """The store and the plan; then every computing stage's input data is checked (line
    counts, columns, readable files), so that bad data fails now, not hours into a run."""
    from flows.plan import check_plan_data, make_plan
    from flows.stages import stage_registry
    from storage import StoreError

    store = _store(config.settings.root, must_exist=False) if create else None
    try:
        if store is None:  # `plan` reads only: a root that is not there yet is not created
            from storage import ArtifactStore

            store = ArtifactStore(config.settings.root, create=False)
            if not store.check_root(must_exist=False):
                err.print(Text(f"artifact root {store.root_uri} does not exist yet (`run` creates it)", style="yellow"), highlight=False)
        steps = make_plan(config, store, stage_registry(), only=only, from_stage=from_stage, force=force)
    except StoreError as exc:
        raise fail(str(exc), 1 if type(exc).__name__ == "StoreAccessError" else 2) from None
    except (ValueError, FileNotFoundError) as exc:
        raise fail(str(exc), 2) from None
    problems = check_plan_data(config, steps, stage_registry())
    if problems:
        out.print(_plan_table(steps))
        for problem in problems:
            err.print(Text.assemble(("error:", "red"), " ", problem), highlight=False)
        raise fail(f"{len(problems)} input data problem(s) found before running anything; fix the data or the config", 1)
    return store, steps


def _plan_table(plan: list[Any]) -> Table:
    table = Table(title="plan", title_justify="left")
    for column in ("stage", "action", "key", "why"):
        table.add_column(column)
    colour = {"cached": "green", "compute": "yellow", "skip": "dim"}
    for step in plan:
        table.add_row(step.stage, Text(step.action, style=colour[step.action]), step.key[:12], Text("\n".join(step.reasons)))
    return table


def _print_plan_notes(plan: Any) -> None:
    """The key-scheme change (once, when old artifacts will be rebuilt) and what hashing cost."""
    for line in plan.notes():
        out.print(Text(line, style="yellow" if line.startswith("key scheme") else "dim"), highlight=False)


GridOpt = Annotated[Optional[Path], typer.Option("--grid", help="a sweep grid TOML: plan every variant of it (docs/experiments.md)")]


@app.command()
def plan(config: ConfigArg, only: OnlyOpt = None, from_stage: FromOpt = None, force: ForceOpt = [], root: RootOpt = None, grid: GridOpt = None) -> None:  # noqa: B006
    """Show, per stage, whether it is cached or will compute, and why. Computes nothing."""
    if grid is not None:
        if only is not None or from_stage is not None or force:
            raise fail("--grid plans whole variants: it cannot be combined with --only, --from or --force", 2)
        _sweep(config, grid, None, root, dry_run=True)
        return
    cfg = _load(config, root)
    _, steps = _plan(cfg, only, from_stage, force, create=False)
    out.print(_plan_table(steps))
    _print_plan_notes(steps)


def _refresh_index(store: Any, cfg: PipelineConfig) -> None:
    """For a run or sweep that starts no flow (everything cached) but may have moved refs: what
    the flows do at their end (flows.pipeline.publish_store_index), without the Prefect link."""
    if not cfg.settings.write_index:
        return
    from flows.sweep import SWEEPS_DIR
    from storage.index import INDEX_FILE, write_index

    try:
        write_index(store, reports_dir=SWEEPS_DIR)
    except Exception as exc:  # noqa: BLE001 - a convenience page; the run's own result stands
        err.print(f"[yellow]warning:[/yellow] store index {store.root_uri}/{INDEX_FILE} not refreshed: {type(exc).__name__}: {exc}", highlight=False)


def _execute(cfg: PipelineConfig, config: Path, only: str | None, from_stage: str | None, force: list[str], root: str | None) -> tuple[Any, dict[str, str]]:
    """Plan, then run the Prefect flow unless everything is cached. Returns (store, stage -> key)."""
    from flows.server import TemporaryServer

    server = TemporaryServer.start_early()  # starts while the run plans (flows/server.py)
    store, steps = _plan(cfg, only, from_stage, force)
    out.print(_plan_table(steps))
    _print_plan_notes(steps)
    if not any(step.action == "compute" for step in steps):
        for step in steps:  # nothing to build: just make the refs agree with the config
            if step.action == "cached":
                store.set_ref(cfg.name, step.stage, step.key, note="up to date")
        _refresh_index(store, cfg)
        out.print("[green]Everything is up to date; nothing to compute.[/green]")
        server.stop()
        return store, {step.stage: step.key for step in steps if step.action == "cached"}
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "tasks,storage")
    from flows.interrupts import interruptible
    from flows.output import quiet_prefect_notices
    from flows.pipeline import pipeline_flow
    from flows.runners import make_task_runner
    from tasks.stop import Interrupted

    quiet_prefect_notices()

    flow = pipeline_flow.with_options(task_runner=make_task_runner(cfg.settings))
    _one_line_data_errors()
    try:
        with server.connected(), interruptible():
            keys = flow(config_path=str(config), only=only, from_stage=from_stage, force=list(force), root=root)
    except Interrupted as exc:
        raise stopped(exc) from None
    except Exception as exc:  # noqa: BLE001 - the user gets one line; --verbose shows the traceback
        if os.environ.get("XLEMBED_DEBUG"):
            raise
        raise fail(f"run failed: {_one_line(exc, cfg.settings.root)}") from None
    finally:
        server.stop()
    table = Table(title="artifacts", title_justify="left")
    for column in ("stage", "key", "rows in", "rows out", "dropped"):
        table.add_column(column, justify="right" if column.startswith(("rows", "dropped")) else "left")
    for stage, key in keys.items():
        m = store.manifest(stage, key)
        table.add_row(stage, key[:12], f"{m.rows_in:,}", f"{m.rows_out:,}", f"{sum(m.dropped.values()):,}")
    out.print(table)
    for stage, key in keys.items():  # whole, one per line: the part a user copies
        out.print(f"{stage}: {store.uri(stage, key)}", highlight=False, markup=False)
    return store, keys


@app.command()
def run(config: ConfigArg, only: OnlyOpt = None, from_stage: FromOpt = None, force: ForceOpt = [], root: RootOpt = None) -> None:  # noqa: B006
    """Build every stale stage (or only some, with --only/--from), as a Prefect flow run."""
    cfg = _load(config, root)
    store, keys = _execute(cfg, config, only, from_stage, force, root)
    if "evaluate" in keys:
        _print_evaluation(store, keys["evaluate"])


@app.command()
def evaluate(config: ConfigArg, force: Annotated[bool, typer.Option("--force", help="re-evaluate even if cached")] = False, root: RootOpt = None) -> None:
    """Evaluate the pipeline's model (building what it needs) and print the scores and the report's location."""
    cfg = _load(config, root)
    if "evaluate" not in cfg.stages:
        raise fail(f"{config}: no [evaluate] section", 2)
    store, keys = _execute(cfg, config, "evaluate", None, ["evaluate"] if force else [], root)
    _print_evaluation(store, keys["evaluate"])


def _print_evaluation(store: Any, key: str) -> None:
    import polars as pl

    from tasks.evaluate.stage import main_metric_rows

    main = main_metric_rows(store.read_table("evaluate", key))  # each benchmark's main metric
    with out.frame_config(60):
        out.print(str(main.select("benchmark", "dataset", "src_lang", "tgt_lang", "metric", pl.col("value").round(4), "n")), markup=False, highlight=False)
    manifest = store.manifest("evaluate", key)
    report = next((f.path for f in manifest.attached_files if f.path.endswith("report.html")), None)
    if report:
        out.print(f"report: {store.uri('evaluate', key)}/{report}", highlight=False, markup=False)


# --------------------------------------------------------------------- sweeps
def _sweep_table(plan: Any) -> Table:
    """A row per variant, a column per stage: cached / compute (and shared when variants share it)."""
    users = plan.users()
    stages = list(dict.fromkeys(s.stage for v in plan.variants for s in v.steps if s.action != "skip"))
    table = Table(title=f"sweep {plan.grid.name}", title_justify="left")
    for column in ("variant", *stages, "cached", "compute"):
        table.add_column(column)
    counts = plan.counts()["variants"]
    for vplan in plan.variants:
        cells = {}
        for step in vplan.steps:
            if step.action == "skip":
                continue
            shared = len(users[(step.stage, step.key)]) > 1
            colour = "green" if step.action == "cached" else "yellow"
            cells[step.stage] = Text.assemble((step.action, colour), f" {step.key[:8]}", (" (shared)", "dim") if shared and step.action == "compute" else "")
        n = counts[vplan.variant.name]
        table.add_row(Text(vplan.variant.name), *(cells.get(s, "") for s in stages), str(n["cached"]), str(n["compute"]))
    return table


def _sweep(config: Path, grid_path: Path, baseline: str | None, root: str | None, *, dry_run: bool) -> None:
    import tempfile

    from flows.server import TemporaryServer
    from flows.stages import stage_registry
    from flows.sweep import load_grid, plan_sweep, run_variants, write_report
    from storage import ArtifactStore, StoreError

    cfg = _load(config, root)
    server = TemporaryServer() if dry_run else TemporaryServer.start_early()  # starts while the sweep plans
    try:
        grid = load_grid(grid_path, config=config)
        grid.check_baseline(baseline)
        store = ArtifactStore(cfg.settings.root)
        with tempfile.TemporaryDirectory(prefix="xlembed-sweep-") as workdir:
            sweep_plan = plan_sweep(config, grid, store, stage_registry(), root=root, workdir=Path(workdir))
            counts = sweep_plan.counts()
            out.print(_sweep_table(sweep_plan))
            out.print(
                f"{len(sweep_plan.variants)} variants; {len(sweep_plan.distinct())} distinct stage runs: "
                f"{counts['distinct_cached']} cached, {counts['distinct_compute']} to compute "
                f"({counts['compute_without_sharing']} without sharing)",
                highlight=False,
            )
            _print_plan_notes(sweep_plan)
            if dry_run:
                return
            if counts["distinct_compute"] == 0:  # nothing to build: refs and report only, no flow run
                report = write_report(sweep_plan, store, run_variants(sweep_plan, store, None), baseline=baseline)
                _refresh_index(store, cfg)
                out.print("[green]Every variant is up to date; nothing to compute.[/green]")
                _print_sweep_report(report)
                server.stop()
                return
    except (ConfigError, ValueError, StoreError, FileNotFoundError) as exc:
        server.stop()
        raise fail(str(exc), 2) from None
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "tasks,storage")
    from flows.interrupts import interruptible
    from flows.output import quiet_prefect_notices
    from flows.runners import make_task_runner
    from flows.sweep import sweep_dir, sweep_flow
    from tasks.stop import Interrupted

    quiet_prefect_notices()

    flow = sweep_flow.with_options(task_runner=make_task_runner(cfg.settings))
    _one_line_data_errors()
    try:
        with server.connected(), interruptible():
            flow(config_path=str(config), grid_path=str(grid_path), baseline=baseline, root=root)
    except Interrupted as exc:
        raise stopped(exc) from None
    except Exception as exc:  # noqa: BLE001 - the user gets one line; --verbose shows the traceback
        if os.environ.get("XLEMBED_DEBUG"):
            raise
        raise fail(f"sweep failed: {_one_line(exc, cfg.settings.root)} (report, if any: {sweep_dir(store, grid.name)}/report.md)") from None
    finally:
        server.stop()
    out.print(f"report: {store.root_uri}/sweeps/{grid.name}/report.html", highlight=False)


def _print_sweep_report(report: Any) -> None:
    from rich.markdown import Markdown

    out.print(Markdown(report.markdown))
    out.print(f"report: {report.uri.removesuffix('.md')}.html", highlight=False)


@app.command()
def sweep(
    config: ConfigArg,
    grid: Annotated[Path, typer.Option("--grid", help="grid TOML: overrides of dotted config keys (docs/experiments.md)", show_default=False)],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the variants and what would compute; compute nothing")] = False,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="variant (or seed group) the report compares with; default: the grid's")] = None,
    root: RootOpt = None,
) -> None:
    """Run every variant of a grid over one pipeline config: shared artifacts are built once; one comparison report."""
    _sweep(config, grid, baseline, root, dry_run=dry_run)


# --------------------------------------------------------------------- align
@app.command()
def align(
    config: ConfigArg,
    gold: Annotated[Path, typer.Option("--gold", help="Pharaoh gold links, one line per pair: i-j sure, i?j or ipj possible")],
    src: Annotated[Path, typer.Option("--src", help="source sentences, one per line, tokens separated by spaces")],
    tgt: Annotated[Path, typer.Option("--tgt", help="target sentences, line-aligned with --src")],
    src_lang: Annotated[str, typer.Option("--src-lang", help="language of --src")] = "eng_Latn",
    tgt_lang: Annotated[str, typer.Option("--tgt-lang", help="language of --tgt")] = "fra_Latn",
    zero_based: Annotated[bool, typer.Option("--zero-based", help="gold indices start at 0 (default: 1)")] = False,
    train_src: Annotated[Optional[Path], typer.Option("--train-src", help="extra parallel source text, for a backend that learns from it (eflomal)")] = None,
    train_tgt: Annotated[Optional[Path], typer.Option("--train-tgt", help="extra parallel target text, line-aligned with --train-src")] = None,
    examples: Annotated[int, typer.Option("--examples", min=0, help="aligned examples to print")] = 2,
    root: RootOpt = None,
) -> None:
    """Score the backend of the config's align section against gold word alignments: AER, precision, recall, F1."""
    from tasks.align.gold import GoldInputError, score_gold_set

    cfg = _load(config, root)
    if "align" not in cfg.stage_configs:
        raise fail(f"{config}: no [align] section", 2)

    def base_model() -> Path:  # built (or found cached) only when the backend reads it
        store, keys = _execute(cfg, config, "base_model", None, [], root)
        return store.attached_dir("base_model", keys["base_model"])

    try:
        result = score_gold_set(
            cfg.stage_configs["align"],
            gold,
            src,
            tgt,
            (src_lang, tgt_lang),
            zero_based=zero_based,
            train=(train_src, train_tgt),
            base_model=base_model if "base_model" in cfg.stage_configs else None,
        )
    except GoldInputError as exc:
        raise fail(str(exc), 2) from None
    scores = result.scores
    table = Table(title=f"{result.label} on {gold}", title_justify="left")
    for column in ("pairs", "AER", "precision", "recall", "F1", "links", "sure", "possible"):
        table.add_column(column, justify="right")
    table.add_row(str(scores.pairs), f"{scores.aer:.4f}", f"{scores.precision:.4f}", f"{scores.recall:.4f}", f"{scores.f1:.4f}", str(scores.predicted), str(scores.sure), str(scores.possible))
    out.print(table)
    for n in range(min(examples, len(result.predicted))):
        pairs = " ".join(f"{result.src[n][i]}={result.tgt[n][j]}" for i, j in sorted(result.predicted[n]))
        out.print(f"{n + 1}: {pairs}", highlight=False, markup=False)


# --------------------------------------------------------------------- artifacts
def _store(root: str, *, must_exist: bool = True) -> Any:
    """The store at `root`, reached once: a root that does not exist is an error for commands
    that read (`must_exist`); one that cannot be reached is one line naming the fix."""
    from storage import ArtifactStore, StoreAccessError, StoreError

    try:
        store = ArtifactStore(root, create=not must_exist)
        store.check_root(must_exist=must_exist)
        return store
    except StoreAccessError as exc:
        raise fail(str(exc), 1) from None
    except StoreError as exc:
        raise fail(str(exc), 2) from None


def _age(created_at: str) -> str:
    from storage.index import format_age

    return format_age(created_at)


def _size(n: int) -> str:
    from storage.index import format_size

    return format_size(n)


def _known_stage(store: Any, stage: str) -> str:
    """A stage name given on the command line must name a stage present in the store."""
    stages = store.stages()
    if stage not in stages:
        raise fail(f"no stage {stage!r} in {store.root_uri}; stages there: {', '.join(stages) or 'none'}", 2)
    return stage


def _resolve(store: Any, stage: str, key: str | None, pipeline: str | None) -> str:
    from storage import StoreError

    _known_stage(store, stage)
    try:
        if key:
            return store.resolve(stage, key)
        refs = [r for r in store.list_refs() if r.stage == stage and (pipeline is None or r.pipeline == pipeline)]
        if pipeline is not None and not refs:
            pipelines = sorted({r.pipeline for r in store.list_refs() if r.stage == stage})
            raise fail(f"--pipeline {pipeline}: no ref {pipeline}/{stage}; pipelines with a {stage} ref: {', '.join(pipelines) or 'none'}", 2)
        if len({r.key for r in refs}) != 1:
            raise fail(f"give a KEY (or --pipeline): {len(refs)} refs point at {stage} artifacts", 2)
        return refs[0].key
    except StoreError as exc:
        raise fail(str(exc), 2) from None


def _resolve_artifact(store: Any, artifact: str, pipeline: str | None) -> tuple[str, str]:
    """ARTIFACT on the command line: a stage name (its ref; the latest one when several
    pipelines have one) or a key or unique key prefix of any stage."""
    from storage import StoreError

    stages = store.stages()
    if artifact in stages:
        refs = [r for r in store.list_refs() if r.stage == artifact]
        if pipeline is not None or len({r.key for r in refs}) <= 1:
            return artifact, _resolve(store, artifact, None, pipeline) if refs or pipeline else _no_ref(store, artifact)
        latest = max(refs, key=lambda r: r.history[0].at if r.history else "")
        return artifact, latest.key
    found = []
    for stage in stages:
        try:
            found.append((stage, store.resolve(stage, artifact)))
        except StoreError:
            continue
    if len(found) != 1:
        what = f"is ambiguous: {', '.join(f'{s} {k[:12]}' for s, k in found)}" if found else "names no stage and no artifact key"
        raise fail(f"{artifact!r} {what} in {store.root_uri} (stages: {', '.join(stages) or 'none'})", 2)
    return found[0]


def _no_ref(store: Any, stage: str) -> str:
    raise fail(f"no ref points at a {stage} artifact in {store.root_uri}; give its key (xlembed artifacts ls {stage})", 2)


@artifacts_app.command("ls")
def artifacts_ls(stage: Annotated[Optional[str], typer.Argument(help="only this stage")] = None, root: StoreRootOpt = "artifacts") -> None:
    """List committed artifacts with rows, size, age and the refs pointing at them."""
    store = _store(root)
    refs: dict[tuple[str, str], list[str]] = {}
    for ref in store.list_refs():
        refs.setdefault((ref.stage, ref.key), []).append(ref.pipeline)
    table = Table(title=f"artifacts in {store.root_uri}", title_justify="left")
    for column in ("stage", "key", "rows", "size", "age", "refs"):
        table.add_column(column, justify="right" if column in ("rows", "size", "age") else "left")
    if stage is not None:
        _known_stage(store, stage)
    damaged: list[Any] = []
    manifests = store.list_manifests(stage, damaged=damaged)
    for m in manifests:
        table.add_row(m.stage, m.key[:12], f"{m.rows_out:,}", _size(m.total_bytes), _age(m.created_at), ", ".join(refs.get((m.stage, m.key), [])))
    for item in damaged:
        table.add_row(item.stage, item.key[:12], Text("damaged", style="red"), "", "", ", ".join(refs.get((item.stage, item.key), [])))
    out.print(table)
    for item in damaged:
        err.print(Text(f"damaged: {item.problem}"), highlight=False)
    if not manifests and not damaged:
        err.print("no artifacts")


@artifacts_app.command("show")
def artifacts_show(
    stage: str,
    key: Annotated[Optional[str], typer.Argument(help="key or unique prefix; default: what the ref points to")] = None,
    pipeline: Annotated[Optional[str], typer.Option(help="take the key from this pipeline's ref")] = None,
    rows: Annotated[int, typer.Option("--rows", "-n", min=0, help="first rows to print")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="print the whole manifest as JSON instead (config, files, checksums)")] = False,
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
    refs = [f"{r.pipeline}" for r in store.list_refs() if r.stage == m.stage and r.key == m.key]
    drops = ", ".join(f"{reason} {n:,}" for reason, n in sorted(m.dropped.items(), key=lambda kv: -kv[1]))
    attached = m.attached_files
    lines = [
        f"{m.stage} {m.key}",
        f"  uri       {store.uri(m.stage, m.key)}",
        f"  created   {m.created_at} ({_age(m.created_at)} ago), {m.wall_time_s:.1f} s; code {m.code_version}, xlembed {m.package_version}",
        f"  rows      {m.rows_in:,} in, {m.rows_out:,} out" + (f"; dropped {drops}" if drops else ""),
        f"  files     {len(m.files)} ({_size(m.total_bytes)}): {len(m.table_files)} Parquet, {len(attached)} attached",
    ]
    if m.columns:
        lines.append("  columns   " + ", ".join(f"{c.name} ({c.type})" for c in m.columns))
    if m.input_keys:
        lines.append("  inputs    " + ", ".join(f"{name} {k[:12]}" for name, k in m.input_keys.items()))
    scalars = {k: v for k, v in m.metrics.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
    if scalars:
        lines.append("  metrics   " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in list(scalars.items())[:8]))
    if refs:
        lines.append("  refs      " + ", ".join(refs))
    lines.append(f"  config, files and checksums: xlembed artifacts show {m.stage} {m.key[:12]} --json")
    return lines


@artifacts_app.command("head")
def artifacts_head(
    stage: str,
    key: Annotated[Optional[str], typer.Argument(help="key or unique prefix; default: what the ref points to")] = None,
    pipeline: Annotated[Optional[str], typer.Option(help="take the key from this pipeline's ref")] = None,
    rows: Annotated[int, typer.Option("--rows", "-n", min=1, help="rows to print")] = 10,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Print the first rows of a Parquet artifact (streamed: nothing else is read)."""
    import polars as pl

    store = _store(root)
    full = _resolve(store, stage, key, pipeline)
    batch = next(iter(store.iter_batches(stage, full, batch_size=max(rows, 1))), None)
    if batch is None:
        raise fail(f"{stage}/{full[:12]} has no table rows (an artifact of attached files only?)")
    with out.frame_config(rows):
        out.print(str(pl.from_arrow(batch).head(rows)), highlight=False, markup=False)


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

    from storage.keys import KEY_SCHEME, KEY_SCHEMES
    from storage.lineage import flatten

    head = Text.assemble((f"{via}: " if via and via != node.stage else "", "dim"), (node.stage, "bold"), " ", (node.key[:12], "cyan"))
    if node.missing:
        head.append("  missing from the store (collected?)", style="red")
    elif (node.stage, node.key) in seen:
        head.append("  (shown above)", style="dim")
    else:
        m = node.manifest
        head.append(f"  created {m.created_at} ({_age(m.created_at)} ago) · code {m.code_version} · xlembed {m.package_version} · ", style="dim")
        head.append(f"key scheme {m.key_scheme} ({KEY_SCHEMES.get(m.key_scheme, 'unknown')})", style="dim" if m.key_scheme == KEY_SCHEME else "yellow")
        head.append(f" · {m.rows_out:,} rows · {_size(m.total_bytes)}", style="dim")
    branch = tree.add(head) if tree is not None else Tree(head)
    if node.missing or (node.stage, node.key) in seen:
        return branch
    seen.add((node.stage, node.key))
    changes = record.get("config_changes")
    if "config_changes" in record and changes is None:
        title = Text.assemble("config ", ("(stage not in --config)", "yellow"))
    elif changes:
        title = Text.assemble("config ", (f"({len(changes)} {'differs' if len(changes) == 1 else 'differ'} from --config: marked ≠)", "yellow"))
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
    config: Annotated[Optional[Path], typer.Option("--config", help="pipeline config TOML to compare each artifact's config with")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the tree as JSON")] = False,
    root: StoreRootOpt = "artifacts",
) -> None:
    """The tree of artifacts this one was built from: keys, configs, sources, creation time, code version."""
    import json

    from storage.lineage import lineage, node_record
    from tasks.stage import keyed_config

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
    sql: Annotated[str, typer.Argument(help="SQL; tables: STAGE (what its ref points to) or STAGE@KEY (a key or prefix), e.g. \"SELECT lang, count(*) FROM corpus GROUP BY lang\"", show_default=False)],
    pipeline: Annotated[Optional[str], typer.Option(help="take STAGE's key from this pipeline's ref")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="rows to print (--output writes them all)")] = 20,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="write the whole result to FILE.parquet or FILE.csv (streamed)")] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """SQL over artifacts by stage name, read lazily from the store (local or s3://) with polars."""
    import polars as pl

    from storage import StoreError
    from storage.query import QueryError, collect_error, s3_storage_options, scan_artifact, sql_query

    if output is not None and output.suffix.lower() not in (".parquet", ".csv"):
        raise fail(f"--output {output}: write .parquet or .csv", 2)
    store = _store(root)
    options = None if store.is_local else s3_storage_options(store)
    committed = set(store.stages())

    def named(name: str) -> Any:
        if name not in committed:
            return None
        return scan_artifact(store, name, _resolve(store, name, None, pipeline), options)

    def versioned(mention: Any) -> Any:
        if mention.stage not in committed:
            raise fail(f"unknown stage {mention.stage!r} in {mention.stage}@{mention.key}; stages: {', '.join(sorted(committed)) or 'none'}", 2)
        return scan_artifact(store, mention.stage, _resolve(store, mention.stage, mention.key, None), options)

    def available() -> list[str]:
        refs = [r for r in store.list_refs() if r.stage in committed and (pipeline is None or r.pipeline == pipeline)]
        return sorted({r.stage for r in refs if store.is_committed(r.stage, r.key) and store.manifest(r.stage, r.key).table_files})

    try:
        result = sql_query(sql, named, versioned, available)
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            (result.sink_parquet if output.suffix.lower() == ".parquet" else result.sink_csv)(output)
            rows = pl.scan_parquet(output).select(pl.len()).collect().item() if output.suffix.lower() == ".parquet" else pl.scan_csv(output).select(pl.len()).collect().item()
            out.print(f"wrote {rows:,} rows to {output}", highlight=False, markup=False)
            return
        shown = result.head(limit + 1).collect(engine="streaming")
    except QueryError as exc:
        raise fail(str(exc), 2) from None
    except StoreError:
        raise
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise fail(str(collect_error(exc, options))) from None
    more = shown.height > limit
    with out.frame_config(limit, str_lengths=80):
        out.print(str(shown.head(limit)), highlight=False, markup=False)
    if more:
        err.print(f"first {limit} rows shown; --limit N shows more, --output FILE.parquet writes them all", highlight=False)


@artifacts_app.command("index")
def artifacts_index(
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="write the page here instead of ROOT/index.html (links stay relative to it)")] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Write a static HTML page (index.html in the root) listing pipelines, refs, versions, reports and figures."""
    from flows.sweep import SWEEPS_DIR
    from storage.index import INDEX_FILE, build_index, write_index

    store = _store(root)
    if output is None:
        page = write_index(store, reports_dir=SWEEPS_DIR)
        where = f"{store.root_uri}/{INDEX_FILE}"
    else:
        if output.suffix.lower() not in (".html", ".htm"):
            output = output / INDEX_FILE
        output = output.expanduser().resolve()
        if store.is_local:
            base = os.path.relpath(store.root_uri, output.parent).replace(os.sep, "/")
            link_base = "" if base == "." else f"{base}/"
        else:  # a local page over a remote store: absolute links, which a browser may not open
            link_base = f"{store.root_uri}/"
        page = build_index(store, link_base=link_base, reports_dir=SWEEPS_DIR)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(page.html, encoding="utf-8")
        where = str(output)
    out.print(f"{where}: {page.artifacts} artifacts, {len(page.links)} links", highlight=False, markup=False, soft_wrap=True)


def _transfer(source_root: str, destination_root: str, stage: str | None, key: str | None, refs: bool) -> None:
    from storage.transfer import copy_artifact, copy_refs

    source, destination = _store(source_root), _store(destination_root, must_exist=False)
    if stage is not None:
        _known_stage(source, stage)
    if key and stage:
        targets = [(stage, _resolve(source, stage, key, None))]
    else:
        targets = [(m.stage, m.key) for m in source.list_manifests(stage)]
    copied = 0
    for name, full in targets:
        result = copy_artifact(source, destination, name, full)
        copied += result.copied
        out.print(f"{'copied ' if result.copied else 'present'} {name}/{full[:12]}  {result.files} files, {_size(result.bytes)}", highlight=False)
    written = copy_refs(source, destination) if refs else 0
    out.print(f"{copied} of {len(targets)} artifacts copied (checksums verified), {written} refs written to {destination.root_uri}", highlight=False)


@artifacts_app.command("pull")
def artifacts_pull(
    remote: Annotated[str, typer.Argument(help="the root to copy from, e.g. s3://bucket/prefix")],
    stage: Annotated[Optional[str], typer.Argument(help="only this stage")] = None,
    key: Annotated[Optional[str], typer.Argument(help="only this key (or unique prefix)")] = None,
    refs: Annotated[bool, typer.Option(help="also copy the refs that point at copied artifacts")] = True,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Copy artifacts (and their refs) from REMOTE into the local root, verifying checksums."""
    _transfer(remote, root, stage, key, refs)


@artifacts_app.command("push")
def artifacts_push(
    remote: Annotated[str, typer.Argument(help="the root to copy to, e.g. s3://bucket/prefix")],
    stage: Annotated[Optional[str], typer.Argument(help="only this stage")] = None,
    key: Annotated[Optional[str], typer.Argument(help="only this key (or unique prefix)")] = None,
    refs: Annotated[bool, typer.Option(help="also copy the refs that point at copied artifacts")] = True,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Copy artifacts (and their refs) from the local root to REMOTE, verifying checksums."""
    _transfer(root, remote, stage, key, refs)


@artifacts_app.command("diff")
def artifacts_diff(stage: str, key_a: str, key_b: str, root: StoreRootOpt = "artifacts") -> None:
    """Differences between two versions of a stage: config, code, inputs, rows and drops."""
    from flows.plan import config_changes

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


@artifacts_app.command("verify")
def artifacts_verify(
    stage: Annotated[Optional[str], typer.Argument(help="only this stage")] = None,
    key: Annotated[Optional[str], typer.Argument(help="only this key (or unique prefix)")] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Re-hash files against their manifests and check that every ref points at a committed
    artifact. Exit 1 if anything is missing, damaged or corrupt."""
    from storage import DamagedArtifact

    store = _store(root)
    if stage is not None:
        _known_stage(store, stage)
    damaged: list[DamagedArtifact] = []
    if key and stage:
        targets = [(stage, _resolve(store, stage, key, None))]
    else:
        targets = [(m.stage, m.key) for m in store.list_manifests(stage, damaged=damaged)]
    bad = 0
    for item in damaged:
        bad += 1
        out.print(Text.assemble(("DAMAGED", "red"), f" {item.stage}/{item.key[:12]}"), highlight=False)
        out.print(f"    {item.problem}", highlight=False, markup=False)
    broken_refs = 0
    for ref in store.list_refs():
        if (stage is None or ref.stage == stage) and not store.is_committed(ref.stage, ref.key):
            broken_refs += 1
            out.print(Text.assemble(("BROKEN REF", "red"), f" refs/{ref.pipeline}/{ref.stage} -> {ref.key[:12]}: no committed artifact (deleted?)"), highlight=False)
    for name, full in targets:
        problems = store.verify(name, full)
        if problems:
            bad += 1
            out.print(f"[red]CORRUPT[/red] {name}/{full[:12]}")
            for problem in problems:
                out.print(f"    {problem}", highlight=False, markup=False)
        else:
            out.print(f"[green]ok[/green]      {name}/{full[:12]}")
    total = len(targets) + len(damaged)
    if bad or broken_refs:
        problems = [f"{bad} of {total} artifacts failed verification"] if bad else []
        if broken_refs:
            problems.append(f"{broken_refs} ref(s) point at missing artifacts (rerun the pipeline, or `xlembed artifacts rollback PIPELINE STAGE`)")
        raise fail("; ".join(problems))
    out.print(f"{total} artifacts verified, and the refs")


@artifacts_app.command("gc")
def artifacts_gc(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="really delete (default: dry run)")] = False,
    keep_history: Annotated[bool, typer.Option(help="also keep what refs pointed to before")] = False,
    include_partial: Annotated[bool, typer.Option(help="also delete uncommitted (interrupted) artifacts; not while a run is active")] = False,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Remove artifacts no ref points to. A dry run unless --yes."""
    store = _store(root)
    doomed = store.garbage(keep_history=keep_history, include_partial=include_partial)
    for stage, key in doomed:
        out.print(f"{'delete' if yes else 'would delete'} {stage}/{key[:12]}")
        if yes:
            store.delete(stage, key)
    if not doomed:
        out.print("nothing to collect")
    elif not yes:
        out.print(f"{len(doomed)} artifacts; run again with --yes to delete them")


@artifacts_app.command("refs")
def artifacts_refs(root: StoreRootOpt = "artifacts") -> None:
    """List named refs (pipeline/stage -> key) with how many versions each has had."""
    store = _store(root)
    table = Table(title="refs", title_justify="left")
    for column in ("pipeline", "stage", "key", "versions", "since"):
        table.add_column(column)
    for ref in store.list_refs():
        table.add_row(ref.pipeline, ref.stage, ref.key[:12], str(len(ref.history)), ref.history[0].at if ref.history else "")
    out.print(table)


ROLLBACK_NOTE = "rollback from "


def _ref_versions(ref: Any) -> list[Any]:
    """The versions a ref was set to by runs (rollbacks left out), newest first: version 0 is
    the latest build, -1 the one before, and so on."""
    return [h for h in ref.history if not h.note.startswith(ROLLBACK_NOTE)]


def _ref_position(ref: Any, versions: list[Any]) -> int:
    """Where in `versions` the ref stands now: a rollback records its target's index."""
    import re

    head = ref.history[0] if ref.history else None
    if head is not None and head.note.startswith(ROLLBACK_NOTE):
        found = re.search(r"\(version -(\d+)\)", head.note)
        if found and int(found.group(1)) < len(versions) and versions[int(found.group(1))].key == ref.key:
            return int(found.group(1))
    return next((i for i, v in enumerate(versions) if v.key == ref.key), 0)


@artifacts_app.command("rollback")
def artifacts_rollback(
    pipeline: Annotated[str, typer.Argument(help="the pipeline whose ref moves (its [pipeline] name)")],
    stage: Annotated[str, typer.Argument(help="the stage whose ref moves")],
    to: Annotated[Optional[str], typer.Option("--to", help="move to this key (or unique prefix)")] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, help="versions to go back from where the ref is now")] = 1,
    list_versions: Annotated[bool, typer.Option("--list", help="list the ref's versions (0: the latest build, -1 the one before, ...) and move nothing")] = False,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Move a ref back through the versions runs set it to: each rollback goes one version further back
    (--steps N: N versions), --to KEY picks one, --list shows them. Nothing is deleted."""
    store = _store(root)
    ref = store.read_ref(pipeline, stage)
    if ref is None:
        known = sorted(f"{r.pipeline}/{r.stage}" for r in store.list_refs())
        raise fail(f"no ref {pipeline}/{stage} in {store.root_uri}; refs: {', '.join(known) or 'none'}", 2)
    versions = _ref_versions(ref)
    position = _ref_position(ref, versions)
    if list_versions:
        for index, entry in enumerate(versions):
            mark = "*" if index == position and entry.key == ref.key else " "
            out.print(f"{mark} {-index:>4}  {entry.key[:12]}  {entry.at}  {entry.note}", highlight=False, markup=False)
        out.print("* where the ref is now", highlight=False, markup=False)
        return
    if to:
        target = _resolve(store, stage, to, None)
        index = next((i for i, v in enumerate(versions) if v.key == target), None)
    else:
        index = position + steps
        if index >= len(versions):
            raise fail(f"{pipeline}/{stage} has no earlier version {-index}: it is at version {-position}, the oldest is {-(len(versions) - 1)} (see --list)", 2)
        target = versions[index].key
        if not store.is_committed(stage, target):
            raise fail(f"version {-index} of {pipeline}/{stage} ({target[:12]}) is no longer in the store (collected by gc?); pick one with --to KEY (see --list)", 2)
    where = f" (version -{index})" if index is not None else ""
    store.set_ref(pipeline, stage, target, note=f"{ROLLBACK_NOTE}{ref.key[:12]}{where}")
    out.print(f"{pipeline}/{stage}: {ref.key[:12]} -> {target[:12]}", highlight=False)
    if index is not None:
        built = versions[index].at
        further = "; `rollback` again goes one further back" if index + 1 < len(versions) else "; this is the oldest version"
        out.print(f"now at version -{index} of {len(versions)} (set {built}){further}; `--list` shows them all", highlight=False, markup=False)


# --------------------------------------------------------------------- deployments
DeployConfigOpt = Annotated[Path, typer.Option("--config", "-c", help="pipeline config TOML; runs read it at this (absolute) path", show_default=False)]
CronOpt = Annotated[str, typer.Option("--cron", help="when the rebuild runs (cron; a 6th field means seconds)")]
TimezoneOpt = Annotated[str, typer.Option("--timezone", help="IANA timezone of the cron schedule")]
IntervalOpt = Annotated[Optional[float], typer.Option("--interval", min=1, help="rebuild every N seconds instead of --cron")]
NoScheduleOpt = Annotated[bool, typer.Option("--no-schedule", help="register the rebuild deployment without a schedule")]


def _deployment_spec(config: Path, root: str | None, cron: str, timezone: str, interval: float | None, no_schedule: bool, paused: bool = False) -> Any:
    from flows.deployments import DeploymentSpec

    _load(config, root)  # a bad config fails here, not at 3 a.m. on a worker
    if not no_schedule and interval is None:
        from prefect.schedules import Cron

        try:
            Cron(cron, timezone=timezone)
        except ValueError as exc:
            raise fail(f"--cron/--timezone: {exc}", 2) from None
    return DeploymentSpec(
        config_path=str(config.expanduser().resolve()),
        root=root,
        cron=None if no_schedule else cron,
        timezone=timezone,
        interval_s=None if no_schedule else interval,
        paused=paused,
    )


def _schedule_text(spec: Any) -> str:
    if spec.interval_s is not None:
        return f"every {spec.interval_s:g} s"
    return f"cron {spec.cron} ({spec.timezone})" if spec.cron else "none"


@app.command()
def deploy(
    config: DeployConfigOpt,
    pool: Annotated[str, typer.Option("--pool", envvar="XLEMBED_WORK_POOL", help="work pool whose workers run the flows (created as a process pool if missing)")] = "xlembed",
    cron: CronOpt = "0 3 * * *",
    timezone: TimezoneOpt = "UTC",
    interval: IntervalOpt = None,
    no_schedule: NoScheduleOpt = False,
    paused: Annotated[bool, typer.Option("--paused", help="register the schedule paused")] = False,
    create_pool: Annotated[bool, typer.Option(help="create the work pool (type process) if it does not exist")] = True,
    root: RootOpt = None,
) -> None:
    """Register the pipeline's deployments on the Prefect server (PREFECT_API_URL) for a work pool.

    xlembed-rebuild: the scheduled rebuild of every stale stage. xlembed-stage: on demand, with
    parameters only / from_stage / force, e.g.

    \b
      prefect deployment run 'xlembed-pipeline/xlembed-stage' -p only=align
    """
    from flows.deployments import FLOW_NAME, REBUILD, STAGE, DeploymentError, deploy as register, require_server

    spec = _deployment_spec(config, root, cron, timezone, interval, no_schedule, paused)
    try:
        url = require_server()
    except DeploymentError as exc:
        raise fail(str(exc), 2) from None
    try:
        ids = register(spec, pool, create_pool=create_pool)
    except DeploymentError as exc:
        raise fail(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - an unreachable or failing server: one line
        if os.environ.get("XLEMBED_DEBUG"):
            raise
        raise fail(f"Prefect server at {url}: {type(exc).__name__}: {exc}") from None
    table = Table(title=f"deployments on {url} (work pool {pool})", title_justify="left")
    for column in ("deployment", "schedule", "id"):
        table.add_column(column, no_wrap=column != "schedule")
    table.add_row(f"{FLOW_NAME}/{REBUILD}", Text(_schedule_text(spec) + (" [paused]" if paused else "")), str(ids[REBUILD]))
    table.add_row(f"{FLOW_NAME}/{STAGE}", "on demand", str(ids[STAGE]))
    out.print(table)
    out.print(Text(f"config {spec.config_path}" + (f", artifact root {root}" if root else "")), highlight=False, soft_wrap=True)
    out.print(f"start a worker:  prefect worker start --pool {pool} --type process", highlight=False, markup=False, soft_wrap=True)
    out.print(f"run one stage:   prefect deployment run '{FLOW_NAME}/{STAGE}' -p only=STAGE", highlight=False, markup=False, soft_wrap=True)


@app.command()
def serve(
    config: DeployConfigOpt,
    cron: CronOpt = "0 3 * * *",
    timezone: TimezoneOpt = "UTC",
    interval: IntervalOpt = None,
    no_schedule: NoScheduleOpt = False,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="flow runs at once (default: no limit)")] = None,
    root: RootOpt = None,
) -> None:
    """Serve the pipeline's deployments from this process until Ctrl-C: no worker or work pool needed.

    Registers xlembed-rebuild (scheduled) and xlembed-stage (on demand) on the Prefect server
    (PREFECT_API_URL) and runs their flow runs here. Schedules are paused when it stops.
    """
    from flows.deployments import DeploymentError, require_server
    from flows.deployments import serve as serve_deployments

    spec = _deployment_spec(config, root, cron, timezone, interval, no_schedule)
    try:
        require_server()
    except DeploymentError as exc:
        raise fail(str(exc), 2) from None
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "tasks,storage")
    serve_deployments(spec, limit=limit)


# ------------------------------------------------------------------------ export
@app.command("export")
def export(
    artifact: Annotated[str, typer.Argument(metavar="ARTIFACT", help="key or unique key prefix, or a stage name (train, corpus, ...): the artifact its newest ref points to", show_default=False)],
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="new or empty folder to write", show_default=False)],
    push: Annotated[Optional[str], typer.Option("--push", metavar="REPO_ID", help="also upload DIR to this Hugging Face model or dataset repo (token: HF_TOKEN or `hf auth login`)")] = None,
    private: Annotated[bool, typer.Option("--private", help="with --push: create the repo private")] = False,
    drop_language_embedding: Annotated[bool, typer.Option("--drop-language-embedding", help="model: export one trained with language_embedding = true without it (refused otherwise)")] = False,
    layout: Annotated[str, typer.Option(help="dataset: multiway, pairs or both (one row per group, and/or one config per language paired with --pivot)")] = "both",
    pivot: Annotated[Optional[str], typer.Option(metavar="LANG", help="dataset: the language pairs are made with; default: translate's source language, else the one with most rows")] = None,
    pipeline: Annotated[Optional[str], typer.Option(help="take the key from this pipeline's ref")] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Copy an artifact out of the store in the form its users load, with its card.

    A train artifact is a sentence-transformers model folder with a model card (the card of its
    newest evaluation); an evaluate artifact exports the model it scored with that evaluation's
    card (docs/train.md, "Publishing a model"). A corpus or translate artifact is a Hugging Face
    dataset: Parquet configs and a dataset card (docs/translate.md, "Publishing a corpus").
    """
    store = _store(root)
    stage, key = _resolve_artifact(store, artifact, pipeline)
    if stage in ("train", "evaluate"):
        _export_model(store, stage, key, directory, push=push, private=private, drop_language_embedding=drop_language_embedding)
    elif stage in ("corpus", "translate"):
        _export_dataset(store, stage, key, directory, push=push, private=private, layout=layout, pivot=pivot)
    else:
        raise fail(f"cannot export a {stage} artifact: export takes a model (train, evaluate) or a dataset (corpus, translate)", 2)


def _export_dataset(store: Any, stage: str, key: str, folder: Path, *, push: str | None, private: bool, layout: str, pivot: str | None) -> None:
    from tasks.corpus.publish import ExportError, export_dataset, push_dataset

    if layout not in ("multiway", "pairs", "both"):
        raise fail(f"--layout {layout!r}: use multiway, pairs or both", 2)
    try:
        result = export_dataset(store, stage, key, folder, layout=layout, pivot=pivot)  # type: ignore[arg-type]
    except ExportError as exc:
        raise fail(str(exc), 2) from None
    out.print(f"{stage} {key[:12]}: {result.groups:,} groups -> {result.folder} (configs: {', '.join(c.name for c in result.configs)})", highlight=False)
    if push:
        try:
            out.print(f"pushed: {push_dataset(result.folder, push, private=private or None)}", highlight=False)
        except Exception as exc:  # noqa: BLE001 - the hub's errors as one line; the export stays
            raise fail(f"--push {push}: {_one_line(exc)} (the export is in {result.folder})") from None


def _export_model(store: Any, stage: str, key: str, directory: Path, *, push: str | None, private: bool, drop_language_embedding: bool) -> None:
    from tasks.train.publish import ExportError, LanguageEmbeddingRefused, PushError, export_trained_model, push_to_hub

    evaluation = None
    if stage == "evaluate":
        evaluation, key = key, store.manifest("evaluate", key).input_keys.get("train")
        if key is None:
            raise fail(f"evaluate artifact {evaluation[:12]} scored a base model, not a trained one: nothing to export", 2)
    try:
        result = export_trained_model(store, key, directory, evaluation_key=evaluation, drop_language_embedding=drop_language_embedding, repo_id=push)
    except LanguageEmbeddingRefused as exc:
        raise fail(str(exc), 1) from None
    except ExportError as exc:
        raise fail(str(exc), 2) from None
    files = [p for p in result.folder.rglob("*") if p.is_file()]
    out.print(f"exported train {key[:12]} to {result.folder} ({len(files)} files, {_size(sum(p.stat().st_size for p in files))})", highlight=False, markup=False)
    out.print(f"  card      {result.card_source}", highlight=False, markup=False)
    out.print(f"  inputs    truncated at {result.max_seq_length} tokens", highlight=False, markup=False)
    if result.language_embedding is not None:
        err.print(Text(f"language embedding dropped: {result.language_embedding.summary()}", style="yellow"), highlight=False)
    if push:
        try:
            url = push_to_hub(result.folder, push, private=private)
        except PushError as exc:
            raise fail(f"{exc} (the exported folder {result.folder} is kept)", 1) from None
        out.print(f"  pushed    {url}", highlight=False, markup=False)


def entrypoint() -> None:
    """Console script: store problems become one clear line, not a traceback."""
    from storage import StoreError

    try:
        app(prog_name="xlembed")
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except StoreError as exc:
        if os.environ.get("XLEMBED_DEBUG"):
            raise
        err.print(Text.assemble(("error:", "red"), " ", str(exc)), highlight=False)
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - object-storage failures become one line too
        from storage.errors import explain

        message = explain(exc, os.environ.get(ROOT_ENV))
        if message is None or os.environ.get("XLEMBED_DEBUG"):
            raise
        err.print(Text.assemble(("error:", "red"), " ", message), highlight=False)
        sys.exit(1)


if __name__ == "__main__":
    entrypoint()
