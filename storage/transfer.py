"""Copy committed artifacts between stores (a local folder and a bucket), verifying checksums.

Each file is fetched to a local temporary file, hashed, compared with the source manifest,
and only then written to the destination; the manifest is committed last, as for any
run, so an interrupted copy leaves nothing visible. Artifacts the destination already
has committed are skipped.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from storage.manifest import Manifest
from storage.store import ArtifactStore, StoreError, sha256_file


@dataclass(frozen=True)
class CopyResult:
    stage: str
    key: str
    copied: bool  # False: the destination already had it
    files: int
    bytes: int


def copy_artifact(
    source: ArtifactStore, destination: ArtifactStore, stage: str, key: str, progress: Callable[[int], None] | None = None
) -> CopyResult:
    """Copy one committed artifact; a file whose checksum differs from its manifest aborts the copy."""
    manifest = source.manifest(stage, key)
    if destination.is_committed(stage, key):
        return CopyResult(stage, key, False, len(manifest.files), manifest.total_bytes)
    src_base, dst_base = source.artifact_dir(stage, key), destination.artifact_dir(stage, key)
    with tempfile.TemporaryDirectory(prefix="xlembed-copy-") as scratch:
        for index, entry in enumerate(manifest.files):
            local = os.path.join(scratch, f"{index:06d}")
            source.fs.get_file(f"{src_base}/{entry.path}", local)
            digest = sha256_file(local)
            if digest != entry.sha256 or os.path.getsize(local) != entry.bytes:
                raise StoreError(
                    f"{source.uri(stage, key)}/{entry.path}: sha256 {digest[:16]}… does not match the manifest "
                    f"({entry.sha256[:16]}…); not copied"
                )
            destination.put_local_file(local, f"{dst_base}/{entry.path}")
            if progress is not None:
                progress(entry.bytes)
    destination.commit(Manifest.model_validate(manifest.model_dump()))
    return CopyResult(stage, key, True, len(manifest.files), manifest.total_bytes)


def copy_refs(source: ArtifactStore, destination: ArtifactStore, pipelines: set[str] | None = None) -> int:
    """Copy named refs whose artifacts the destination has; returns how many were written."""
    written = 0
    for ref in source.list_refs():
        if pipelines is not None and ref.pipeline not in pipelines:
            continue
        if destination.is_committed(ref.stage, ref.key):
            destination.write_ref(ref)
            written += 1
    return written
