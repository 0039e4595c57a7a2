"""Fetch corpus source files (OPUS `.txt.gz` / Moses `.zip`) once, into a local cache.

The corpus stage reads its inputs from HTTP(S) or any fsspec URL (s3://, gs://, ...).
Downloads are flaky and large, so this module streams each file to disk while hashing
it, retries transient failures with backoff, and records a sha256 that goes into the
artifact manifest. A URL fetched once is served from the cache afterwards without any
network access. URLs may carry credentials (user:password@, signed query strings), so
only `public_url` forms ever reach messages, logs or the cache sidecar.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import aiohttp
import fsspec
from fsspec.asyn import sync
from fsspec.exceptions import FSTimeoutError

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
"""Read/hash granularity: large enough to keep per-chunk overhead negligible."""
MAX_BACKOFF_S = 30.0
SIDECAR_SUFFIX = ".fetch.json"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_URL_IN_TEXT_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


@dataclass(frozen=True)
class FetchedFile:
    """A fetched file: where it lies locally and the digest to record in the manifest."""

    url: str
    """Public form of the source URL (no userinfo, no query): safe to log and persist."""
    path: Path
    sha256: str
    bytes: int


class DownloadError(RuntimeError):
    """A fetch failed for good; the message names the public URL and the cause."""

    def __init__(self, message: str, *, url: str, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.attempts = attempts


class _Transient(Exception):
    """A failure worth retrying (connection trouble, 429/5xx, truncated body)."""

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class _Permanent(Exception):
    """A failure that retrying cannot fix (4xx, missing object, permission)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _Mismatch(Exception):
    """The download completed but is not the file the caller expects; deterministic."""

    def __init__(self, got: str) -> None:
        super().__init__(got)
        self.got = got


def public_url(url: str) -> str:
    """Return `url` without userinfo, query or fragment, so it can be logged and stored.

    Credentials and signed-URL tokens live in those parts; the rest still identifies
    the source for humans. Plain local paths are returned unchanged.
    """
    url = os.fspath(url)
    if "://" not in url:
        return url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def fetch(
    url: str,
    cache_dir: Path,
    *,
    expected_sha256: str | None = None,
    retries: int = 5,
    backoff_s: float = 1.0,
    timeout_s: float = 60.0,
    progress: Callable[[int], None] | None = None,
) -> FetchedFile:
    """Return a local copy of `url` with its sha256, downloading it at most once.

    Local paths and file:// URLs are hashed in place (never copied). Remote URLs are
    streamed into `cache_dir/<sha256 of url>/`, retried `retries` times on transient
    failures with exponential backoff, and reused from the cache on later calls.
    `progress(n)` is called with the size of each chunk written. Raises DownloadError.
    """
    url = os.fspath(url)
    pub = public_url(url)
    expected = _normalise_digest(expected_sha256)
    local = _local_path(url)
    if local is not None:
        return _fetch_local(url, pub, local, expected)

    final = _cache_path(url, Path(cache_dir))
    cached = _read_cache(final, expected)
    if cached is not None:
        logger.debug("cache hit for %s: %s", pub, final)
        return FetchedFile(url=pub, path=final, sha256=cached[0], bytes=cached[1])

    attempts = retries + 1
    last: _Transient | None = None
    for attempt in range(attempts):
        if attempt:
            delay = min(backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S)
            if last is not None and last.retry_after_s is not None:
                delay = max(delay, min(last.retry_after_s, MAX_BACKOFF_S))
            logger.warning(
                "fetch %s failed (attempt %d/%d): %s; retrying in %.2fs",
                pub,
                attempt,
                attempts,
                last,
                delay,
            )
            time.sleep(delay)
        try:
            digest, size = _download(url, final, expected, timeout_s, progress)
        except _Mismatch as exc:
            raise DownloadError(
                f"fetch {pub}: sha256 mismatch, expected {expected}, got {exc.got}",
                url=pub,
                attempts=attempt + 1,
            ) from None
        except _Permanent as exc:
            raise DownloadError(f"fetch {pub} failed: {exc}", url=pub, status=exc.status, attempts=attempt + 1) from None
        except _Transient as exc:
            last = exc
            continue
        _write_sidecar(final, pub, digest, size)
        return FetchedFile(url=pub, path=final, sha256=digest, bytes=size)

    raise DownloadError(
        f"fetch {pub} failed after {attempts} attempts; last error: {last}",
        url=pub,
        status=last.status if last else None,
        attempts=attempts,
    )


# ---------------------------------------------------------------------------- local


def _local_path(url: str) -> Path | None:
    """The filesystem path for a plain path or file:// URL; None for anything remote."""
    if "://" not in url:
        return Path(url)
    parts = urlsplit(url)
    if parts.scheme == "file" and parts.netloc in ("", "localhost"):
        return Path(urllib.request.url2pathname(parts.path))
    return None


def _fetch_local(url: str, pub: str, path: Path, expected: str | None) -> FetchedFile:
    """Hash a local file in place: copying it into the cache would only waste disk."""
    try:
        digest, size = _hash_file(path)
    except OSError as exc:
        raise DownloadError(f"fetch {pub} failed: {type(exc).__name__}: {exc.strerror or exc}", url=pub) from None
    if expected is not None and digest != expected:
        raise DownloadError(f"fetch {pub}: sha256 mismatch, expected {expected}, got {digest}", url=pub)
    return FetchedFile(url=pub, path=path, sha256=digest, bytes=size)


def _hash_file(path: Path) -> tuple[str, int]:
    """Stream `path` through sha256 in CHUNK_BYTES pieces (files may be many GB)."""
    h = hashlib.sha256()
    size = 0
    buf = bytearray(CHUNK_BYTES)
    view = memoryview(buf)
    with open(path, "rb") as f:
        while n := f.readinto(buf):
            h.update(view[:n])
            size += n
    return h.hexdigest(), size


# ---------------------------------------------------------------------------- cache


def _cache_path(url: str, cache_dir: Path) -> Path:
    """`cache_dir/<sha256 of url>/<basename>`; the key ignores userinfo (not content)."""
    parts = urlsplit(url)
    key_url = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, ""))
    key = hashlib.sha256(key_url.encode()).hexdigest()
    name = unquote(parts.path.rstrip("/").rpartition("/")[2])
    name = name.replace("\\", "_").lstrip(".") or "download"
    return cache_dir / key / name


def _sidecar(final: Path) -> Path:
    return final.with_name(final.name + SIDECAR_SUFFIX)


def _read_cache(final: Path, expected: str | None) -> tuple[str, int] | None:
    """(sha256, bytes) of a complete cached download, or None if it must be fetched."""
    try:
        meta = json.loads(_sidecar(final).read_text())
        digest, size = str(meta["sha256"]), int(meta["bytes"])
        if final.stat().st_size != size:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if expected is not None and digest != expected:
        return None
    return digest, size


def _write_sidecar(final: Path, pub: str, digest: str, size: int) -> None:
    """Record what the cached file is; written last, so its presence means complete."""
    meta = {
        "url": pub,
        "sha256": digest,
        "bytes": size,
        "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    side = _sidecar(final)
    tmp = side.with_name(side.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp, side)


# ---------------------------------------------------------------------------- remote


def _download(
    url: str,
    final: Path,
    expected: str | None,
    timeout_s: float,
    progress: Callable[[int], None] | None,
) -> tuple[str, int]:
    """One attempt: stream `url` into a part file next to `final`, verify, rename.

    The part file name is unique per attempt so that concurrent fetches of the same
    URL cannot interleave their bytes; the rename is atomic, and a file that fails its
    checksum never replaces `final`.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=final.name + ".", suffix=".part")
    part = Path(tmp)
    h = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            with _open_remote(url, timeout_s) as (chunks, expected_len):
                for chunk in chunks:
                    out.write(chunk)
                    h.update(chunk)
                    size += len(chunk)
                    if progress is not None:
                        progress(len(chunk))
            if expected_len is not None and size != expected_len:
                raise _Transient(f"truncated body: got {size} of {expected_len} bytes")
        if expected is not None and h.hexdigest() != expected:
            raise _Mismatch(h.hexdigest())
        _sidecar(final).unlink(missing_ok=True)  # never let an old sidecar describe new bytes
        os.replace(part, final)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return h.hexdigest(), size


@contextmanager
def _open_remote(url: str, timeout_s: float) -> Iterator[tuple[Iterator[bytes], int | None]]:
    """Yield (chunks, expected length or None); remote errors become _Transient/_Permanent.

    Only errors from opening and reading are classified: an error of the caller's own
    (say, a full local disk) propagates unchanged and is not mistaken for a retryable one.
    """
    scheme = urlsplit(url).scheme.lower()
    opener = _open_http if scheme in ("http", "https") else _open_fsspec
    with ExitStack() as stack:
        try:
            chunks, expected_len = stack.enter_context(opener(url, timeout_s))
        except Exception as exc:  # noqa: BLE001 - every failure becomes one classified line naming the URL
            raise _classify(exc, url) from None
        yield _classified(chunks, url), expected_len


def _classified(chunks: Iterator[bytes], url: str) -> Iterator[bytes]:
    try:
        yield from chunks
    except Exception as exc:  # noqa: BLE001 - every failure becomes one classified line naming the URL
        raise _classify(exc, url) from None


def _classify(exc: Exception, url: str) -> _Transient | _Permanent:
    """Decide whether retrying can help; unknown backend errors are not retried."""
    if isinstance(exc, (_Transient, _Permanent)):
        return exc
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return _Permanent(_describe(exc, url))
    if isinstance(exc, (OSError, asyncio.TimeoutError, aiohttp.ClientError, FSTimeoutError, EOFError)):
        return _Transient(_describe(exc, url))
    return _Permanent(_describe(exc, url))


@contextmanager
def _open_http(url: str, timeout_s: float) -> Iterator[tuple[Iterator[bytes], int | None]]:
    """Stream one GET through fsspec's aiohttp session.

    `fsspec.open` on http first issues a HEAD (and a GET when HEAD fails) and turns any
    failure of those into FileNotFoundError, losing the status; a presigned GET URL also
    rejects HEAD. So we issue the single GET ourselves on fsspec's loop and session.
    Auto-decompression is off and identity is requested: a `.gz` must arrive byte-exact,
    and only then does Content-Length describe the bytes we count.
    """
    fs = fsspec.filesystem("http")
    loop = fs.loop
    session = sync(loop, fs.set_session)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)

    async def get() -> aiohttp.ClientResponse:
        return await session.get(
            url,
            timeout=timeout,
            auto_decompress=False,
            headers={"Accept-Encoding": "identity"},
        )

    async def finish(resp: aiohttp.ClientResponse, ok: bool) -> None:
        if ok:
            resp.release()
        else:
            resp.close()

    resp = sync(loop, get)
    ok = False
    try:
        status = resp.status
        if status == 429 or status >= 500:
            raise _Transient(
                f"HTTP {status} {resp.reason or ''}".rstrip(),
                status=status,
                retry_after_s=_retry_after(resp.headers.get("Retry-After")),
            )
        if status >= 400:
            raise _Permanent(f"HTTP {status} {resp.reason or ''}".rstrip(), status=status)

        expected_len: int | None = None
        encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
        length = resp.headers.get("Content-Length")
        if length is not None and encoding in ("", "identity") and length.isdigit():
            expected_len = int(length)

        def chunks() -> Iterator[bytes]:
            while chunk := sync(loop, resp.content.read, CHUNK_BYTES):
                yield chunk

        yield chunks(), expected_len
        ok = True
    finally:
        sync(loop, finish, resp, ok)


@contextmanager
def _open_fsspec(url: str, timeout_s: float) -> Iterator[tuple[Iterator[bytes], int | None]]:
    """Stream any other fsspec URL (s3://, gs://, memory://, ...) in CHUNK_BYTES reads."""
    del timeout_s  # backends configure their own timeouts
    with fsspec.open(url, "rb", block_size=CHUNK_BYTES) as f:
        size = getattr(f, "size", None)
        expected_len = size if isinstance(size, int) and size >= 0 else None

        def chunks() -> Iterator[bytes]:
            while chunk := f.read(CHUNK_BYTES):
                yield chunk

        yield chunks(), expected_len


def _retry_after(value: str | None) -> float | None:
    """Seconds from a numeric Retry-After header (HTTP dates are rare; ignored)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _describe(exc: BaseException, url: str) -> str:
    """`Type: message` with every URL and credential fragment of `url` scrubbed out."""
    text = str(exc)
    parts = urlsplit(url)
    secrets = [url]
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        secrets += [userinfo, userinfo.partition(":")[2], unquote(userinfo.partition(":")[2])]
    if parts.query:
        secrets += [parts.query, unquote(parts.query)]
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "***" if secret != url else public_url(url))
    text = _URL_IN_TEXT_RE.sub(lambda m: public_url(m.group(0)), text)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def _normalise_digest(digest: str | None) -> str | None:
    """Accept `sha256:<hex>` or upper-case hex; reject anything that is not a sha256."""
    if digest is None:
        return None
    value = digest.strip().lower().removeprefix("sha256:")
    if not _SHA256_RE.fullmatch(value):
        raise ValueError(f"expected_sha256 must be 64 hex digits, got {digest!r}")
    return value
