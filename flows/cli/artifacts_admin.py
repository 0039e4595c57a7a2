"""`xlembed artifacts ...` commands that copy between artifact stores and keep one in order:
pull, push, verify, gc, refs and rollback (the help lists them after the inspection commands)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from flows.cli.common import (
    StoreRootOpt,
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
)
from flows.plan import make_plan
from storage import DamagedArtifact, StoreError
from storage.gc import delete_artifact, garbage, partial_files, stale_locks
from storage.keys import InvalidNameError, check_name
from storage.refs import list_refs, read_ref, set_ref
from storage.transfer import copy_artifact, copy_refs
from storage.verify import verify_artifact


def _transfer(
    source_root: str,
    destination_root: str,
    stage: str | None,
    key: str | None,
    refs: bool,
    prefer: str | None,
    flags: tuple[str, str],
) -> None:
    source, destination = _store(source_root), _store(destination_root, must_exist=False)
    if stage is not None:
        _known_stage(source, stage)
    if key and stage:
        targets = [(stage, _resolve(source, stage, key, None))]
    else:
        targets = [(m.stage, m.key) for m in source.list_manifests(stage)]
    copied = repaired = 0
    for name, full in targets:
        result = copy_artifact(source, destination, name, full)
        copied += result.copied
        repaired += bool(result.repaired)
        if result.repaired:
            state = "repaired"
        else:
            state = "copied  " if result.copied else "present "
        out.print(f"{state} {name}/{full[:12]}  {result.files} files, {_size(result.bytes)}", highlight=False, markup=False)
        for path in result.repaired:
            out.print(
                f"    {path}: damaged in {destination.root_uri}; replaced by the verified copy", highlight=False, markup=False
            )
    summary = f"{copied} of {len(targets)} artifacts copied, {len(targets) - copied} present (checksums verified on both sides)"
    if repaired:
        summary += f", {repaired} repaired"
    if not refs:
        out.print(f"{summary}; refs not copied", highlight=False, markup=False)
        return
    moved = copy_refs(source, destination, prefer=prefer, flags=flags)  # type: ignore[arg-type]
    for line in moved.written + moved.kept_ahead:
        out.print(f"ref {line}", highlight=False, markup=False)
    out.print(f"{summary}; refs: {len(moved.written)} written, {moved.unchanged} up to date, {len(moved.kept_ahead)} kept (ahead), "
              f"{len(moved.conflicts)} diverged in {destination.root_uri}", highlight=False, markup=False)  # fmt: skip
    for line in moved.missing:
        err.print(line, highlight=False, markup=False)
    if moved.conflicts:
        for line in moved.conflicts:
            err.print(f"refused: {line}", highlight=False, markup=False)
        raise fail(
            f"{len(moved.conflicts)} diverged ref(s) left as they were in {destination.root_uri}; pick a side with --theirs or --ours (--force: the source's side)"
        )


def _side(theirs: bool, ours: bool, force: bool, source_is: str) -> str | None:
    """Which store's ref wins a divergence: `theirs` is the remote, `ours` the local root;
    `--force` makes the destination like the source (as `git push --force` does)."""
    if theirs + ours + force > 1:
        raise fail("--theirs, --ours and --force exclude one another", 2)
    if force:
        return "source"
    if theirs:
        return "source" if source_is == "remote" else "destination"
    if ours:
        return "source" if source_is == "local" else "destination"
    return None


TheirsOpt = Annotated[
    bool, typer.Option("--theirs", help="where a ref has diverged, take the remote's version (histories are merged)")
]
OursOpt = Annotated[bool, typer.Option("--ours", help="where a ref has diverged, keep the local version (histories are merged)")]


@artifacts_app.command("pull")
def artifacts_pull(
    remote: Annotated[str, typer.Argument(help="the root to copy from, e.g. s3://bucket/prefix")],
    stage: Annotated[Optional[str], typer.Argument(help="only this stage")] = None,
    key: Annotated[Optional[str], typer.Argument(help="only this key (or unique prefix)")] = None,
    refs: Annotated[bool, typer.Option(help="also copy the refs that point at copied artifacts")] = True,
    theirs: TheirsOpt = False,
    ours: OursOpt = False,
    force: Annotated[bool, typer.Option("--force", help="where a ref has diverged, take the remote's (= --theirs)")] = False,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Copy artifacts (and their refs) from REMOTE into the local root, verifying checksums.
    Refs fast-forward; a local ref that is ahead stays; a diverged one is refused unless a side is chosen."""
    _transfer(remote, root, stage, key, refs, _side(theirs, ours, force, "remote"), ("--theirs", "--ours"))


@artifacts_app.command("push")
def artifacts_push(
    remote: Annotated[str, typer.Argument(help="the root to copy to, e.g. s3://bucket/prefix")],
    stage: Annotated[Optional[str], typer.Argument(help="only this stage")] = None,
    key: Annotated[Optional[str], typer.Argument(help="only this key (or unique prefix)")] = None,
    refs: Annotated[bool, typer.Option(help="also copy the refs that point at copied artifacts")] = True,
    theirs: TheirsOpt = False,
    ours: OursOpt = False,
    force: Annotated[
        bool, typer.Option("--force", help="where a ref has diverged, overwrite the remote's with the local (= --ours)")
    ] = False,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Copy artifacts (and their refs) from the local root to REMOTE, verifying checksums.
    Refs fast-forward; a remote ref that is ahead stays; a diverged one is refused unless a side is chosen."""
    _transfer(root, remote, stage, key, refs, _side(theirs, ours, force, "local"), ("--ours", "--theirs"))


@artifacts_app.command("verify")
def artifacts_verify(
    stage: Annotated[Optional[str], typer.Argument(help="only this stage")] = None,
    key: Annotated[Optional[str], typer.Argument(help="only this key (or unique prefix)")] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Re-hash files against their manifests and check that every ref points at a committed
    artifact. Exit 1 if anything is missing, damaged or corrupt."""
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
    damaged_refs: list[Any] = []
    for ref in list_refs(store, damaged=damaged_refs):
        if (stage is None or ref.stage == stage) and not store.is_committed(ref.stage, ref.key):
            broken_refs += 1
            out.print(
                Text.assemble(
                    ("BROKEN REF", "red"), f" refs/{ref.pipeline}/{ref.stage} -> {ref.key[:12]}: no committed artifact (deleted?)"
                ),
                highlight=False,
            )
    for name, full in targets:
        problems = verify_artifact(store, name, full)
        if problems:
            bad += 1
            out.print(f"[red]CORRUPT[/red] {name}/{full[:12]}")
            for problem in problems:
                out.print(f"    {problem}", highlight=False, markup=False)
        else:
            out.print(f"[green]ok[/green]      {name}/{full[:12]}")
    damaged_refs = [d for d in damaged_refs if stage is None or d.stage == stage]
    for item in damaged_refs:
        out.print(
            Text.assemble(("DAMAGED REF", "red"), f" refs/{item.pipeline}/{item.stage}: "), Text(item.problem), highlight=False
        )
    total = len(targets) + len(damaged)
    if bad or broken_refs or damaged_refs:
        problems = [f"{bad} of {total} artifacts failed verification"] if bad else []
        if damaged_refs:
            problems.append(
                f"{len(damaged_refs)} ref(s) are malformed (their files under refs/ cannot be parsed: restore them from a backup or remove them, then rerun the pipeline)"
            )
        if broken_refs:
            problems.append(
                f"{broken_refs} ref(s) point at missing artifacts (rerun the pipeline, or `xlembed artifacts rollback PIPELINE STAGE`)"
            )
        raise fail("; ".join(problems))
    out.print(f"{total} artifacts verified, and the refs")


@artifacts_app.command("gc")
def artifacts_gc(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="really delete (default: dry run)")] = False,
    keep_history: Annotated[bool, typer.Option(help="also keep what refs pointed to before")] = False,
    include_partial: Annotated[
        bool,
        typer.Option(
            help="also delete uncommitted (interrupted) artifacts and leftover *.tmp-* files inside committed ones "
            "(older than --grace; never a file a manifest lists)"
        ),
    ] = False,
    grace: Annotated[
        str,
        typer.Option(
            metavar="DURATION",
            help="keep what is younger than this (e.g. 30m, 2h, 1d; 0: nothing): a build commits, then moves its ref",
        ),
    ] = "1h",
    config: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--config",
            help="a pipeline config (repeatable): keep every version its current plan would use, as `xlembed plan` shows it",
            show_default=False,
        ),
    ] = None,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Remove artifacts no ref points to, no running build holds, and older than --grace. A dry run unless --yes.

    The summary says what was kept and why."""
    period = _grace_period(grace)
    store = _store(root)
    planned = _planned_versions(config or [], store)
    skipped: list[str] = []
    kept: dict[str, int] = {}
    doomed = garbage(
        store,
        keep_history=keep_history,
        include_partial=include_partial,
        skipped=skipped,
        grace=period,
        kept=kept,
        planned=planned,
    )
    stale = stale_locks(store)
    partial = partial_files(store, grace=period) if include_partial else []
    for stage, key in doomed:
        out.print(f"{'delete' if yes else 'would delete'} {stage}/{key[:12]}")
        if yes:
            delete_artifact(store, stage, key)
    for path in partial:
        out.print(Text(f"{'delete' if yes else 'would delete'} partial file {store.relative(path)}"), highlight=False)
        if yes:
            store.backend.remove(path)
    for lock, _ in stale:
        if yes:  # its holder is gone: the file guards nothing
            store.backend.remove(lock.path)
    for line in skipped:
        err.print(Text(f"skipped: {line}"), highlight=False)
    if kept:
        reasons = ", ".join(f"{n} {why}" for why, n in kept.items())  # in gc's order of reasons
        out.print(Text(f"kept {sum(kept.values())}: {reasons}"), highlight=False)
    if not doomed and not partial:
        out.print("nothing to collect")
    elif not yes:
        what = f"{len(doomed)} artifacts" + (f" and {len(partial)} partial file(s)" if partial else "")
        out.print(f"{what}; run again with --yes to delete them")


def _planned_versions(configs: list[Path], store: Any) -> dict[tuple[str, str], str]:
    """(stage, key) -> pipeline name, for every version the configs' current plans would use
    (cached, or to be computed: an interrupted build's folder is resumed, not garbage)."""
    if not configs:
        return {}
    from flows.stages import stage_registry  # lazy: every stage module (polars), only for gc --config

    planned: dict[tuple[str, str], str] = {}
    for path in configs:
        cfg = _load(path, store.root_uri)  # planned against the store being collected
        try:
            steps = make_plan(cfg, store, stage_registry())
        except StoreError as exc:
            raise fail(f"{path}: {exc}", 1 if type(exc).__name__ == "StoreAccessError" else 2) from None
        except (ValueError, FileNotFoundError) as exc:
            raise fail(f"{path}: {exc}", 2) from None
        for step in steps:
            if step.action != "skip":
                planned.setdefault((step.stage, step.key), cfg.name)
    return planned


def _grace_period(text: str) -> timedelta:
    """'90s', '30m', '2h', '1d' or '0' as a duration; anything else exits 2 in one line."""
    found = re.fullmatch(r"\s*(\d{1,7})\s*([smhd]?)\s*", text)
    if not found or (found.group(2) == "" and found.group(1) != "0"):
        raise fail(f"--grace {text!r}: give a duration such as 30m, 2h or 1d (0: no grace)", 2)
    seconds = {"": 0, "s": 1, "m": 60, "h": 3600, "d": 86400}[found.group(2)]
    return timedelta(seconds=int(found.group(1)) * seconds)


@artifacts_app.command("refs")
def artifacts_refs(root: StoreRootOpt = "artifacts") -> None:
    """List named refs (pipeline/stage -> key) with how many versions each has had."""
    store = _store(root)
    table = Table(title="refs", title_justify="left")
    for column in ("pipeline", "stage", "key", "versions", "since"):
        table.add_column(column)
    damaged: list[Any] = []
    for ref in list_refs(store, damaged=damaged):
        table.add_row(ref.pipeline, ref.stage, ref.key[:12], str(len(ref.history)), ref.history[0].at if ref.history else "")
    for item in damaged:
        table.add_row(item.pipeline, item.stage, Text("damaged", style="red"), "", "")
    out.print(table)
    _report_damaged_refs(damaged)


ROLLBACK_NOTE = "rollback from "


def _ref_versions(ref: Any) -> list[Any]:
    """The versions a ref was set to by runs (rollbacks left out), newest first: version 0 is
    the latest build, -1 the one before, and so on."""
    return [h for h in ref.history if not h.note.startswith(ROLLBACK_NOTE)]


def _ref_position(ref: Any, versions: list[Any]) -> int:
    """Where in `versions` the ref stands now: a rollback records its target's index."""

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
    list_versions: Annotated[
        bool,
        typer.Option("--list", help="list the ref's versions (0: the latest build, -1 the one before, ...) and move nothing"),
    ] = False,
    root: StoreRootOpt = "artifacts",
) -> None:
    """Move a ref back through the versions runs set it to: each rollback goes one version further back
    (--steps N: N versions), --to KEY picks one, --list shows them. Nothing is deleted."""
    try:  # a name such as ../../x must not reach a path
        check_name(pipeline, "pipeline")
        check_name(stage, "stage")
    except InvalidNameError as exc:
        raise fail(str(exc), 2) from None
    store = _store(root)
    ref = read_ref(store, pipeline, stage)
    if ref is None:
        known = sorted(f"{r.pipeline}/{r.stage}" for r in list_refs(store))
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
            raise fail(
                f"{pipeline}/{stage} has no earlier version {-index}: it is at version {-position}, the oldest is {-(len(versions) - 1)} (see --list)",
                2,
            )
        target = versions[index].key
        if not store.is_committed(stage, target):
            raise fail(
                f"version {-index} of {pipeline}/{stage} ({target[:12]}) is no longer in the store (collected by gc?); pick one with --to KEY (see --list)",
                2,
            )
    where = f" (version -{index})" if index is not None else ""
    set_ref(store, pipeline, stage, target, note=f"{ROLLBACK_NOTE}{ref.key[:12]}{where}")
    out.print(f"{pipeline}/{stage}: {ref.key[:12]} -> {target[:12]}", highlight=False)
    if index is not None:
        built = versions[index].at
        further = "; `rollback` again goes one further back" if index + 1 < len(versions) else "; this is the oldest version"
        out.print(
            f"now at version -{index} of {len(versions)} (set {built}){further}; `--list` shows them all",
            highlight=False,
            markup=False,
        )
