"""One stored file against its manifest entry: size and sha256, before anyone parses it.

The store checks every file it hands a reader (`ArtifactStore.verified_path`, `attached_dir`,
`fetch_verified`); a local root's file is checked in place, once per process while its size
and mtime stay the same; a remote one is downloaded and checked. `xlembed artifacts verify`
(storage/verify.py) words its findings the same way.
"""

from __future__ import annotations

import os

from storage.backends import sha256_file
from storage.errors import CorruptArtifact
from storage.manifest import FileEntry

# Local files already hashed against a manifest in this process: (path, size, mtime_ns, sha256).
_VERIFIED_LOCAL: set[tuple[str, int, int, str]] = set()


def rebuild_hint(stage: str) -> str:
    return (
        f"Rebuild it with `xlembed run CONFIG --force {stage}` (and `xlembed artifacts verify {stage}` "
        "lists what else is damaged)"
    )


def missing_file(stage: str, key: str, entry: FileEntry) -> CorruptArtifact:
    return CorruptArtifact(f"{stage}/{key}/{entry.path} is missing; not read. {rebuild_hint(stage)}")


def check_file(stage: str, key: str, entry: FileEntry, local: str, lasting: bool) -> None:
    """Size and sha256 of a local file against its manifest entry; CorruptArtifact if it differs
    or is missing. `lasting`: the file is the stored one itself, so a match is remembered while
    its size and mtime stay the same (a temporary copy is hashed every time)."""
    try:
        stat = os.stat(local)
    except FileNotFoundError:
        raise missing_file(stage, key, entry) from None
    seen = (local, stat.st_size, stat.st_mtime_ns, entry.sha256)
    if lasting and seen in _VERIFIED_LOCAL:
        return
    if stat.st_size != entry.bytes or sha256_file(local) != entry.sha256:
        raise CorruptArtifact(
            f"{stage}/{key}/{entry.path} does not match its manifest ({stat.st_size} bytes, manifest says {entry.bytes}; "
            f"or its sha256 differs): the artifact is corrupt and was not read. {rebuild_hint(stage)}"
        )
    if lasting:
        _VERIFIED_LOCAL.add(seen)
