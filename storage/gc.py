"""Garbage collection: which artifacts no ref points to, which builds never committed, and
removing one artifact so that no reader ever sees it half gone.

Nothing here deletes on its own: `garbage` and `uncommitted_keys` only list, and `delete` removes
the one artifact it is given (`xlembed artifacts gc` decides).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from storage import build_locks
from storage.keys import KEY_PATTERN
from storage.manifest import DamagedArtifact
from storage.refs import DamagedRef, list_refs
from storage.store import ArtifactStore

# why gc kept an artifact no ref points to now (the summary counts each)
KEPT_REFERENCED = "a ref points to it"
KEPT_HISTORY = "a ref pointed to it before (--keep-history)"
KEPT_YOUNG = "younger than the grace period"
KEPT_LOCKED = "a running build holds a lock on it"
KEPT_PLANNED = "a pipeline's current plan would use it"
KEPT_DAMAGED = "its manifest is damaged"
KEPT_MALFORMED_REF = "a ref of its stage is malformed"
KEPT_ORDER = (KEPT_REFERENCED, KEPT_HISTORY, KEPT_YOUNG, KEPT_LOCKED, KEPT_PLANNED, KEPT_DAMAGED, KEPT_MALFORMED_REF)


def delete_artifact(store: ArtifactStore, stage: str, key: str) -> None:
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
    *,
    kept: dict[str, int] | None = None,
    planned: Mapping[tuple[str, str], str] | None = None,
) -> list[tuple[str, str]]:
    """Artifacts that no ref points to (nothing is deleted here).

    What cannot be judged is kept and said in `skipped` (one line each): an artifact whose
    manifest is damaged, and every artifact of a stage one of whose refs is malformed
    (what that ref points to is unknown). As git's gc, nothing younger than `grace` is
    collected: a build commits its artifact and then moves its ref, and an artifact committed a
    moment ago with no ref yet is that build's, not garbage; so is an uncommitted folder whose
    newest file is that young, or whose file times are unknown. Nor is anything a live build
    lock holds (storage/build_locks.py: a build holds one from its first write until its ref
    moved, whatever its age); a stale lock (its process gone) is said in `skipped` and ignored.
    `planned`: (stage, key) -> the pipeline whose current plan would use that version; those are
    kept too. `kept` receives, per reason, how many artifacts were kept for it."""
    now = now or datetime.now(timezone.utc)
    planned = planned or {}
    counts: Counter[str] = Counter()
    damaged_refs: list[DamagedRef] = []
    damaged: list[DamagedArtifact] = []
    referenced: set[tuple[str, str]] = set()
    current: set[tuple[str, str]] = set()
    for ref in list_refs(store, damaged=damaged_refs):
        referenced.add((ref.stage, ref.key))
        current.add((ref.stage, ref.key))
        if keep_history:
            referenced.update((ref.stage, h.key) for h in ref.history)
    manifests = store.list_manifests(damaged=damaged)
    protected = {stage for d in damaged_refs for stage in d.stages}
    live, stale = build_locks.held(store, now)
    notes = [
        f"refs/{d.pipeline}/{d.stage} is malformed ({d.problem}): every {' and '.join(sorted(d.stages))} artifact kept"
        for d in damaged_refs
    ]
    notes += [f"{d.stage}/{d.key[:12]} kept: {d.problem}" for d in damaged]
    counts[KEPT_DAMAGED] += len(damaged)
    notes += [f"stale lock {lock.stage}/{lock.key[:12]} ignored: {reason} ({_lock_name(store, lock)})" for lock, reason in stale]

    def young(when: datetime | None) -> bool:
        return grace > timedelta(0) and (when is None or now - when < grace)

    def reason(stage: str, key: str, when: datetime | None) -> str | None:
        """Why an unreferenced artifact (or uncommitted folder) is kept; None: it is garbage."""
        if stage in protected:
            return KEPT_MALFORMED_REF
        if (stage, key) in live:
            lock = live[(stage, key)]
            notes.append(f"{stage}/{key[:12]} kept: a running {lock.what} holds a lock on it ({lock.holder()})")
            return KEPT_LOCKED
        if (stage, key) in planned:
            notes.append(f"{stage}/{key[:12]} kept: the current plan of pipeline {planned[(stage, key)]} would use it")
            return KEPT_PLANNED
        if young(when):
            return KEPT_YOUNG
        return None

    doomed: list[tuple[str, str]] = []
    for m in manifests:
        if (m.stage, m.key) in current:
            counts[KEPT_REFERENCED] += 1
            continue
        if (m.stage, m.key) in referenced:
            counts[KEPT_HISTORY] += 1
            continue
        why = reason(m.stage, m.key, _committed_at(m.created_at))
        if why is None:
            doomed.append((m.stage, m.key))
        else:
            counts[why] += 1
    if include_partial:
        committed = {(m.stage, m.key) for m in manifests} | {(d.stage, d.key) for d in damaged}
        for stage, key in uncommitted_keys(store, committed):
            why = reason(stage, key, _newest_file_time(store, stage, key) if grace > timedelta(0) else now)
            if why is None:
                doomed.append((stage, key))
            else:
                counts[why] += 1
    if counts[KEPT_YOUNG]:
        notes.append(f"{counts[KEPT_YOUNG]} unreferenced artifact(s) kept: younger than the grace period ({_span(grace)})")
    if skipped is not None:
        skipped.extend(notes)
    if kept is not None:
        for why in KEPT_ORDER:
            n = counts[why]
            if n:
                label = f"{why} ({_span(grace)})" if why == KEPT_YOUNG else why
                kept[label] = kept.get(label, 0) + n
    return doomed


def _lock_name(store: ArtifactStore, lock: build_locks.BuildLock) -> str:
    return lock.path[len(store.root_path) :].lstrip("/")


def stale_locks(store: ArtifactStore, now: datetime | None = None) -> list[tuple[build_locks.BuildLock, str]]:
    """The lock files whose holder is gone, each with why (gc removes them with --yes)."""
    return build_locks.held(store, now)[1]


def partial_files(store: ArtifactStore, grace: timedelta = timedelta(0), now: datetime | None = None) -> list[str]:
    """Leftover temporary files (`*.tmp-*`) inside committed artifacts' folders: what a copy into
    the folder (a transfer's repair, a write) left when it was killed. Only files the manifest
    does not list, whose name has a `.tmp-` part, and older than `grace` (a repair may be
    writing one now); the manifest's files are never among them."""
    now = now or datetime.now(timezone.utc)
    found = []
    for manifest in store.list_manifests(damaged=[]):  # a damaged manifest's folder is left as it is
        base = store.artifact_dir(manifest.stage, manifest.key)
        listed = {f"{base}/{entry.path}" for entry in manifest.files} | {store.manifest_path(manifest.stage, manifest.key)}
        try:
            files = store.backend.fs.find(base, detail=True)
        except (FileNotFoundError, OSError):
            continue
        for path, info in files.items():
            name = path.rsplit("/", 1)[-1]
            if path in listed or ".tmp-" not in name:
                continue
            when = _file_time(info)
            if grace > timedelta(0) and (when is None or now - when < grace):
                continue
            found.append(path)
    return sorted(found)


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
