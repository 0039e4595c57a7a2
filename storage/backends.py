"""How the store reaches its bytes: one strategy for a local folder, one for an object store.

`ArtifactStore` picks a backend once (`backend_for`) and asks it for every operation whose
implementation differs between a disk and a bucket: writing an object whole (local: temp file
+ rename; S3: one PUT), creating one only if absent (local: hard link; S3: If-None-Match),
placing a local file, compare-and-swap of a small object (local: a lock file; S3: If-Match),
and getting a checked local path for a stored file (local: the file itself; S3: a download).
What is common to every fsspec filesystem (fresh listings, reads, sizes) is in the base class.
This module knows nothing about artifacts, manifests or refs: callers pass paths and checks.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from storage.errors import RootNotFound, StoreAccessError, StoreError, StoreWriteError, explain

ROOT_SOURCES = "XLEMBED_ROOT or the config's pipeline.root"
_HASH_CHUNK = 1 << 20

# `check(local_path, lasting)`: raise if the bytes at `local_path` are not what the caller
# expects; `lasting` says the path is the stored file itself (a result may be remembered),
# not a temporary copy that is deleted afterwards
FileCheck = Callable[[str, bool], None]


def sha256_file(path: str | Path, fs: Any = None) -> str:
    digest = hashlib.sha256()
    opener = fs.open(path, "rb") if fs is not None else open(path, "rb")
    with opener as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_error(exc: OSError, what: str) -> StoreWriteError:
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return StoreWriteError(exc.errno or 0, f"cannot write {what}: {reason}")


def _precondition_failed(exc: BaseException) -> bool:
    """A conditional S3 write that lost (412 PreconditionFailed, or 409 ConditionalRequestConflict
    when two conditional writes race); s3fs turns both into a plain OSError."""
    cause = exc.__cause__ or exc.__context__
    code = getattr(cause, "response", {}).get("Error", {}).get("Code", "") if cause is not None else ""
    text = f"{code} {exc}"
    return any(
        mark in text
        for mark in ("PreconditionFailed", "412", "ConditionalRequestConflict", "pre-conditions you specified did not hold")
    )


class StorageBackend(ABC):
    """The operations of one filesystem, every read fresh: other processes write here too
    (s3fs keeps directory listings, and the instance, for the life of the process)."""

    is_local = False

    def __init__(self, fs: Any, root_path: str) -> None:
        self.fs, self.root_path = fs, root_path

    # ------------------------------------------------------ common to all filesystems
    def read_bytes(self, path: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""
        self.fs.invalidate_cache(path)
        try:
            return self.fs.cat_file(path)
        except FileNotFoundError:
            return None

    def read_many(self, paths: list[str]) -> dict[str, bytes]:
        """Fetch many small objects at once; absent ones are left out, any other failure raises.
        (Leaving out an object that could not be read would make a committed artifact look
        uncommitted, or a referenced one unreferenced, and `gc` would delete it.)"""
        if not paths:
            return {}
        blobs = self.fs.cat(paths, on_error="return")
        out = {}
        for path in paths:
            blob = blobs.get(path)
            if blob is None:  # fsspec spelled the path differently: read it on its own
                blob = self.read_bytes(path)
            if isinstance(blob, FileNotFoundError) or blob is None:
                continue
            if isinstance(blob, BaseException):
                raise StoreError(f"cannot read {path}: {type(blob).__name__}: {blob}") from blob
            out[path] = blob
        return out

    def exists(self, path: str) -> bool:
        self.fs.invalidate_cache(path)
        return self.fs.exists(path)

    def size(self, path: str) -> int:
        """The object's size in bytes; FileNotFoundError when it does not exist."""
        self.fs.invalidate_cache(path)
        return self.fs.size(path)

    def ls(self, path: str, detail: bool = False) -> list[Any]:
        """`path`'s entries (FileNotFoundError when it does not exist)."""
        self.fs.invalidate_cache(path)
        return self.fs.ls(path, detail=detail)

    def find(self, path: str) -> list[str]:
        """Every file under `path`, recursively ([] when there is none)."""
        self.fs.invalidate_cache(path)
        try:
            return list(self.fs.find(path))
        except FileNotFoundError:
            return []

    def download(self, path: str, local: str) -> None:
        """Copy the stored object to a local file (FileNotFoundError when it does not exist)."""
        self.fs.get_file(path, local)

    def remove(self, path: str) -> None:
        """Remove a file or a folder with everything under it; absent is fine."""
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(path, recursive=True)
        self.fs.invalidate_cache(path)

    # ------------------------------------------------- what each filesystem does its own way
    @property
    def arrow_filesystem(self) -> Any:
        """The filesystem pyarrow.dataset should read paths with (None: its own local one)."""
        return self.fs

    def url(self, root_uri: str, name: str) -> str:
        """A link to `{root}/{name}` a browser or a tool can follow."""
        return f"{root_uri}/{name}"

    def prepare_root(self) -> None:
        """Make the root usable for writing, where that needs anything."""

    @abstractmethod
    def check_root(self, root_uri: str, *, must_exist: bool) -> bool:
        """Reach the root once; StoreErrors that name the fix (see `ArtifactStore.check_root`)."""

    @abstractmethod
    def write_object(self, path: str, data: bytes, *, exclusive: bool = False) -> bool:
        """Write the object whole; with `exclusive`, only if absent (False when it exists)."""

    @abstractmethod
    def copy_local_file(self, local: str, dest: str) -> None:
        """Place a copy of a local file at `dest`, whole; the local file stays."""

    @abstractmethod
    def move_local_file(self, local: str, dest: str) -> None:
        """Place a local file at `dest`, whole; the local file is gone afterwards."""

    @abstractmethod
    def read_versioned(self, path: str) -> tuple[bytes | None, Any]:
        """The object's bytes (None: absent) and a token for `write_if_unchanged`."""

    @abstractmethod
    def write_if_unchanged(self, path: str, data: bytes, token: Any) -> bool:
        """Replace the object only if it is still what `token` was read with (None: absent)."""

    @abstractmethod
    def part_file_dir(self, dest: str) -> str | None:
        """Where a file bound for `dest` is written before it is moved there (None: the system's)."""

    @abstractmethod
    def verified_path(self, path: str, check: FileCheck) -> contextlib.AbstractContextManager[str]:
        """A local path to the stored file's bytes, passed through `check` before it is handed out."""

    @abstractmethod
    def sizes(self, base: str, names: Iterable[str]) -> dict[str, int]:
        """Sizes of the files `base/name` that exist, by name."""

    @abstractmethod
    def local_folder(self, base: str, names: list[str], cache: Path, check: Callable[[str, str, bool], None]) -> Path:
        """A local folder holding `base/name` for each name, each passed through
        `check(name, local_path, lasting)` (a remote root's are downloaded into `cache` once)."""


class LocalFiles(StorageBackend):
    """A root on local disk: writes are a temporary file renamed into place, and compare-and-swap
    holds an exclusive lock of `lock_path` (processes of one machine share the root)."""

    is_local = True

    def __init__(self, fs: Any, root_path: str, lock_path: str) -> None:
        super().__init__(fs, root_path)
        self.lock_path = lock_path

    @property
    def arrow_filesystem(self) -> Any:
        return None

    def url(self, root_uri: str, name: str) -> str:
        return Path(root_uri, name).as_uri()

    def prepare_root(self) -> None:
        Path(self.root_path).mkdir(parents=True, exist_ok=True)

    def check_root(self, root_uri: str, *, must_exist: bool) -> bool:
        exists = Path(self.root_path).is_dir()
        if must_exist and not exists:
            raise RootNotFound(f"artifact root {root_uri} does not exist (set by --root, {ROOT_SOURCES})")
        return exists

    def write_object(self, path: str, data: bytes, *, exclusive: bool = False) -> bool:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        try:
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:
                raise write_error(exc, path) from exc
            if exclusive:
                try:
                    os.link(tmp, path)  # atomic create-if-absent
                except FileExistsError:
                    return False
            else:
                os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return True

    def copy_local_file(self, local: str, dest: str) -> None:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        tmp = f"{Path(dest).parent}/.{Path(dest).name}.tmp-{uuid.uuid4().hex}"
        try:
            shutil.copyfile(local, tmp)
            os.replace(tmp, dest)
        except OSError as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise write_error(exc, dest) from exc

    def move_local_file(self, local: str, dest: str) -> None:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        os.replace(local, dest)

    def read_versioned(self, path: str) -> tuple[bytes | None, Any]:
        data = self.read_bytes(path)
        return data, data

    def write_if_unchanged(self, path: str, data: bytes, token: Any) -> bool:
        with self._lock():
            if self.read_bytes(path) != token:
                return False
            self.write_object(path, data)
            return True

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        import fcntl

        Path(self.lock_path).parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def part_file_dir(self, dest: str) -> str | None:
        # beside its destination: the move into place is then a rename on one filesystem
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        return str(Path(dest).parent)

    @contextlib.contextmanager
    def verified_path(self, path: str, check: FileCheck) -> Iterator[str]:
        check(path, True)
        yield path

    def sizes(self, base: str, names: Iterable[str]) -> dict[str, int]:
        found = {}
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                found[name] = os.stat(f"{base}/{name}").st_size
        return found

    def local_folder(self, base: str, names: list[str], cache: Path, check: Callable[[str, str, bool], None]) -> Path:
        for name in names:
            check(name, f"{base}/{name}", True)
        return Path(base)


class ObjectStoreFiles(StorageBackend):
    """A root in a bucket (S3 through s3fs): every object is one PUT, creation and
    compare-and-swap are conditional PUTs, so no lock is needed across machines."""

    def check_root(self, root_uri: str, *, must_exist: bool) -> bool:
        bucket = self.root_path.split("/", 1)[0]
        try:
            self.fs.invalidate_cache(bucket)
            self.fs.ls(bucket)  # the bucket itself: empty or not, it answers
            if self.root_path == bucket:
                return True
            self.fs.invalidate_cache(self.root_path)
            exists = bool(self.fs.ls(self.root_path))
        except FileNotFoundError as exc:
            message = explain(exc, root_uri)
            if message is not None and "bucket" in message:
                raise RootNotFound(message) from None
            exists = False
        except Exception as exc:  # noqa: BLE001 - classified below; anything unknown propagates
            message = explain(exc, root_uri)
            if message is None:
                raise
            raise StoreAccessError(message) from exc
        if must_exist and not exists:
            raise RootNotFound(
                f"artifact root {root_uri} does not exist: nothing is stored under it (set by --root, {ROOT_SOURCES})"
            )
        return exists

    def write_object(self, path: str, data: bytes, *, exclusive: bool = False) -> bool:
        self.fs.invalidate_cache(path)
        if exclusive:
            if self.fs.exists(path):
                return False
            try:
                self.fs.pipe_file(path, data, mode="create")  # S3 conditional PUT (If-None-Match: *)
            except FileExistsError:
                return False
            except OSError as exc:
                if _precondition_failed(exc):
                    return False
                raise
            return True
        self.fs.pipe_file(path, data)
        return True

    def copy_local_file(self, local: str, dest: str) -> None:
        self.fs.put_file(local, dest)

    def move_local_file(self, local: str, dest: str) -> None:
        self.fs.put_file(local, dest)
        os.unlink(local)

    def read_versioned(self, path: str) -> tuple[bytes | None, Any]:
        self.fs.invalidate_cache(path)
        try:
            etag = self.fs.info(path)["ETag"]
        except FileNotFoundError:
            return None, None
        # read after the ETag: if the object changed in between, the conditional write fails
        return self.read_bytes(path), etag

    def write_if_unchanged(self, path: str, data: bytes, token: Any) -> bool:
        if token is None:
            return self.write_object(path, data, exclusive=True)
        bucket, key, _ = self.fs.split_path(path)
        try:
            self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfMatch=token)
        except (FileExistsError, FileNotFoundError):
            return False
        except OSError as exc:
            if _precondition_failed(exc):
                return False
            raise
        self.fs.invalidate_cache(path)
        return True

    def part_file_dir(self, dest: str) -> str | None:
        return None  # the system's temporary folder: the file is uploaded from there

    @contextlib.contextmanager
    def verified_path(self, path: str, check: FileCheck) -> Iterator[str]:
        # downloaded once into a temporary file and checked there, before anyone parses it
        fd, tmp = tempfile.mkstemp(prefix=".read-", suffix=".parquet")
        os.close(fd)
        try:
            self.download(path, tmp)
            check(tmp, False)
            yield tmp
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def sizes(self, base: str, names: Iterable[str]) -> dict[str, int]:
        # one listing for the whole folder instead of a request per file
        self.fs.invalidate_cache(base)
        listing = self.fs.find(base, detail=True)
        wanted = set(names)
        found = {path[len(base) + 1 :]: info.get("size") for path, info in listing.items()}
        return {name: size for name, size in found.items() if name in wanted}

    def local_folder(self, base: str, names: list[str], cache: Path, check: Callable[[str, str, bool], None]) -> Path:
        for name in names:
            local = cache / name
            try:
                check(name, str(local), False)
                continue  # downloaded before, and still whole
            except StoreError:
                pass
            local.parent.mkdir(parents=True, exist_ok=True)
            tmp = local.with_name(f".{local.name}.tmp-{uuid.uuid4().hex}")
            try:
                self.download(f"{base}/{name}", str(tmp))
                check(name, str(tmp), False)
                os.replace(tmp, local)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
        return cache


def backend_for(fs: Any, root_path: str, lock_path: str) -> StorageBackend:
    """The backend for an fsspec filesystem: local disk, or an object store. `lock_path`: the
    file a local root locks for compare-and-swap."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return LocalFiles(fs, root_path, lock_path) if "file" in protocols else ObjectStoreFiles(fs, root_path)
