"""A proxy in front of moto's S3 server that counts requests and answers scripted faults
(500, 503 SlowDown, 403) for a while, as a store has bad days: the tests and
bench/bench_remote.py point AWS_ENDPOINT_URL at it."""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

FAULT_BODIES = {
    403: ("AccessDenied", "Access Denied"),
    500: ("InternalError", "We encountered an internal error. Please try again."),
    503: ("SlowDown", "Please reduce your request rate."),
}


@dataclass
class Fault:
    method: str  # GET, HEAD, ... ("" = any)
    key_part: str  # a substring of the unquoted path and query ("" = any request)
    status: int
    times: int  # answers left; -1 = for ever


class S3Proxy:
    """``requests`` counts (method, unquoted path) of every request that reached the proxy;
    ``faults`` answer matching requests with an S3 error instead of forwarding them."""

    def __init__(self, upstream: str):
        self.upstream = urlsplit(upstream)
        self.requests: Counter[tuple[str, str]] = Counter()
        self.faults: list[Fault] = []
        # Called with the unquoted path of each GET of an object before it is forwarded
        # (e.g. to overwrite the object while it is being read).
        self.before_get: Callable[[str], None] | None = None
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> S3Proxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail(self, method: str, key_part: str, status: int, times: int = -1) -> None:
        with self.lock:
            self.faults.append(Fault(method, key_part, status, times))

    def heal(self) -> None:
        with self.lock:
            self.faults.clear()

    def count(self, method: str, key_part: str = "") -> int:
        """Requests of ``method`` whose path (and query) holds ``key_part``."""
        with self.lock:
            return sum(n for (m, path), n in self.requests.items()
                       if m == method and key_part in path)

    def reset_counts(self) -> None:
        with self.lock:
            self.requests.clear()

    def _fault_for(self, method: str, path: str) -> int | None:
        with self.lock:
            self.requests[(method, path)] += 1
            for fault in self.faults:
                if (fault.method in ("", method) and fault.key_part in path
                        and fault.times != 0):
                    fault.times -= fault.times > 0
                    return fault.status
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: the tests read the counters
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status = proxy._fault_for(self.command, unquote(self.path))
                if status is not None:
                    code, message = FAULT_BODIES[status]
                    payload = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
                               f"<Message>{message}</Message></Error>").encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                    return
                if self.command == "GET" and proxy.before_get is not None:
                    proxy.before_get(unquote(self.path))
                upstream = http.client.HTTPConnection(proxy.upstream.hostname,
                                                      proxy.upstream.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                headers["Host"] = self.headers.get("Host", "")
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "server", "date"):
                        self.send_header(name, value)
                data = answer.read()
                if answer.getheader("Content-Length") is None:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        return Handler
