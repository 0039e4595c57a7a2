"""tasks.corpus.download against a real HTTP server on 127.0.0.1 (no other network)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # repo root, when no pyproject says so

from tasks.corpus.download import DownloadError, FetchedFile, fetch, public_url  # noqa: E402

PAYLOAD = gzip.compress(b"".join(b"line %d of a monolingual corpus\n" % i for i in range(20_000)))
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()

# A route answers one request: (handler, n-th request to this path, 0-based) -> None.
Route = Callable[[BaseHTTPRequestHandler, int], None]


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes = b"", length: int | None = None) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/gzip")
    handler.send_header("Content-Length", str(len(body) if length is None else length))
    handler.end_headers()
    handler.wfile.write(body)


def ok(handler: BaseHTTPRequestHandler, n: int) -> None:
    send(handler, 200, PAYLOAD)


def fail_first(k: int, status: int) -> Route:
    def route(handler: BaseHTTPRequestHandler, n: int) -> None:
        if n < k:
            send(handler, status, b"busy")
        else:
            ok(handler, n)

    return route


def truncate_first(k: int) -> Route:
    """Promise the whole payload, send half, hang up: a connection dropped mid-body."""

    def route(handler: BaseHTTPRequestHandler, n: int) -> None:
        if n >= k:
            return ok(handler, n)
        send(handler, 200, PAYLOAD[: len(PAYLOAD) // 2], length=len(PAYLOAD))
        handler.wfile.flush()
        handler.close_connection = True

    return route


@dataclass
class Server:
    base: str
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, auth

    def url(self, path: str) -> str:
        return self.base + path

    def gets(self, path: str) -> int:
        return sum(1 for m, p, _ in self.requests if m == "GET" and p == path)


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server(base="")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as aiohttp pools connections

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            with lock:
                n = sum(1 for m, p, _ in state.requests if m == "GET" and p == path)
                state.requests.append(("GET", path, self.headers.get("Authorization")))
            route = state.routes.get(path)
            if route is None:
                send(self, 404, b"not found")
            else:
                route(self, n)

        def do_HEAD(self) -> None:
            with lock:
                state.requests.append(("HEAD", urlsplit(self.path).path, None))
            send(self, 405)

        def log_message(self, format: str, *args: object) -> None:
            pass

    class QuietServer(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: object, client_address: object) -> None:
            pass  # clients that give up (timeouts) make the handler hit a broken pipe

    httpd = QuietServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_download_matches_hashlib_and_reports_progress(server: Server, tmp_path: Path) -> None:
    server.routes["/mono/en.txt.gz"] = ok
    seen: list[int] = []
    got = fetch(server.url("/mono/en.txt.gz"), tmp_path, progress=seen.append, backoff_s=0.01)
    assert isinstance(got, FetchedFile)
    assert got.sha256 == PAYLOAD_SHA
    assert got.bytes == len(PAYLOAD) == sum(seen)
    assert got.path.name == "en.txt.gz" and got.path.read_bytes() == PAYLOAD
    assert got.path.is_relative_to(tmp_path)
    assert got.url == server.url("/mono/en.txt.gz")
    assert not list(tmp_path.rglob("*.part"))
    meta = json.loads(got.path.with_name("en.txt.gz.fetch.json").read_text())
    assert meta["sha256"] == PAYLOAD_SHA and meta["bytes"] == len(PAYLOAD) and meta["fetched_at"]
    assert server.requests == [("GET", "/mono/en.txt.gz", None)]  # one GET, no HEAD


def test_second_fetch_hits_cache(server: Server, tmp_path: Path) -> None:
    server.routes["/en.txt.gz"] = ok
    first = fetch(server.url("/en.txt.gz"), tmp_path)
    second = fetch(server.url("/en.txt.gz"), tmp_path, expected_sha256=PAYLOAD_SHA)
    assert second == first
    assert server.gets("/en.txt.gz") == 1


def test_cache_with_other_expected_digest_refetches(server: Server, tmp_path: Path) -> None:
    server.routes["/en.txt.gz"] = ok
    fetch(server.url("/en.txt.gz"), tmp_path)
    with pytest.raises(DownloadError):
        fetch(server.url("/en.txt.gz"), tmp_path, expected_sha256="0" * 64)
    assert server.gets("/en.txt.gz") == 2
    # the good cached copy survived the failed re-download
    assert fetch(server.url("/en.txt.gz"), tmp_path).sha256 == PAYLOAD_SHA
    assert server.gets("/en.txt.gz") == 2


def test_retries_503_then_succeeds(server: Server, tmp_path: Path) -> None:
    server.routes["/a.zip"] = fail_first(2, 503)
    got = fetch(server.url("/a.zip"), tmp_path, backoff_s=0.01)
    assert got.sha256 == PAYLOAD_SHA
    assert server.gets("/a.zip") == 3


def test_retries_429(server: Server, tmp_path: Path) -> None:
    server.routes["/a.zip"] = fail_first(1, 429)
    assert fetch(server.url("/a.zip"), tmp_path, backoff_s=0.01).sha256 == PAYLOAD_SHA
    assert server.gets("/a.zip") == 2


def test_retries_connection_dropped_mid_body(server: Server, tmp_path: Path) -> None:
    server.routes["/a.zip"] = truncate_first(2)
    got = fetch(server.url("/a.zip"), tmp_path, backoff_s=0.01)
    assert got.sha256 == PAYLOAD_SHA and got.path.read_bytes() == PAYLOAD
    assert server.gets("/a.zip") == 3
    assert not list(tmp_path.rglob("*.part"))


def test_truncated_every_time_fails_with_attempt_count(server: Server, tmp_path: Path) -> None:
    server.routes["/a.zip"] = truncate_first(10**6)
    with pytest.raises(DownloadError, match="after 3 attempts") as info:
        fetch(server.url("/a.zip"), tmp_path, retries=2, backoff_s=0.01)
    assert info.value.attempts == 3
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_404_fails_at_once(server: Server, tmp_path: Path) -> None:
    url = server.url("/missing.txt.gz")
    with pytest.raises(DownloadError) as info:
        fetch(url, tmp_path, backoff_s=0.01)
    assert "404" in str(info.value) and url in str(info.value)
    assert info.value.status == 404
    assert server.gets("/missing.txt.gz") == 1


def test_always_500_gives_up_after_retries(server: Server, tmp_path: Path) -> None:
    server.routes["/a.zip"] = fail_first(10**6, 500)
    url = server.url("/a.zip")
    with pytest.raises(DownloadError) as info:
        fetch(url, tmp_path, retries=3, backoff_s=0.01)
    msg = str(info.value)
    assert "4 attempts" in msg and "500" in msg and url in msg
    assert info.value.status == 500
    assert server.gets("/a.zip") == 4


def test_checksum_mismatch_names_both_digests_and_leaves_nothing(server: Server, tmp_path: Path) -> None:
    server.routes["/a.zip"] = ok
    wrong = "ab" * 32
    with pytest.raises(DownloadError) as info:
        fetch(server.url("/a.zip"), tmp_path, expected_sha256=wrong, backoff_s=0.01)
    msg = str(info.value)
    assert wrong in msg and PAYLOAD_SHA in msg and server.url("/a.zip") in msg
    assert server.gets("/a.zip") == 1  # deterministic: no retry
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_credentials_never_leak(server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.routes["/priv/en.txt.gz"] = fail_first(1, 503)
    host = server.base.removeprefix("http://")
    url = f"http://user:secret@{host}/priv/en.txt.gz?token=qwzxtoken"

    got = fetch(url, tmp_path, backoff_s=0.01)
    assert got.sha256 == PAYLOAD_SHA
    assert got.url == f"http://{host}/priv/en.txt.gz"
    # the credentials were still used on the wire
    assert server.requests[-1][2] == "Basic " + base64.b64encode(b"user:secret").decode()

    with pytest.raises(DownloadError) as info:
        fetch(f"http://user:secret@{host}/priv/gone.gz?token=qwzxtoken", tmp_path, backoff_s=0.01)
    assert "404" in str(info.value)

    server.routes["/priv/down.gz"] = fail_first(10**6, 502)
    with pytest.raises(DownloadError) as info2:
        down = f"http://user:secret@{host}/priv/down.gz?token=qwzxtoken"
        fetch(down, tmp_path, retries=1, backoff_s=0.01)

    assert any(r.levelno == logging.WARNING for r in caplog.records)  # retries were logged
    texts = [got.url, str(info.value), str(info2.value), caplog.text]
    texts += [r.getMessage() for r in caplog.records]
    texts += [p.read_text() for p in tmp_path.rglob("*.json")]
    for text in texts:
        # the token is not hex, so it cannot turn up by chance inside a checksum of the (gzip, so time-stamped) payload
        assert "secret" not in text and "qwzxtoken" not in text


def test_public_url() -> None:
    assert public_url("https://u:p@host:8443/a/b.zip?sig=1#frag") == "https://host:8443/a/b.zip"
    assert public_url("s3://bucket/key.txt.gz") == "s3://bucket/key.txt.gz"
    assert public_url("/data/x.gz") == "/data/x.gz"


def test_local_path_and_file_url_are_hashed_in_place(tmp_path: Path) -> None:
    src = tmp_path / "local.txt.gz"
    src.write_bytes(PAYLOAD)
    cache = tmp_path / "cache"
    got = fetch(str(src), cache)
    assert got.path == src and got.sha256 == PAYLOAD_SHA and got.bytes == len(PAYLOAD)
    assert fetch(src.as_uri(), cache).path == src
    assert not cache.exists()
    with pytest.raises(DownloadError, match="mismatch"):
        fetch(str(src), cache, expected_sha256="0" * 64)
    with pytest.raises(DownloadError, match="missing"):
        fetch(str(tmp_path / "missing.gz"), cache)


def test_other_fsspec_urls_are_streamed_into_cache(tmp_path: Path) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/corpus/de.txt.gz", PAYLOAD)
    try:
        got = fetch("memory://corpus/de.txt.gz", tmp_path)
        assert got.sha256 == PAYLOAD_SHA and got.path.read_bytes() == PAYLOAD
        assert got.path.is_relative_to(tmp_path)
        with pytest.raises(DownloadError):
            fetch("memory://corpus/nope.txt.gz", tmp_path, backoff_s=0.01)
    finally:
        fs.rm("/corpus", recursive=True)


def test_read_timeout_is_retried(server: Server, tmp_path: Path) -> None:
    stall = threading.Event()

    def slow_first(handler: BaseHTTPRequestHandler, n: int) -> None:
        if n == 0:
            stall.wait(2.0)  # longer than timeout_s; released at teardown
        ok(handler, n)

    server.routes["/slow.gz"] = slow_first
    try:
        got = fetch(server.url("/slow.gz"), tmp_path, timeout_s=0.2, backoff_s=0.01)
    finally:
        stall.set()
    assert got.sha256 == PAYLOAD_SHA
    assert server.gets("/slow.gz") == 2


def test_short_body_without_backend_error_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some backends end a short stream quietly; the length check must catch that."""
    import contextlib

    from tasks.corpus import download

    calls: list[int] = []

    @contextlib.contextmanager
    def short_then_full(url: str, timeout_s: float) -> Iterator[tuple[Iterator[bytes], int]]:
        calls.append(1)
        body = PAYLOAD[:100] if len(calls) == 1 else PAYLOAD
        yield iter([body]), len(PAYLOAD)

    monkeypatch.setattr(download, "_open_fsspec", short_then_full)
    got = fetch("memory://quiet/x.gz", tmp_path, backoff_s=0.01)
    assert got.sha256 == PAYLOAD_SHA and len(calls) == 2
