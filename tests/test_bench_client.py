"""bench/bench_serve.py's HTTP client, against a real HTTP/1.1 server on a free port: what
the benchmark's 32 clients measure the service with."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_serve import Connection  # noqa: E402


class Echo(BaseHTTPRequestHandler):
    """Answers a POST with its JSON body and the connection it came on; /missing with 404;
    /close with a Connection: close answer."""

    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn answers

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status = 404 if self.path == "/missing" else 200
        answer = json.dumps({"body": body, "path": self.path,
                             "connection": self.client_address[1]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        if self.path == "/close":
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_post_returns_the_parsed_json_answer(url):
    client = Connection(url)
    answer = client.post("/search", {"query": "owls", "k": 10})
    client.close()
    assert {"query": "owls", "k": 10} == answer["body"]


def test_requests_go_on_one_kept_alive_connection(url):
    client = Connection(url)
    ports = {client.post("/search", {"query": str(i)})["connection"] for i in range(3)}
    client.close()
    assert 1 == len(ports)


def test_a_large_answer_is_read_whole(url):
    client = Connection(url)
    text = "ü" * 200_000  # several receives
    answer = client.post("/search", {"query": text})
    client.close()
    assert text == answer["body"]["query"]


def test_an_answer_other_than_200_raises_with_its_status(url):
    client = Connection(url)
    with pytest.raises(RuntimeError, match="HTTP 404"):
        client.post("/missing", {"query": "owls"})
    client.close()


def test_a_connection_the_server_closes_is_opened_again(url):
    client = Connection(url)
    first = client.post("/close", {"query": "a"})["connection"]
    second = client.post("/search", {"query": "b"})["connection"]
    client.close()
    assert first != second
