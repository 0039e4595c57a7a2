"""A fault-injecting HTTP proxy to put in front of moto's S3 server.

Point s3fs/boto at the proxy (AWS_ENDPOINT_URL) and it forwards every request to moto,
except those a seeded policy picks to fail:

  error_rate         answer 500 InternalError or 503 SlowDown without forwarding
  lost_answer_rate   forward (the write happens), then answer 500 anyway: the client cannot
                     tell whether its PUT landed (the ambiguous case for conditional commits)
  drop_rate          forward, then send the headers and half the body and close the
                     connection (or close at once for HEAD): a connection dropped mid-response
  stop_after_bytes   the endpoint "stops mid-write": once this many request-body bytes were
                     accepted, every further PUT/POST body is read halfway and the connection
                     is closed without an answer (single PUTs and multipart parts alike)

The proxy is threaded (ThreadingHTTPServer, HTTP/1.1 keep-alive) and counts what it did.
"""

from __future__ import annotations

import http.client
import random
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


@dataclass
class FaultPolicy:
    seed: int = 0
    error_rate: float = 0.0
    lost_answer_rate: float = 0.0
    drop_rate: float = 0.0
    stop_after_bytes: int | None = None
    only_methods: tuple[str, ...] | None = None  # inject only into these methods (None: all)
    counts: dict[str, int] = field(default_factory=dict)
    accepted_bytes: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def decide(self, method: str) -> str:
        with self._lock:
            self.counts["requests"] = self.counts.get("requests", 0) + 1
            if self.only_methods is not None and method not in self.only_methods:
                return "pass"
            draw = self._rng.random()
        for name, rate in (("error", self.error_rate), ("lost_answer", self.lost_answer_rate), ("drop", self.drop_rate)):
            if draw < rate:
                return name
            draw -= rate
        return "pass"

    def accept_upload(self, size: int) -> bool:
        """False once the write budget is spent: the endpoint has stopped taking writes."""
        if self.stop_after_bytes is None or size == 0:
            return True
        with self._lock:
            if self.accepted_bytes + size > self.stop_after_bytes:
                return False
            self.accepted_bytes += size
            return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _abort(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _error(self, status: int) -> None:
        code = "SlowDown" if status == 503 else "InternalError"
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>injected fault</Message><RequestId>fault</RequestId></Error>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":  # a HEAD answer has no body: one written would be read as the next answer
            self.wfile.write(body)

    def _handle(self) -> None:
        policy = self.server.policy
        method = self.command
        declared = int(self.headers.get("Content-Length") or 0)
        if method in ("PUT", "POST") and not policy.accept_upload(declared):
            policy.count("cut_writes")
            self.rfile.read(declared // 2)  # half the body arrives, then the endpoint is gone
            self._abort()
            return
        body = self._read_body()
        decision = policy.decide(method)
        if decision == "error":
            policy.count("errors")
            self._error(self.server.rng_status())
            return
        upstream = http.client.HTTPConnection(self.server.upstream_host, self.server.upstream_port, timeout=60)
        try:
            upstream.putrequest(method, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    upstream.putheader(name, value)
            if body or method in ("PUT", "POST"):
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body or None)
            response = upstream.getresponse()
            data = response.read()
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            status = response.status
        finally:
            upstream.close()
        if decision == "lost_answer":
            policy.count("lost_answers")
            self._error(500)
            return
        if decision == "drop":
            policy.count("drops")
            if method == "HEAD" or not data:
                self._abort()
                return
            self.send_response(status)
            for name, value in headers:
                if name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self._abort()
            return
        self.send_response(status)
        for name, value in headers:
            if method == "HEAD" or name.lower() != "content-length":
                self.send_header(name, value)
        if method != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    policy: FaultPolicy
    upstream_host: str
    upstream_port: int

    def rng_status(self) -> int:
        with self._status_lock:
            return self._status_rng.choice((500, 503))


class FaultProxy:
    """`with FaultProxy(moto_endpoint, policy) as proxy:` then use `proxy.endpoint`."""

    def __init__(self, upstream: str, policy: FaultPolicy) -> None:
        parts = urlsplit(upstream)
        self.server = _ProxyServer(("127.0.0.1", 0), _Handler)
        self.server.policy = policy
        self.server.upstream_host, self.server.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.server._status_rng = random.Random(policy.seed + 1)
        self.server._status_lock = threading.Lock()
        self.policy = policy
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
