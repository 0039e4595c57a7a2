"""Copy committed artifacts between stores (a local folder and a bucket), verifying checksums.

Each file is fetched to a local scratch file, hashed, compared with the source manifest,
and only then written to the destination (one file at a time: the scratch never holds more);
the manifest is committed last, as for any run, so an interrupted copy leaves nothing visible.
The scratch is not the system temp folder, where a killed copy's files would stay unseen: it is
`{root}/_scratch/{pid}-{host}-{nonce}/` under the destination's root when that is local (a
verified file is then renamed into place), else `~/.cache/xlembed/transfer-scratch/` (a push
writes nothing into the store it reads); every transfer first removes the scratch folders
there whose process is gone. An artifact the destination already has committed is verified there before it is called present (and repaired from the source
when the source has the same bytes). Refs are merged as git does (storage/refs.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from storage.build_locks import STALE_AFTER, process_alive
from storage.layout import TRANSFER_SCRATCH_DIR
from storage.manifest import FileEntry, Manifest
from storage.refs import RefCopyResult, copy_refs
from storage.store import ArtifactStore, CorruptArtifact, StoreError
from storage.user_cache import xlembed_cache_dir
from storage.verify import verify_artifact

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


# a push's scratch (its destination is a bucket): under the user cache, `xlembed_cache_dir(*SCRATCH_DIR)`
SCRATCH_DIR = ("transfer-scratch",)


def scratch_base(source: ArtifactStore, destination: ArtifactStore) -> Path:
    """Where a transfer between these stores keeps its scratch files (see the module's doc)."""
    if destination.backend.is_local:
        return Path(destination.root_path) / TRANSFER_SCRATCH_DIR
    return xlembed_cache_dir(*SCRATCH_DIR)


def stale_scratch(base: Path) -> list[Path]:
    """Scratch folders under `base` (named `{pid}-{host}-{nonce}`, or `{pid}-{nonce}`: this host)
    left by transfers that are gone: this host's whose process no longer exists, and another
    host's not touched for `STALE_AFTER` (its pid cannot be checked from here)."""
    try:
        entries = list(base.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    here, now, found = _safe_host(), time.time(), []
    for entry in entries:
        parts = entry.name.split("-")
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        host = parts[1] if len(parts) >= 3 else here
        try:
            age = now - entry.stat().st_mtime
        except OSError:
            continue
        if not process_alive(int(parts[0])) if host == here else age > STALE_AFTER.total_seconds():
            found.append(entry)
    return found


def sweep_stale_scratch(base: Path | None = None) -> list[str]:
    """Remove the scratch folders of transfers whose process is gone (killed mid-copy) under
    `base` (default: the user cache's); returns what it removed."""
    removed = []
    for left in stale_scratch(base if base is not None else xlembed_cache_dir(*SCRATCH_DIR)):
        shutil.rmtree(left, ignore_errors=True)
        removed.append(str(left))
    return removed


def _safe_host() -> str:
    return "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:64] or "host"


@contextlib.contextmanager
def _scratch(source: ArtifactStore, destination: ArtifactStore) -> Iterator[Path]:
    base = scratch_base(source, destination)
    sweep_stale_scratch(base)  # a killed transfer's files
    folder = base / f"{os.getpid()}-{_safe_host()}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            base.rmdir()  # only when no other transfer is using it


def _place(destination: ArtifactStore, local: str, dest: str) -> None:
    """A verified scratch file into place: renamed when the scratch is on the destination's
    disk, else copied and removed."""
    if destination.backend.is_local and Path(local).is_relative_to(destination.root_path):
        destination.backend.move_local_file(local, dest)
    else:
        destination.backend.copy_local_file(local, dest)
        os.unlink(local)


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
    with _scratch(source, destination) as scratch:
        for index, entry in enumerate(manifest.files):
            local = str(scratch / f"{index:06d}")
            _fetch_verified(source, stage, key, entry, local)
            _place(destination, local, f"{dst_base}/{entry.path}")
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
    problems = verify_artifact(destination, stage, key)
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
    with _scratch(source, destination) as scratch:
        for index, path in enumerate(damaged):
            local = str(scratch / f"{index:06d}")
            _fetch_verified(source, stage, key, ours[path], local)
            _place(destination, local, f"{base}/{path}")
    still = verify_artifact(destination, stage, key)
    if still:
        raise StoreError(f"{destination.uri(stage, key)} is still damaged after the repair: {still[0]}")
    return tuple(damaged)
