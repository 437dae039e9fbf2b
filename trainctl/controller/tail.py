"""One read of a run's whole log, keeping only what a record holds: its tail, its reports, its result line.

A run's log is read once, as a stream of kubelet-stamped bytes (``timestamps=true``), however long it is:
:class:`TailReader` keeps the last ``limit`` bytes as the program wrote them (whole lines; of a single line
longer than that, its end; of very short lines fewer, so that with kubelet's stamps they stay within twice that), the progress reports (trainctl.reporting) among all of it, thinned as
``job.metrics()`` thins them, and the last result line of a function job (trainctl.functions.runner), which
a long last line could push out of the tail. Its memory stays within about twice ``limit`` plus the
reports, whatever the log holds: a line that never ends is cut while it is read.
"""

from __future__ import annotations

from collections import deque

from trainctl.backends.reported import MAX_POINTS, thinned
from trainctl.functions.runner import MARKER as RESULT_MARKER
from trainctl.functions.runner import MARKERS, MAX_RESULT_BYTES, PICKLE_MARKER
from trainctl.reporting import MARKER as REPORT_MARKER
from trainctl.reporting import MAX_LINE_BYTES, encoded_lines, points_of

REPORT = REPORT_MARKER.encode()
RESULTS = (RESULT_MARKER.encode() + b" ", PICKLE_MARKER.encode() + b" ")
RESULT_PREFIX = MARKERS.encode()
STAMP_WIDTH = len("2006-01-02T15:04:05.000000000Z ")  # kubelet's, until a line says otherwise


class TailReader:
    """Feed it a log's pieces in order, then :meth:`tail`; ``read`` counts every byte seen (stamps aside)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.stamped_limit = limit, 2 * limit
        self.blocks: deque[bytes] = deque()  # whole stamped lines, oldest first
        self.content = 0  # of the blocks, bytes as written
        self.stamped = 0  # of the blocks, bytes with their stamps
        self.read = 0
        self.carry = b""  # an unfinished line
        self.width = 0  # of the stamp and its space, from the first line
        self.points: list[tuple] = []  # those with metrics; thinned past 2 x MAX_POINTS
        self.last_point: tuple | None = None
        self.result: bytes | None = None  # the last result line, stamped
        self.last_stamp = b""

    def feed(self, piece: bytes) -> None:
        data = self.carry + piece
        cut = data.rfind(b"\n") + 1
        self.carry = data[cut:]
        if cut:
            self.take(data[:cut])
        if len(self.carry) > self.limit + 2 * STAMP_WIDTH:  # a line that does not end: keep its stamp and its end
            width = self.stamp_width(self.carry)
            self.read += len(self.carry) - width - self.limit
            self.carry = self.carry[:width] + self.carry[-self.limit:]

    def finish(self) -> None:
        if self.carry:
            self.take(self.carry + b"\n")
            self.carry = b""

    def stamp_width(self, line: bytes) -> int:
        if not self.width:
            space = line.find(b" ", 0, 64)
            self.width = space + 1 if space >= 0 else STAMP_WIDTH
        return self.width

    def take(self, block: bytes) -> None:
        """Whole lines: counted, looked through for reports and results, kept while they are among the last."""
        width = self.stamp_width(block)
        size = len(block) - width * block.count(b"\n")
        self.read += size
        self.scan(block, width)
        self.last_stamp = block[block.rfind(b"\n", 0, len(block) - 1) + 1:][:width]
        self.blocks.append(block)
        self.content += size
        self.stamped += len(block)
        while len(self.blocks) > 1 and (self.content - self.size_of(self.blocks[0]) >= self.limit
                                        or self.stamped - len(self.blocks[0]) >= self.stamped_limit):
            first = self.blocks.popleft()
            self.content -= self.size_of(first)
            self.stamped -= len(first)

    def size_of(self, block: bytes) -> int:
        return len(block) - self.width * block.count(b"\n")

    def scan(self, block: bytes, width: int) -> None:
        position = block.find(REPORT)
        while position >= 0:
            start, end = block.rfind(b"\n", 0, position) + 1, block.find(b"\n", position)
            if end - start <= 4 * MAX_LINE_BYTES:
                self.add_points(points_of(block[start + width:end].decode(errors="replace")))
            position = block.find(REPORT, end)
        position = block.find(RESULT_PREFIX)  # rare: looked at closer only where one may begin
        while position >= 0:
            start, end = block.rfind(b"\n", 0, position) + 1, block.find(b"\n", position)
            if position == start + width and block.startswith(RESULTS, position) \
                    and end - position <= MAX_RESULT_BYTES + 64:
                self.result = block[start:end + 1]
            position = block.find(RESULT_PREFIX, end)

    def add_points(self, points: list[tuple]) -> None:
        for point in points:
            self.last_point = point
            if point[3]:
                self.points.append(point)
        if len(self.points) > 2 * MAX_POINTS:
            self.points = thinned(self.points, MAX_POINTS)

    # ---- what it kept ------------------------------------------------------------------------------
    def tail(self) -> bytes:
        """The kept lines, stamped: the last ``limit`` bytes as written, in whole lines (a last line longer
        than that alone: its end)."""
        data = b"".join(self.blocks)
        excess, stamped_excess, start = self.content - self.limit, len(data) - self.stamped_limit, 0
        while excess > 0 or stamped_excess > 0:
            end = data.find(b"\n", start)
            if end == len(data) - 1:  # the last line alone is too long: its stamp and its last bytes
                return data[start:start + self.width] + data[len(data) - self.limit - 1:]
            excess -= end + 1 - start - self.width
            stamped_excess -= end + 1 - start
            start = end + 1
        return data[start:]

    def kept(self, tail: bytes) -> int:
        return len(tail) - self.width * tail.count(b"\n")

    def report_lines(self) -> list[bytes]:
        """The reports as channel lines: every point with metrics (thinned to MAX_POINTS) and the last point."""
        return reports_of(self.points + ([self.last_point] if self.last_point and not self.last_point[3] else []))

    def result_line(self, tail: bytes) -> bytes | None:
        """The last result line, when the tail does not hold it."""
        if self.result is None or tail.endswith(self.result) or self.result in tail:
            return None
        return self.result

    @property
    def last_time(self) -> float | None:
        """When its last line was written (kubelet's stamp), None before any."""
        from trainctl.backends.kube.logs import STAMP_BUCKET, stamp_time

        return stamp_time(self.last_stamp[:STAMP_BUCKET]) if self.last_stamp else None


def reports_of(points: list[tuple]) -> list[bytes]:
    """Points as channel lines: those with metrics thinned to MAX_POINTS, and the last point whatever it is (the
    latest step)."""
    series = list(thinned([point for point in points if point[3]], MAX_POINTS))
    if points and (not series or series[-1] is not points[-1]):
        series.append(points[-1])
    return encoded_lines(series)
