"""Copy committed artifacts between stores (a local folder and a bucket), verifying checksums.

Each file is fetched to a local temporary file, hashed, compared with the source manifest,
and only then written to the destination; the manifest is committed last, as for any
run, so an interrupted copy leaves nothing visible. An artifact the destination already
has committed is verified there before it is called present (and repaired from the source
when the source has the same bytes). Refs are merged as git does (storage/refs.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from storage.manifest import FileEntry, Manifest
from storage.refs import RefCopyResult, copy_refs
from storage.store import ArtifactStore, CorruptArtifact, StoreError
from storage.user_cache import xlembed_cache_dir

__all__ = ["CopyResult", "RefCopyResult", "copy_artifact", "copy_refs"]


@dataclass(frozen=True)
class CopyResult:
    stage: str
    key: str
    copied: bool  # False: the destination already had it
    files: int
    bytes: int
    repaired: tuple[str, ...] = ()  # files of a present copy that were damaged and replaced


def _fetch_verified(source: ArtifactStore, stage: str, key: str, entry: FileEntry, local: str) -> None:
    """The source's file at `local`, checked against its manifest as every read is; the error
    names the source root (the destination has one of its own)."""
    try:
        source.fetch_verified(stage, key, entry, local)
    except CorruptArtifact as exc:
        raise CorruptArtifact(f"{source.root_uri}: {exc}") from None


SCRATCH_DIR = ("transfer-scratch",)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def sweep_stale_scratch() -> list[str]:
    """Remove the scratch folders of transfers whose process is gone (killed mid-copy): their
    folder is named `{pid}-{random}` under the user cache, so the next transfer finds them."""
    base = xlembed_cache_dir(*SCRATCH_DIR)
    removed = []
    for folder in base.glob("*-*") if base.is_dir() else ():
        pid = folder.name.split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed


@contextmanager
def transfer_scratch() -> Iterator[str]:
    """A scratch folder for one transfer under the user cache (`xlembed_cache_dir`), not the
    system temp folder: a transfer that is killed leaves it where the next one removes it."""
    sweep_stale_scratch()
    base = xlembed_cache_dir(*SCRATCH_DIR)
    base.mkdir(parents=True, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base)
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def copy_artifact(
    source: ArtifactStore, destination: ArtifactStore, stage: str, key: str, progress: Callable[[int], None] | None = None
) -> CopyResult:
    """Copy one committed artifact; a file whose checksum differs from its manifest aborts the copy.

    An artifact the destination has already committed is verified there (sizes and hashes
    against its manifest) before it is called present: a damaged file is replaced from the
    source when the source has the same bytes (same sha256), else the copy fails naming it."""
    manifest = source.manifest(stage, key)
    if destination.is_committed(stage, key):
        repaired = _repair_present(source, destination, stage, key, manifest)
        return CopyResult(stage, key, False, len(manifest.files), manifest.total_bytes, repaired)
    dst_base = destination.artifact_dir(stage, key)
    with transfer_scratch() as scratch:
        for index, entry in enumerate(manifest.files):
            local = os.path.join(scratch, f"{index:06d}")
            _fetch_verified(source, stage, key, entry, local)
            destination.copy_local_file(local, f"{dst_base}/{entry.path}")
            os.unlink(local)  # one file at a time in the scratch, not the whole artifact
            if progress is not None:
                progress(entry.bytes)
    destination.commit(Manifest.model_validate(manifest.model_dump()))
    return CopyResult(stage, key, True, len(manifest.files), manifest.total_bytes)


def _repair_present(
    source: ArtifactStore, destination: ArtifactStore, stage: str, key: str, manifest: Manifest
) -> tuple[str, ...]:
    """Verify the destination's committed copy; put back the source's bytes for damaged files
    whose manifest entry is the same on both sides (a repair restores what the destination's own
    manifest says, so the committed version does not change)."""
    problems = destination.verify(stage, key)
    if not problems:
        return ()
    theirs = {entry.path: entry for entry in destination.manifest(stage, key).files}
    ours = {entry.path: entry for entry in manifest.files}
    damaged = sorted({problem.split(":", 1)[0] for problem in problems})
    unfixable = [path for path in damaged if path not in ours or ours[path] != theirs.get(path)]
    if unfixable:
        raise StoreError(
            f"{destination.uri(stage, key)}/{unfixable[0]} is damaged ({next(p for p in problems if p.startswith(unfixable[0]))}) "
            f"and {source.root_uri} holds a different build of it, so it cannot be restored from there"
        )
    base = destination.artifact_dir(stage, key)
    with transfer_scratch() as scratch:
        for index, path in enumerate(damaged):
            local = os.path.join(scratch, f"{index:06d}")
            _fetch_verified(source, stage, key, ours[path], local)
            destination.copy_local_file(local, f"{base}/{path}")
    still = destination.verify(stage, key)
    if still:
        raise StoreError(f"{destination.uri(stage, key)} is still damaged after the repair: {still[0]}")
    return tuple(damaged)
