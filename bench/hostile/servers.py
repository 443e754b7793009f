"""The misbehaving servers the server cases talk to, all on loopback: the test suite's stub server in each
of its fault modes, and raw sockets abusing HTTP itself."""

from __future__ import annotations

import random
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "engines" / "server"))

from stub_server import StubServer, start_stub


class RawServer:
    """A loopback TCP server answering every connection the same hostile way (`mode`)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(90)
            conn.recv(65536)
            mode = self.mode
            head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            if mode == "close":
                pass
            elif mode == "garbage":
                conn.sendall(random.Random(0).randbytes(4096))
            elif mode == "html-500":
                conn.sendall(b"HTTP/1.1 500 Oops\r\nContent-Length: 19\r\n\r\n<html>broken</html>")
            elif mode == "json-list":
                conn.sendall(f"{head}Content-Length: 9\r\n\r\n[1, 2, 3]".encode())
            elif mode == "json-null":
                conn.sendall(f"{head}Content-Length: 4\r\n\r\nnull".encode())
            elif mode == "not-json":
                conn.sendall(f"{head}Content-Length: 5\r\n\r\n{{{{{{{{".encode()[:-3])
            elif mode == "endless-headers":
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                for i in range(10**7):
                    conn.sendall(f"X-{i}: {'a' * 1000}\r\n".encode())
            elif mode == "length-lie":
                conn.sendall(f"{head}Content-Length: 10000000000\r\n\r\n{{".encode())
                time.sleep(80)
            elif mode == "silent":
                time.sleep(80)
            elif mode == "bad-chunked":
                conn.sendall(f"{head}Transfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n".encode())
            elif mode == "redirect-loop":
                conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /v1/models\r\nContent-Length: 0\r\n\r\n")
            elif mode == "redirect-out":
                conn.sendall(
                    b"HTTP/1.1 302 Found\r\nLocation: http://10.255.255.1/\r\nContent-Length: 0\r\n\r\n"
                )
            elif mode == "http09":
                conn.sendall(b'{"data": []}')
        except OSError:
            pass
        finally:
            conn.close()


def make_servers() -> tuple[dict[str, str], list[StubServer]]:
    stubs: list[StubServer] = []
    servers: dict[str, str] = {}
    for mode, options in {
        "ok": {},
        "trickle-models": {"misbehave": "trickle-models"},
        "trickle": {"misbehave": "trickle"},
        "endless": {"misbehave": "endless"},
        "huge-ids": {"misbehave": "huge-ids"},
        "deep": {"misbehave": "deep"},
        "flaky-reset": {"flaky": "reset"},
        "flaky-503": {"flaky": "503"},
        "slow": {"slow_share": 1.0, "slow_s": 5.0},
        "malformed": {"malformed_share": 1.0},
        "token-required": {"token": "other"},
    }.items():
        token = options.pop("token", None)
        stub = start_stub({}, **options)
        if token:
            stub.state.options.token = token
        stubs.append(stub)
        servers[mode] = stub.url
    for mode in [
        "close",
        "garbage",
        "html-500",
        "json-list",
        "json-null",
        "not-json",
        "endless-headers",
        "length-lie",
        "silent",
        "bad-chunked",
        "redirect-loop",
        "redirect-out",
        "http09",
    ]:
        servers[mode] = RawServer(mode).url
    return servers, stubs
