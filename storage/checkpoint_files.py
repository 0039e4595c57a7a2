"""Files a stage keeps under the artifact root while it builds an artifact (checkpoints), so a
build killed on one machine can resume on another that reaches the same root.

They live in `{root}/_checkpoints/{stage}/{key}/`, named by the artifact's key, so only a build
of exactly that artifact finds them. The store removes them once the artifact is committed
(`ArtifactStore.commit`, which knows only the folder's name). The store does not know what the files mean: the stage chooses
their names and the order they are written in (write a pointer file last, and a kill
mid-upload leaves the previous state usable). Every file is written whole (local: temp file +
rename; S3: one PUT).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from storage.keys import check_key
from storage.layout import CHECKPOINTS_DIR, check_stage
from storage.store import ArtifactStore

_GLOB_CHARS = "*?["


class CheckpointFiles:
    """`{root}/_checkpoints/{stage}/{key}/`: read, write, list and remove files by relative name."""

    def __init__(self, store: ArtifactStore, stage: str, key: str) -> None:
        self.store = store
        self.stage, self.key = check_stage(stage), check_key(key)
        self.base = f"{store.root_path}/{CHECKPOINTS_DIR}/{stage}/{key}"

    @property
    def uri(self) -> str:
        return f"{self.store.root_uri}/{CHECKPOINTS_DIR}/{self.stage}/{self.key}"

    def _path(self, name: str) -> str:
        parts = name.split("/")
        if "\\" in name or any(c in name for c in _GLOB_CHARS) or any(p in ("", ".", "..") for p in parts):
            raise ValueError(
                f"checkpoint file name {name!r}: use a relative path without '.', '..', '\\', empty parts or glob characters"
            )
        return f"{self.base}/{name}"

    def read(self, name: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        return self.store.backend.read_bytes(self._path(name))

    def write(self, name: str, data: bytes) -> None:
        self.store.backend.write_object(self._path(name), data)

    def put(self, local: Path, name: str) -> None:
        """Upload a local file as `name`, whole."""
        self.store.backend.copy_local_file(str(local), self._path(name))

    def get(self, name: str, local: Path) -> None:
        """Download `name` to `local` (a temp file renamed into place)."""
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.tmp-{uuid.uuid4().hex}")
        try:
            self.store.backend.download(self._path(name), str(tmp))
            os.replace(tmp, local)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def names(self, folder: str = "") -> list[str]:
        """Relative names of the files under `folder` (all of them by default), sorted; temporary
        files of an interrupted local write (names starting with '.') are left out."""
        found = self.store.backend.find(self._path(folder) if folder else self.base)
        prefix = self.base.rstrip("/") + "/"
        names = [p[len(prefix) :] for p in found if p.startswith(prefix)]
        return sorted(n for n in names if not any(part.startswith(".") for part in n.split("/")))

    def remove(self, name: str = "") -> None:
        """Remove a file or folder (everything by default); absent is fine."""
        self.store.backend.remove(self._path(name) if name else self.base)
