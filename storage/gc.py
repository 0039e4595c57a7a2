"""Garbage collection: which artifacts no ref points to, which builds never committed, and
removing one artifact so that no reader ever sees it half gone.

Nothing here deletes on its own: `garbage` and `uncommitted_keys` only list, and `delete` removes
the one artifact it is given (`xlembed artifacts gc` decides).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

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


def garbage(
    store: ArtifactStore, keep_history: bool = False, include_partial: bool = False, skipped: list[str] | None = None
) -> list[tuple[str, str]]:
    """Artifacts that no ref points to (nothing is deleted here).

    What cannot be judged is kept and said in `skipped` (one line each): an artifact whose
    manifest is damaged, and every artifact of a stage one of whose refs is malformed
    (what that ref points to is unknown)."""
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
    doomed = [(m.stage, m.key) for m in manifests if (m.stage, m.key) not in referenced and m.stage not in protected]
    if include_partial:
        committed = {(m.stage, m.key) for m in manifests} | {(d.stage, d.key) for d in damaged}
        doomed += [(stage, key) for stage, key in uncommitted_keys(store, committed) if stage not in protected]
    if skipped is not None:
        skipped.extend(notes)
    return doomed
