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

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from storage.errors import ArtifactNotFound, RefConflict, StoreError
from storage.keys import NAME_PATTERN, attempt_key, check_name
from storage.layout import REFS_DIR
from storage.manifest import Ref, RefEntry, parse_record
from storage.store import ArtifactStore

REF_HISTORY_LIMIT = 200
# how often an update is retried when the ref moves under it; each retry re-reads it, and the
# change function decides again (it refuses when the move is not one it may overwrite)
CAS_RETRIES = 20
MAX_ATTEMPTS = 10_000
# `set_ref(expected=ANY_VALUE)`: move the ref whatever it points to now
ANY_VALUE = object()


def utc_now() -> str:
    # microseconds: "the newest version" (of a ref, of a model's evaluations) must not tie when
    # two are written within one second; ISO strings of either precision still sort by time
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class DamagedRef:
    """A ref file that cannot be parsed, or whose content disagrees with the path it sits at:
    what it points to is unknown. `claimed_stage`: the stage its content names, when that
    differs from the path's (gc keeps both stages' artifacts)."""

    pipeline: str
    stage: str
    problem: str
    claimed_stage: str | None = None

    @property
    def stages(self) -> set[str]:
        """Every stage whose artifacts the ref could concern."""
        return {self.stage} | ({self.claimed_stage} if self.claimed_stage else set())


class MisplacedRef(StoreError):
    """A ref whose `pipeline` or `stage` disagrees with its path, or names an invalid one."""

    def __init__(self, message: str, claimed_stage: str | None) -> None:
        super().__init__(message)
        self.claimed_stage = claimed_stage


def parse_ref(data: bytes, path: str, pipeline: str, stage: str) -> Ref:
    """A ref file's content, valid only when its pipeline and stage are valid names equal to the
    ones its path `refs/{pipeline}/{stage}.json` gives: a ref copied or edited into the wrong
    place would otherwise make `verify` blame another ref and `gc` delete what the path names."""
    ref = parse_record(Ref, data, path)
    for what, found, expected in (("pipeline", ref.pipeline, pipeline), ("stage", ref.stage, stage)):
        problem = None
        if not NAME_PATTERN.fullmatch(found):
            problem = f"its {what} {found!r} is not a valid name"
        elif found != expected:
            problem = f"its {what} is {found!r} but it sits at refs/{pipeline}/{stage}.json"
        if problem is not None:
            claimed = ref.stage if NAME_PATTERN.fullmatch(ref.stage) and ref.stage != stage else None
            raise MisplacedRef(f"malformed ref {path}: {problem}", claimed)
    return ref


def ref_path(store: ArtifactStore, pipeline: str, stage: str) -> str:
    return f"{store.root_path}/{REFS_DIR}/{check_name(pipeline, 'pipeline')}/{check_name(stage, 'stage')}.json"


def _short(key: object) -> str:
    return key[:12] if isinstance(key, str) else "nothing"


def read_ref(store: ArtifactStore, pipeline: str, stage: str) -> Ref | None:
    path = ref_path(store, pipeline, stage)
    data = store.backend.read_bytes(path)
    return parse_ref(data, path, pipeline, stage) if data is not None else None


def set_ref(
    store: ArtifactStore, pipeline: str, stage: str, key: str, note: str = "", *, expected: str | None | object = ANY_VALUE
) -> Ref:
    """Point `refs/{pipeline}/{stage}` at a committed key; the old value stays in the history.

    `expected`: the key the caller read before (None: no ref yet). If the ref moved meanwhile
    to anything but `key`, nothing is written and RefConflict names both keys (a ref moves
    only by compare-and-swap, as git's `update-ref KEY OLD` does)."""
    if not store.is_committed(stage, key):
        raise ArtifactNotFound(f"cannot point {pipeline}/{stage} at uncommitted {stage}/{key}")
    rebuild_of = store.manifest(stage, key).rebuild_of

    def change(current: Ref | None) -> Ref | None:
        if current is not None and current.key == key:
            return None
        was = current.key if current is not None else None
        if expected is not ANY_VALUE and was != expected:
            raise RefConflict(
                f"refs/{pipeline}/{stage} moved from {_short(expected)} to {_short(was)} while this run built {key[:12]}; "
                f"the ref was left as it is and {stage}/{key[:12]} is kept: "
                f"`xlembed artifacts rollback {pipeline} {stage} --to {key[:12]}` points it there"
            )
        entry = RefEntry(key=key, at=utc_now(), note=note, config_key=rebuild_of)
        history = [entry] + (current.history if current else [])
        return Ref(pipeline=pipeline, stage=stage, key=key, history=history[:REF_HISTORY_LIMIT])

    return update_ref(store, pipeline, stage, change)


def write_ref(store: ArtifactStore, ref: Ref) -> Ref:
    """Store a ref as given (history included), unconditionally: for tests and repairs;
    copies between stores go through `copy_refs`, which merges."""
    if not store.is_committed(ref.stage, ref.key):
        raise ArtifactNotFound(f"cannot write ref {ref.pipeline}/{ref.stage}: {ref.stage}/{ref.key} is not committed here")
    store.backend.write_object(ref_path(store, ref.pipeline, ref.stage), ref.model_dump_json(indent=2).encode("utf-8"))
    return ref


def list_refs(store: ArtifactStore, damaged: list[DamagedRef] | None = None) -> list[Ref]:
    """Every ref. A ref file that cannot be parsed raises, unless `damaged` is given: then it
    is reported there and the others are still listed."""
    base = f"{store.root_path}/{REFS_DIR}"
    paths = [p for p in store.backend.find(base) if p.endswith(".json")]
    refs = []
    for path, blob in store.backend.read_many(paths).items():
        pipeline, _, stage = path[len(base) + 1 :].removesuffix(".json").partition("/")
        try:
            for name, what in ((pipeline, "pipeline"), (stage, "stage")):
                if not NAME_PATTERN.fullmatch(name):
                    raise MisplacedRef(f"malformed ref {path}: its path names an invalid {what} {name!r}", None)
            refs.append(parse_ref(blob, path, pipeline, stage))
        except StoreError as exc:
            if damaged is None:
                raise
            damaged.append(DamagedRef(pipeline, stage, str(exc), getattr(exc, "claimed_stage", None)))
    return sorted(refs, key=lambda r: (r.pipeline, r.stage))


def update_ref(store: ArtifactStore, pipeline: str, stage: str, change: Callable[[Ref | None], Ref | None]) -> Ref | None:
    """Read the ref, compute its new value with `change` (None: leave it), write it only if the
    ref is still what was read; re-read and retry when another writer got there first."""
    path = ref_path(store, pipeline, stage)
    for _ in range(CAS_RETRIES):
        data, token = store.backend.read_versioned(path)
        current = parse_record(Ref, data, path) if data is not None else None
        new = change(current)
        if new is None or new == current:
            return current
        if store.backend.write_if_unchanged(path, new.model_dump_json(indent=2).encode("utf-8"), token):
            return new
    raise RefConflict(f"refs/{pipeline}/{stage} kept changing under {CAS_RETRIES} attempts to update it; try again")


def current_version(
    store: ArtifactStore, pipeline: str, stage: str, config_key: str, ref: Ref | None | object = None
) -> str | None:
    """The committed version a pipeline uses for `config_key`: the newest entry of its ref's
    history built for it (a rebuild, or the first build), else the first build if committed.
    `ref`: the pipeline's ref when the caller has read it already."""
    if not isinstance(ref, Ref):
        ref = read_ref(store, pipeline, stage)
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
    for ref in list_refs(source):
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

        before = read_ref(destination, ref.pipeline, ref.stage)
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
