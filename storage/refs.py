"""Refs with history, moved only by compare-and-swap, and merged between stores as git does.

A ref `refs/{pipeline}/{stage}.json` names the artifact a pipeline uses now; its history lists
every version it pointed to, newest first, the current one included. Versions are told apart
by their history entries `(key, at)`: a ref is *ahead* of another when the other's newest entry
is in its history (a fast-forward), and the two have *diverged* when neither holds the other's.

Rebuilds: a forced rebuild of config key K is committed beside the version it replaces, under
`attempt_key(K, n)`. Which version a pipeline uses for K is the newest entry of its ref history
built for K (`current_version`), so a later run of the same config keeps the rebuild, and a
rollback moves back to the first build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from storage.errors import RefConflict, StoreError
from storage.keys import attempt_key
from storage.manifest import Ref, RefEntry, parse_record

if TYPE_CHECKING:
    from storage.store import ArtifactStore

# how often an update is retried when the ref moves under it; each retry re-reads it, and the
# change function decides again (it refuses when the move is not one it may overwrite)
CAS_RETRIES = 20
MAX_ATTEMPTS = 10_000


def update_ref(store: ArtifactStore, pipeline: str, stage: str, change: Callable[[Ref | None], Ref | None]) -> Ref | None:
    """Read the ref, compute its new value with `change` (None: leave it), write it only if the
    ref is still what was read; re-read and retry when another writer got there first."""
    path = store._ref_path(pipeline, stage)
    for _ in range(CAS_RETRIES):
        data, token = store.read_versioned(path)
        current = parse_record(Ref, data, path) if data is not None else None
        new = change(current)
        if new is None or new == current:
            return current
        if store.write_if_unchanged(path, new.model_dump_json(indent=2).encode("utf-8"), token):
            return new
    raise RefConflict(f"refs/{pipeline}/{stage} kept changing under {CAS_RETRIES} attempts to update it; try again")


def current_version(
    store: ArtifactStore, pipeline: str, stage: str, config_key: str, ref: Ref | None | object = None
) -> str | None:
    """The committed version a pipeline uses for `config_key`: the newest entry of its ref's
    history built for it (a rebuild, or the first build), else the first build if committed.
    `ref`: the pipeline's ref when the caller has read it already."""
    if not isinstance(ref, Ref):
        ref = store.read_ref(pipeline, stage)
    for entry in ref.history if ref is not None else ():
        if entry.built_for == config_key and store.is_committed(stage, entry.key):
            return entry.key
    return config_key if store.is_committed(stage, config_key) else None


def next_attempt(store: ArtifactStore, stage: str, config_key: str) -> tuple[str, int]:
    """The key and number of the next rebuild of `config_key`: the first attempt not committed
    yet (a forced rebuild that was killed finds its own partial build again and resumes it)."""
    for attempt in range(1, MAX_ATTEMPTS):
        key = attempt_key(config_key, attempt)
        if not store.is_committed(stage, key):
            return key, attempt
    raise StoreError(
        f"{stage}/{config_key[:12]} has been rebuilt {MAX_ATTEMPTS} times; collect old ones with `xlembed artifacts gc`"
    )


Relation = Literal["same", "source-ahead", "destination-ahead", "diverged"]


def _entry_id(entry: RefEntry) -> tuple[str, str]:
    return entry.key, entry.at


def _head(ref: Ref) -> tuple[str, str]:
    # history[0] is the current value; a ref without history (written by hand) has only its key
    return _entry_id(ref.history[0]) if ref.history else (ref.key, "")


def relation(source: Ref, destination: Ref) -> Relation:
    # the same key on both sides agrees, whoever set it when (two stores that built one config)
    if source.key == destination.key:
        return "same"
    source_ids = {_entry_id(e) for e in source.history}
    destination_ids = {_entry_id(e) for e in destination.history}
    if _head(destination) in source_ids:
        return "source-ahead"
    if _head(source) in destination_ids:
        return "destination-ahead"
    return "diverged"


def merged(current: Ref, other: Ref) -> Ref:
    """`current`, with the entries of `other`'s history it lacks (newest first after its head):
    nothing either side recorded is dropped."""
    seen = {_entry_id(e) for e in current.history}
    extra = [e for e in other.history if _entry_id(e) not in seen]
    if not extra:
        return current
    head, rest = current.history[:1], current.history[1:]
    history = head + sorted(rest + extra, key=lambda e: e.at, reverse=True)
    return Ref(pipeline=current.pipeline, stage=current.stage, key=current.key, history=history)


Prefer = Literal["source", "destination"] | None


@dataclass
class RefCopyResult:
    written: list[str] = field(default_factory=list)  # "pipeline/stage: old -> new (fast-forward)"
    unchanged: int = 0
    kept_ahead: list[str] = field(default_factory=list)  # the destination was ahead: left as it is
    conflicts: list[str] = field(default_factory=list)  # diverged, not written (one line each)
    missing: list[str] = field(default_factory=list)  # the destination lacks the artifact


def copy_refs(
    source: ArtifactStore,
    destination: ArtifactStore,
    pipelines: set[str] | None = None,
    *,
    prefer: Prefer = None,
    flags: tuple[str, str] = ("--theirs", "--ours"),
) -> RefCopyResult:
    """Bring the destination's refs up to the source's as `git push`/`git fetch` do: a ref the
    destination lacks is created; one the source is ahead of fast-forwards; one the destination
    is ahead of stays; diverged refs are refused (listed in `conflicts`, naming both keys and
    `flags`, the options that pick the source's or the destination's side) unless `prefer` picks
    a side. Histories are merged in every case: no version either side recorded is dropped."""
    result = RefCopyResult()
    for ref in source.list_refs():
        if pipelines is not None and ref.pipeline not in pipelines:
            continue
        name = f"{ref.pipeline}/{ref.stage}"
        if not destination.is_committed(ref.stage, ref.key):
            result.missing.append(f"{name}: {ref.stage}/{ref.key[:12]} is not in {destination.root_uri}; ref not copied")
            continue
        outcome: list[tuple[str, str]] = []  # (what happened: "written", "kept" or "conflict", the line saying so)

        def change(current: Ref | None, ref: Ref = ref, name: str = name, outcome: list[tuple[str, str]] = outcome) -> Ref | None:
            outcome.clear()
            if current is None:
                outcome.append(("written", f"{name}: created at {ref.key[:12]}"))
                return ref
            how = relation(ref, current)
            if how == "diverged" and prefer is None:
                outcome.append(
                    (
                        "conflict",
                        f"{name} has diverged: {source.root_uri} has {ref.key[:12]}, {destination.root_uri} has {current.key[:12]} "
                        f"and neither is in the other's history; not written ({flags[0]} takes {ref.key[:12]}, {flags[1]} keeps {current.key[:12]})",
                    )
                )
                return None
            if how == "source-ahead" or (how == "diverged" and prefer == "source"):
                kind = "fast-forward" if how == "source-ahead" else "diverged; chose the source's"
                outcome.append(("written", f"{name}: {current.key[:12]} -> {ref.key[:12]} ({kind})"))
                return merged(ref, current)
            new = merged(current, ref)
            if how == "destination-ahead":
                outcome.append(("kept", f"{name}: kept {current.key[:12]} (ahead of {ref.key[:12]})"))
            elif how == "diverged":
                outcome.append(("kept", f"{name}: kept {current.key[:12]} (diverged; chose the destination's)"))
            return new

        before = destination.read_ref(ref.pipeline, ref.stage)
        after = update_ref(destination, ref.pipeline, ref.stage, change)
        kind, line = outcome[0] if outcome else ("", "")
        if kind == "conflict":
            result.conflicts.append(line)
        elif kind == "kept":
            result.kept_ahead.append(line)
        elif after != before:
            result.written.append(line or f"{name}: history merged")
        else:
            result.unchanged += 1
    return result
