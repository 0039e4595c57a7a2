"""Garbage collection: which artifacts no ref points to, which builds never committed, and
removing one artifact so that no reader ever sees it half gone.

Nothing here deletes on its own: `garbage` and `uncommitted_keys` only list, and `delete` removes
the one artifact it is given (`xlembed artifacts gc` decides).
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from storage.keys import KEY_PATTERN
from storage.manifest import DamagedArtifact
from storage.refs import DamagedRef

if TYPE_CHECKING:
    from storage.store import ArtifactStore


def delete(store: ArtifactStore, stage: str, key: str) -> None:
    """Uncommit first (remove the manifest), then the files, so readers never see a torso.
    Only `gc` calls this: no build deletes or rewrites a committed artifact."""
    fs = store.backend.fs
    with contextlib.suppress(FileNotFoundError):
        fs.rm_file(store.manifest_path(stage, key))
    with contextlib.suppress(FileNotFoundError):
        fs.rm(store.artifact_dir(stage, key), recursive=True)


def uncommitted_keys(store: ArtifactStore, committed: set[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """Artifact directories without a manifest: interrupted or in-progress runs. `committed`:
    the (stage, key) pairs known to have a manifest, damaged ones included."""
    if committed is None:
        damaged: list[DamagedArtifact] = []
        committed = {(m.stage, m.key) for m in store.list_manifests(damaged=damaged)}
        committed |= {(d.stage, d.key) for d in damaged}
    found = []
    for stage in store.stages():
        try:
            entries = store.backend.ls(f"{store.root_path}/{stage}")
        except FileNotFoundError:  # removed meanwhile
            continue
        for entry in entries:
            key = entry.rstrip("/").rsplit("/", 1)[-1]
            if KEY_PATTERN.match(key) and (stage, key) not in committed:
                found.append((stage, key))
    return found


def _newest_file_time(store: ArtifactStore, stage: str, key: str) -> datetime | None:
    """When the newest file under an uncommitted artifact's folder was written (None: unknown)."""
    try:
        found = store.backend.fs.find(store.artifact_dir(stage, key), detail=True)
    except (FileNotFoundError, OSError):
        return None
    times = [_file_time(info) for info in found.values()]
    known = [t for t in times if t is not None]
    return max(known) if known and len(known) == len(times) else None


def _file_time(info: dict[str, Any]) -> datetime | None:
    """A file's modification time from an fsspec `info` (local: `mtime` seconds; s3: `LastModified`)."""
    value = info.get("mtime", info.get("LastModified"))
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=timezone.utc)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return None


def _committed_at(created_at: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(created_at)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def garbage(
    store: ArtifactStore,
    keep_history: bool = False,
    include_partial: bool = False,
    skipped: list[str] | None = None,
    grace: timedelta = timedelta(0),
    now: datetime | None = None,
) -> list[tuple[str, str]]:
    """Artifacts that no ref points to (nothing is deleted here).

    What cannot be judged is kept and said in `skipped` (one line each): an artifact whose
    manifest is damaged, and every artifact of a stage one of whose refs is malformed
    (what that ref points to is unknown). As git's gc, nothing younger than `grace` is
    collected: a build commits its artifact and then moves its ref, and an artifact committed a
    moment ago with no ref yet is that build's, not garbage; so is an uncommitted folder whose
    newest file is that young, or whose file times are unknown."""
    now = now or datetime.now(timezone.utc)
    damaged_refs: list[DamagedRef] = []
    damaged: list[DamagedArtifact] = []
    referenced: set[tuple[str, str]] = set()
    for ref in store.list_refs(damaged=damaged_refs):
        referenced.add((ref.stage, ref.key))
        if keep_history:
            referenced.update((ref.stage, h.key) for h in ref.history)
    manifests = store.list_manifests(damaged=damaged)
    protected = {stage for d in damaged_refs for stage in d.stages}
    notes = [
        f"refs/{d.pipeline}/{d.stage} is malformed ({d.problem}): every {' and '.join(sorted(d.stages))} artifact kept"
        for d in damaged_refs
    ]
    notes += [f"{d.stage}/{d.key[:12]} kept: {d.problem}" for d in damaged]

    def young(when: datetime | None) -> bool:
        return grace > timedelta(0) and (when is None or now - when < grace)

    unreferenced = [m for m in manifests if (m.stage, m.key) not in referenced and m.stage not in protected]
    doomed = [(m.stage, m.key) for m in unreferenced if not young(_committed_at(m.created_at))]
    kept_young = len(unreferenced) - len(doomed)
    if include_partial:
        committed = {(m.stage, m.key) for m in manifests} | {(d.stage, d.key) for d in damaged}
        partial = [(stage, key) for stage, key in uncommitted_keys(store, committed) if stage not in protected]
        old = [(stage, key) for stage, key in partial if not young(_newest_file_time(store, stage, key))]
        kept_young += len(partial) - len(old)
        doomed += old
    if kept_young:
        notes.append(f"{kept_young} unreferenced artifact(s) kept: younger than the grace period ({_span(grace)})")
    if skipped is not None:
        skipped.extend(notes)
    return doomed


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
