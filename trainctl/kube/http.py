"""HTTP/1.1 as an API server speaks it, on one socket: what trainctl.kube.client needs of http.client.

http.client parses every response's headers with the email package, and importing it loads that
package (about 15 ms, a fifth of ``trainctl list``; docs/benchmarks.md); a controller parsing tens
of thousands of responses pays for that parser again on each. An API server's answers are plain
HTTP/1.1: a status line, headers, then a body of known length, chunked, or running to the close.
This module sends a request and reads exactly that, on a keep-alive connection, TLS or not.

Bounds, as http.client keeps them: a status or header line of at most 64 KiB, at most 100 headers.
Request heads are refused when a value holds a line break (no header can be smuggled in).
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

MAX_LINE = 65536
MAX_HEADERS = 100
READ_BYTES = 1 << 16


class RemoteDisconnected(ConnectionResetError):
    """The server closed the connection before answering (an idle keep-alive connection it let go)."""


class ProtocolError(OSError):
    """The server's answer is not HTTP/1.x as this module reads it."""


class TlsSessions:
    """The TLS session a client's connections resume: a resumed handshake skips the certificate exchange and its
    checks (about 1 ms on loopback instead of 3 to 6), and a cluster command opens more than one connection (a
    ``status`` of a running job reads each pod's log on a connection of its own). One per client: one server."""

    __slots__ = ("latest",)

    def __init__(self) -> None:
        self.latest: ssl.SSLSession | None = None


class Connection:
    """One keep-alive connection; requests go one after another (a response is read before the next request)."""

    def __init__(self, host: str, port: int, timeout: float | None, context: ssl.SSLContext | None = None,
                 sessions: TlsSessions | None = None) -> None:
        """``sessions``: where the session to resume is, and where this connection's goes once it has one."""
        self.host, self.port, self.timeout, self.context = host, port, timeout, context
        self.sessions, self.session_kept = sessions, sessions is None
        self.sock: socket.socket | None = None
        self.reader = None
        default_port = 443 if context is not None else 80
        self.host_header = (f"[{host}]" if ":" in host else host) + ("" if port == default_port else f":{port}")

    def connect(self) -> None:
        # an ASCII host as bytes: given text, the resolver and ssl encode it with the IDNA codec, whose import is a
        # millisecond of every cluster command's start
        host = self.host.encode("ascii") if self.host.isascii() else self.host
        sock = socket.create_connection((host, self.port), self.timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is one write: send it now
            if self.context is not None:
                resumed = self.sessions.latest if self.sessions is not None else None
                sock = self.context.wrap_socket(sock, server_hostname=host, session=resumed)
        except BaseException:
            sock.close()
            raise
        self.sock, self.reader = sock, sock.makefile("rb", READ_BYTES)

    def request(self, method: str, target: str, body: bytes | None, headers: dict[str, str]) -> Response:
        """Send one request and read the status line and headers of its answer (the body is read from the Response)."""
        self.send(method, target, body, headers)
        return Response(self, method)

    def send(self, method: str, target: str, body: bytes | None, headers: dict[str, str]) -> None:
        """Send one request without reading anything: several may be sent before their answers are read, in
        order, with :meth:`response` (HTTP/1.1 pipelining), which saves all round trips but one."""
        if self.sock is None:
            self.connect()
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}", "Accept-Encoding: identity"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        if any("\r" in line or "\n" in line for line in lines):
            raise ValueError("an HTTP request line or header holds a line break")
        head = "\r\n".join(lines) + "\r\n\r\n"
        self.sock.sendall(head.encode("latin-1") + (body or b""))

    def response(self, method: str) -> Response:
        """The answer to the oldest request sent and not yet answered."""
        if self.reader is None:
            raise RemoteDisconnected("the connection was closed before this answer")
        return Response(self, method)

    def keep_session(self) -> None:
        """Once a whole answer was read (TLS 1.3 hands the session ticket over after the handshake, with the first
        data), offer this connection's session to the next one."""
        if not self.session_kept and self.sock is not None and self.context is not None:
            self.sessions.latest, self.session_kept = self.sock.session, True

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        if self.sock is not None:
            self.sock.close()
        self.sock = self.reader = None


class Response:
    """An answer: ``status``, ``reason``, ``headers`` (names lower-case), and its body by read(), read1(), readline()."""

    def __init__(self, connection: Connection, method: str) -> None:
        self.connection, self.reader = connection, connection.reader
        status_line = self.reader.readline(MAX_LINE + 1)
        if not status_line:
            raise RemoteDisconnected("the server closed the connection without an answer")
        version, _, rest = status_line.decode("latin-1").rstrip("\r\n").partition(" ")
        code, _, self.reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit() or len(status_line) > MAX_LINE:
            raise ProtocolError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        self.status = int(code)
        self.headers = self._read_headers()
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        length = self.headers.get("content-length")
        no_body = method == "HEAD" or self.status in (204, 304) or 100 <= self.status < 200
        self.left = 0 if no_body else None if self.chunked or length is None else int(length)
        self.keep_alive = self.headers.get("connection", "").lower() != "close" and version != "HTTP/1.0" \
            and (self.chunked or self.left is not None)
        self.pending = b""  # read and not yet returned (readline)
        self.chunk_left = 0  # of the current chunk
        self.done = self.left == 0

    def _read_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            line = self.reader.readline(MAX_LINE + 1)
            if len(line) > MAX_LINE:
                raise ProtocolError("an HTTP header line longer than 64 KiB")
            if line in (b"\r\n", b"\n", b""):
                return headers
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        raise ProtocolError(f"more than {MAX_HEADERS} HTTP headers")

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)

    # ---- the body ------------------------------------------------------------------------
    def read1(self, size: int = READ_BYTES) -> bytes:
        """Some of the body as soon as there is some (at most ``size`` bytes); b"" at its end."""
        if self.pending:
            piece, self.pending = self.pending[:size], self.pending[size:]
            return piece
        return self._next_piece(size)

    def read(self) -> bytes:
        """The whole (rest of the) body."""
        if self.left and not self.pending:  # a known length: one read
            data = self.reader.read(self.left)
            if len(data) < self.left:
                raise ProtocolError("the connection closed before the end of the body")
            self.left = 0
            self._finish()
            return data
        pieces = [self.pending]
        self.pending = b""
        while piece := self._next_piece(READ_BYTES):
            pieces.append(piece)
        return b"".join(pieces)

    def readline(self) -> bytes:
        """The body's next line, its newline included (the last one may have none); b"" at its end."""
        while b"\n" not in self.pending:
            piece = self._next_piece(READ_BYTES)
            if not piece:
                line, self.pending = self.pending, b""
                return line
            self.pending += piece
        line, _, self.pending = self.pending.partition(b"\n")
        return line + b"\n"

    def _next_piece(self, size: int) -> bytes:
        """The next bytes of the body from the connection, b"" once it is all read."""
        if self.done:
            return b""
        if self.chunked:
            return self._next_chunk_piece(size)
        piece = self.reader.read1(size if self.left is None else min(size, self.left))
        if self.left is not None:
            if not piece:
                raise ProtocolError("the connection closed before the end of the body")
            self.left -= len(piece)
        if not piece or self.left == 0:
            self._finish()
        return piece

    def _next_chunk_piece(self, size: int) -> bytes:
        if self.chunk_left == 0:
            size_line = self.reader.readline(MAX_LINE + 1)
            if not size_line:
                raise RemoteDisconnected("the connection closed before the end of the body")
            try:
                self.chunk_left = int(size_line.split(b";", 1)[0], 16)
            except ValueError:
                raise ProtocolError(f"a bad chunk size line: {size_line[:80]!r}") from None
            if self.chunk_left == 0:
                while self.reader.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                self._finish()
                return b""
        piece = self.reader.read1(min(size, self.chunk_left))
        if not piece:
            raise ProtocolError("the connection closed inside a chunk")
        self.chunk_left -= len(piece)
        if self.chunk_left == 0:
            self.reader.readline(MAX_LINE + 1)  # the chunk's CRLF
        return piece

    def _finish(self) -> None:
        self.done = True
        self.connection.keep_session()
        if not self.keep_alive:
            self.connection.close()
