"""trainctl.kube.http reads what an HTTP/1.1 server sends: bodies of known length, chunked and to the close,
keep-alive reuse, an idle connection the server dropped, and it refuses to send a header with a line break.

The server here is a raw socket server writing exactly the bytes under test; the real API server is
exercised by tests/k8s and tests/controller through trainctl.kube.client.
"""

import socket
import socketserver
import threading

import pytest

from trainctl.kube import http


class Scripted(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, answers: list[bytes], close_after: int | None = None) -> None:
        self.answers, self.close_after, self.requests = list(answers), close_after, []
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        served = 0
        while self.server.answers:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                byte = self.rfile.read(1)
                if not byte:
                    return
                head += byte
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length")), 0)
            self.server.requests.append(head + self.rfile.read(length))
            self.wfile.write(self.server.answers.pop(0))
            self.wfile.flush()
            served += 1
            if self.server.close_after == served:
                return


@pytest.fixture
def server(request):
    made = []

    def make(*answers: bytes, close_after=None) -> Scripted:
        made.append(Scripted(list(answers), close_after))
        return made[-1]

    yield make
    for one in made:
        one.shutdown()
        one.server_close()


def test_bodies_of_known_length_chunked_and_to_the_close(server):
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab\nc\r\n3;x=1\r\nd\ne\r\n0\r\nT: 1\r\n\r\n"
    scripted = server(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b c\r\n\r\nhello", chunked,
                      b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}",
                      b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end")
    connection = http.Connection("127.0.0.1", scripted.port, 5)
    first = connection.request("GET", "/a?x=1", None, {"Accept": "application/json"})
    assert (first.status, first.reason, first.getheader("X-a"), first.read()) == (200, "OK", "b c", b"hello")
    second = connection.request("GET", "/b", None, {})
    assert [second.readline(), second.readline(), second.readline()] == [b"ab\n", b"cd\n", b"e"]
    assert second.readline() == b""
    missing = connection.request("DELETE", "/c", b'{"k": 1}', {})
    assert (missing.status, missing.reason, missing.read()) == (404, "Not Found", b"{}")
    last = connection.request("POST", "/d", None, {})
    assert last.read() == b"to the end" and connection.sock is None  # closed as the server said
    assert scripted.requests[0].startswith(b"GET /a?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert scripted.requests[2].endswith(b'Content-Length: 8\r\n\r\n{"k": 1}')
    assert b"Content-Length: 0\r\n" in scripted.requests[3]  # a POST without a body says so
    assert len({request.split(b"\r\n")[0] for request in scripted.requests}) == 4


def test_a_stream_comes_in_pieces_as_it_arrives(server):
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in (b"x" * 70000, b"yz")) + b"0\r\n\r\n"
    scripted = server(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
    response = http.Connection("127.0.0.1", scripted.port, 5).request("GET", "/log", None, {})
    pieces = iter(lambda: response.read1(1 << 20), b"")
    assert b"".join(pieces) == b"x" * 70000 + b"yz"


def test_a_dropped_idle_connection_is_remote_disconnected(server):
    scripted = server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"unused", close_after=1)
    connection = http.Connection("127.0.0.1", scripted.port, 5)
    assert connection.request("GET", "/", None, {}).read() == b""
    with pytest.raises(ConnectionResetError):  # the client's cue to reconnect and send again
        connection.request("GET", "/", None, {})


@pytest.mark.parametrize("headers, target", [({"Authorization": "Bearer x\r\nEvil: 1"}, "/"),
                                             ({}, "/a HTTP/1.1\r\nEvil: 1\r\n")])
def test_no_header_is_smuggled_in(headers, target):
    connection = http.Connection("127.0.0.1", 9, 1)
    connection.sock = socket.socket()  # never written to: the check comes first
    with pytest.raises(ValueError):
        connection.request("GET", target, None, headers)
    connection.close()


@pytest.mark.parametrize("answer", [b"SPDY/3 200 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n",
                                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"])
def test_what_is_not_http_is_an_error(server, answer):
    scripted = server(answer)
    with pytest.raises(OSError):
        http.Connection("127.0.0.1", scripted.port, 5).request("GET", "/", None, {}).read()


def test_pipelined_requests_are_answered_in_order(server):
    scripted = server(*(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n%d" % i for i in range(3)))
    connection = http.Connection("127.0.0.1", scripted.port, 5)
    for path in ("/a", "/b", "/c"):
        connection.send("GET", path, None, {})
    assert [connection.response("GET").read() for _ in range(3)] == [b"0", b"1", b"2"]
    assert [request.split(b" ")[1] for request in scripted.requests] == [b"/a", b"/b", b"/c"]
