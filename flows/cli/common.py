"""What every command of the `xlembed` command line shares: the Typer apps, the output
consoles, the argument types, one-line errors, and finding an artifact from a stage, key or ref."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
import typer.core
from rich.console import Console
from rich.text import Text

from flows.config import ROOT_ENV, ConfigError, PipelineConfig, load_config
from flows.interrupts import interruptible
from flows.output import Output, quiet_prefect_notices
from flows.runners import make_task_runner
from flows.store_index import INDEX_FILE, format_age, format_size, write_index
from flows.store_index import REPORTS_DIR as SWEEPS_DIR
from flows.terminal import (
    DEFAULT,
    PLAN_NOTES_PRINTED_ENV,
    PROGRESS_ENV,
    QUIET,
    VERBOSE,
    silence_third_party_bars,
    use_terminal_handler,
)
from storage import ArtifactStore, StoreAccessError, StoreError
from storage.errors import explain
from storage.refs import list_refs
from tasks.stage import PACKAGE_VERSION, DataError
from tasks.stop import Interrupted

# Before Prefect, transformers or datasets are imported: they read these settings then.
silence_third_party_bars()
use_terminal_handler()
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # the temporary server's telemetry notice
# Prefect's client telemetry (its first-import notice on a terminal, "Prefect collects anonymous
# usage data"): off as the server's is; DO_NOT_TRACK=0 in the environment turns it back on.
os.environ.setdefault("DO_NOT_TRACK", "1")

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
            param._usage_display_name = lambda p=param: (
                (p.metavar if p.required else f"[{p.metavar}]") + ("..." if p.nargs != 1 else "")
            )
            param.display_type_rich = lambda ctx: None  # "CONFIG  pipeline config TOML", not "CONFIG <path>"


# -q / -v / --json: accepted before the subcommand (the app's callback) and after every command,
# where `_ReadableHelp` adds those a command does not declare itself (plan, run, evaluate and
# `artifacts ls` declare them; `artifacts show --json` has its own meaning and keeps it).
def _global_flag(name: str) -> Any:
    def apply(value: bool) -> None:
        if value:
            output_mode(**{name: True})

    return apply


@functools.cache
def _global_flags() -> list[Any]:
    """-q / -v / --json as click parameters that set MODE when given (typer builds them, so they
    render and parse like the app's own); they pass no value to the command's function."""
    flags = typer.Typer(add_completion=False)

    @flags.command()
    def placeholder(
        verbose: Annotated[bool, typer.Option("--verbose", "-v", expose_value=False, callback=_global_flag("verbose"),
                                              help="show tracebacks, debug logs and Prefect's per-task lines")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", expose_value=False, callback=_global_flag("quiet"),
                                            help="print results only: no progress, notes or info logs")] = False,
        as_json: Annotated[bool, typer.Option("--json", expose_value=False, callback=_global_flag("as_json"),
                                              help="print the result as JSON on stdout (and nothing else there)")] = False,
    ) -> None:  # fmt: skip
        """Never run: its parameters are what `_add_global_flags` adds."""

    return list(typer.main.get_command(flags).params)


def _add_global_flags(command: Any) -> None:
    taken = {opt for param in command.params for opt in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))}
    for flag in _global_flags():
        if not taken & set(flag.opts):
            command.params.append(flag)


class _ReadableHelp(typer.core.TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for command in self.commands.values():
            _readable_params(command)
            _add_global_flags(command)


app = typer.Typer(
    cls=_ReadableHelp,
    name="xlembed",
    help="Staged, cached pipelines for cross-lingual sentence encoders.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, powershell)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: readable in 80 columns, nothing cut (see _help_formatting)
)
artifacts_app = typer.Typer(
    cls=_ReadableHelp,
    help="Inspect and maintain the artifact store (local folder or s3://).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(artifacts_app, name="artifacts")

out = Output()  # plain lines when stdout is not a terminal; paths and URIs never wrapped or cut
err = Console(stderr=True, soft_wrap=True, emoji=False)  # an error line stays one line (paths in it are copied), in a pipe too


class OutputMode:
    """-q / -v / --json of one command line, given before the subcommand, after it, or both."""

    def __init__(self) -> None:
        self.verbose = self.quiet = self.as_json = False

    @property
    def verbosity(self) -> str:
        return VERBOSE if self.verbose else QUIET if self.quiet or self.as_json else DEFAULT


MODE = OutputMode()

VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="show tracebacks, debug logs and Prefect's per-task lines")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="print results only: no progress, notes or info logs")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as JSON on stdout (and nothing else there)")]


def output_mode(verbose: bool = False, quiet: bool = False, as_json: bool = False) -> OutputMode:
    """Merge a command's own -v/-q/--json with those given before it, and apply them: --json keeps
    stdout for the JSON (`out` goes quiet); -q leaves the commands' results only (they check
    MODE.quiet) and turns the progress bars off; both keep warnings and errors on stderr."""
    MODE.verbose |= verbose
    MODE.quiet |= quiet
    MODE.as_json |= as_json
    if MODE.verbose and MODE.quiet:
        raise fail("-q and -v ask for opposite things: give one of them", 2)
    if MODE.verbose:
        os.environ["XLEMBED_DEBUG"] = "1"
    use_terminal_handler(MODE.verbosity)
    out.quiet = MODE.as_json
    if MODE.quiet:
        os.environ.setdefault(PROGRESS_ENV, "0")
    return MODE


def print_json(value: Any) -> None:
    import json

    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def result_line(line: str) -> None:
    """A line that is the command's result: printed with -q too (not with --json)."""
    if not MODE.as_json:
        typer.echo(line)


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
    explained = explain(exc, root)
    if explained is not None:
        return explained
    text = str(exc) or repr(exc)
    return text if isinstance(exc, DataError) else f"{type(exc).__name__}: {text}"


class _OneLinePerFailure:
    """A logging filter on the console handlers, for a run's default output (`--verbose` turns it
    off): a failure is one line, never a traceback. A failed shard is Prefect's "Finished in
    state Failed(...)" line, which names the exception (logged for every failed task run, retried
    or not); its "Task run failed" lines (one per attempt, the last with a traceback) and the flow
    run's own exception and state (which the CLI's `error: ... failed: ...` summary says once)
    are dropped; any other record loses its traceback and keeps the exception's line. Prefect's
    API handler still gets every record whole."""

    def filter(self, record: Any) -> bool:
        if os.environ.get("XLEMBED_DEBUG"):
            return True
        message = str(record.msg)
        if record.name.startswith("prefect.task_runs") and message.startswith("Task run failed with"):
            return False
        if record.name.startswith("prefect.flow_runs") and message.startswith(
            ("Encountered exception during execution", "Finished in state Failed")
        ):
            return False
        if record.exc_info:
            exc = record.exc_info[1]
            if exc is not None and str(exc) and str(exc) not in record.getMessage():
                record.msg, record.args = "%s (%s)", (record.getMessage(), _exception_line(exc))
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _exception_line(exc: BaseException) -> str:
    """`Type: message` on one line (a data error's message as is: it names the file and line)."""
    text = " ".join((str(exc) or repr(exc)).split())
    return text if isinstance(exc, DataError) else f"{type(exc).__name__}: {text}"


def _one_line_per_failure() -> None:
    """Install `_OneLinePerFailure` on every console handler a run's records reach (not on
    Prefect's API handler, which keeps the tracebacks for the server)."""
    import logging

    quiet = _OneLinePerFailure()
    for name in ("", "prefect", "prefect.flow_runs", "prefect.task_runs"):
        for handler in logging.getLogger(name).handlers:
            if type(handler).__name__.endswith("APILogHandler"):
                continue
            if not any(isinstance(f, _OneLinePerFailure) for f in handler.filters):
                handler.addFilter(quiet)


def stopped(exc: BaseException) -> typer.Exit:
    """Ctrl-C or SIGTERM stopped a run at a safe point: what was kept, exit 130."""
    err.print(f"interrupted: {exc}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(130)


def _version(value: bool) -> None:
    if value:
        out.print(f"xlembed {PACKAGE_VERSION}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
    verbose: VerboseOpt = False,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    MODE.__init__()  # a new command line (tests run several in one process)
    os.environ.pop(PLAN_NOTES_PRINTED_ENV, None)
    output_mode(verbose, quiet, as_json)


def check_root_option(root: str | None) -> None:
    """`--root ''` (an unset shell variable) is an error, not a silent fall-back to the config's root."""
    if root is not None and not root.strip():
        raise fail(
            "--root is empty: give a folder or s3://bucket/prefix (or leave --root out to use the config's pipeline.root)", 2
        )


def _load(config: Path, root: str | None) -> PipelineConfig:
    check_root_option(root)
    try:
        loaded = load_config(config, root=root)
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    _refuse_file_root(loaded.settings.root)
    return loaded


def _refuse_file_root(root: str) -> None:
    """A local root that is a file: one line now, not a traceback from the first read or write under it."""
    local = Path(root.removeprefix("file://")).expanduser() if "://" not in root or root.startswith("file://") else None
    if local is not None and local.exists() and not local.is_dir():
        raise fail(f"artifact root {root} is a file, not a folder (set by --root, {ROOT_ENV} or the config's pipeline.root)", 2)


def _store(root: str, *, must_exist: bool = True) -> Any:
    """The store at `root`, reached once: a root that does not exist is an error for commands
    that read (`must_exist`); one that cannot be reached is one line naming the fix."""
    if not root.strip():
        raise fail(f"the artifact root is empty: give --root a folder or s3://bucket/prefix (or set {ROOT_ENV})", 2)
    _refuse_file_root(root)
    try:
        store = ArtifactStore(root, create=not must_exist)
        store.check_root(must_exist=must_exist)
        return store
    except StoreAccessError as exc:
        raise fail(str(exc), 1) from None
    except StoreError as exc:
        raise fail(str(exc), 2) from None


def _age(created_at: str) -> str:
    return format_age(created_at)


def _size(n: int) -> str:
    return format_size(n)


def _known_stage(store: Any, stage: str) -> str:
    """A stage name given on the command line must name a stage present in the store."""
    stages = store.stages()
    if stage not in stages:
        raise fail(f"no stage {stage!r} in {store.root_uri}; stages there: {', '.join(stages) or 'none'}", 2)
    return stage


def _resolve(store: Any, stage: str, key: str | None, pipeline: str | None) -> str:
    _known_stage(store, stage)
    try:
        if key:
            return store.resolve(stage, key)
        refs = [r for r in list_refs(store) if r.stage == stage and (pipeline is None or r.pipeline == pipeline)]
        if pipeline is not None and not refs:
            pipelines = sorted({r.pipeline for r in list_refs(store) if r.stage == stage})
            raise fail(
                f"--pipeline {pipeline}: no ref {pipeline}/{stage}; pipelines with a {stage} ref: {', '.join(pipelines) or 'none'}",
                2,
            )
        if len({r.key for r in refs}) != 1:
            raise fail(_ambiguous_refs(stage, refs), 2)
        return refs[0].key
    except StoreError as exc:
        raise fail(str(exc), 2) from None


def refuse_inside_store(store: Any, path: Path, what: str) -> None:
    """Exit 2 when a local output `path` would land inside a local store's root: a file written
    there could overwrite a committed artifact's file or a ref. (An s3:// root has no local
    folder to land in.)"""
    if not store.backend.is_local:
        return
    root = Path(store.root_path).resolve()
    target = path.expanduser().resolve()
    if target == root or root in target.parents:
        raise fail(f"{what} {path}: inside the artifact store {root}; write outside it", 2)


def _ambiguous_refs(stage: str, refs: list[Any]) -> str:
    """The refusal when a stage name matches refs of several pipelines at different artifacts: each ref, and what to give."""
    listed = ", ".join(f"{r.pipeline}/{r.stage} -> {r.key[:12]}" for r in sorted(refs, key=lambda r: r.pipeline))
    return f"{len(refs)} pipelines have a {stage} ref ({listed}): give --pipeline NAME or a key"


def _resolve_artifact(store: Any, artifact: str, pipeline: str | None) -> tuple[str, str]:
    """ARTIFACT on the command line: a stage name (its ref; refused, with the refs listed, when
    refs of several pipelines point at different artifacts of it, as `artifacts head` does) or a
    key or unique key prefix of any stage."""
    stages = store.stages()
    if artifact in stages:
        refs = [r for r in list_refs(store) if r.stage == artifact]
        if refs or pipeline:
            return artifact, _resolve(store, artifact, None, pipeline)
        return artifact, _no_ref(store, artifact)
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


def _report_damaged_refs(damaged: list[Any]) -> None:
    for item in damaged:
        err.print(Text(f"damaged ref refs/{item.pipeline}/{item.stage}: {item.problem} (skipped)"), highlight=False)


def _no_ref(store: Any, stage: str) -> str:
    raise fail(f"no ref points at a {stage} artifact in {store.root_uri}; give its key (xlembed artifacts ls {stage})", 2)


def print_plan_notes(plan: Any) -> None:
    """The key-scheme change (once, when old artifacts will be rebuilt) and what hashing cost."""
    if MODE.quiet:
        return
    for line in plan.notes():
        out.print(Text(line, style="yellow" if line.startswith("key scheme") else "dim"), highlight=False)
    os.environ[PLAN_NOTES_PRINTED_ENV] = "1"  # the flow's copies of these lines stay off the terminal


def refresh_index(store: Any, cfg: PipelineConfig) -> None:
    """For a run or sweep that starts no flow (everything cached) but may have moved refs: what
    the flows do at their end (flows.pipeline.publish_store_index), without the Prefect link."""
    if not cfg.settings.write_index:
        return

    try:
        write_index(store, reports_dir=SWEEPS_DIR)
    except Exception as exc:  # noqa: BLE001 - a convenience page; the run's own result stands
        err.print(
            f"[yellow]warning:[/yellow] store index {store.root_uri}/{INDEX_FILE} not refreshed: {type(exc).__name__}: {exc}",
            highlight=False,
        )


def run_prefect_flow(server: Any, cfg: PipelineConfig, what: str, load_flow: Any, failure_hint: Any = None, **params: Any) -> Any:
    """Run the Prefect flow `load_flow()` returns (imported after Prefect's environment is set) on
    the config's task runner, with the temporary `server` connected and stopped afterwards:
    Ctrl-C is one line and exit 130, any other error one line "`what` failed: ..." plus
    `failure_hint()` (a traceback with --verbose). The flow's result is returned."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "tasks,storage")

    quiet_prefect_notices()
    flow = load_flow().with_options(task_runner=make_task_runner(cfg.settings))
    _one_line_per_failure()
    try:
        with server.connected(), interruptible():
            return flow(**params)
    except Interrupted as exc:
        raise stopped(exc) from None
    except Exception as exc:  # noqa: BLE001 - the user gets one line; --verbose shows the traceback
        if os.environ.get("XLEMBED_DEBUG"):
            raise
        hint = failure_hint() if failure_hint is not None else ""
        raise fail(f"{what} failed: {_one_line(exc, cfg.settings.root)}{hint}") from None
    finally:
        server.stop()
