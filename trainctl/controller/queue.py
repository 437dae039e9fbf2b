"""A work queue with client-go's guarantees, in small.

* A key waiting in the queue is there once, however often it is added (dedup).
* A key is handed to one worker at a time; added again while being processed, it is
  queued once more when that worker is done (so no change is lost, none runs twice at once).
* ``add_after`` schedules a key (deadline and TTL timers); ``retry`` backs off per key
  exponentially, and ``forget`` resets that once the key succeeds.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Hashable

BASE_BACKOFF_S = 0.05
MAX_BACKOFF_S = 60.0


class WorkQueue:
    def __init__(self) -> None:
        self.ready: deque[Hashable] = deque()
        self.queued: set[Hashable] = set()
        self.processing: set[Hashable] = set()
        self.dirty: set[Hashable] = set()  # added while processing
        self.timers: list[tuple[float, int, Hashable]] = []
        self.failures: dict[Hashable, int] = {}
        self.sequence = 0
        self.condition = threading.Condition()
        self.shutting_down = False

    def __len__(self) -> int:
        with self.condition:
            return len(self.ready)

    def add(self, key: Hashable) -> None:
        with self.condition:
            if self.shutting_down:
                return
            if key in self.processing:
                self.dirty.add(key)
            elif key not in self.queued:
                self.queued.add(key)
                self.ready.append(key)
                self.condition.notify()

    def add_after(self, key: Hashable, delay_s: float) -> None:
        if delay_s <= 0:
            self.add(key)
            return
        with self.condition:
            self.sequence += 1
            heapq.heappush(self.timers, (time.monotonic() + delay_s, self.sequence, key))
            self.condition.notify()

    def retry(self, key: Hashable) -> float:
        """Add ``key`` again after its next back-off; returns the delay."""
        with self.condition:
            failures = self.failures.get(key, 0)
            self.failures[key] = failures + 1
        delay = min(BASE_BACKOFF_S * 2 ** failures, MAX_BACKOFF_S)
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        with self.condition:
            self.failures.pop(key, None)

    def get(self, timeout: float | None = None) -> Hashable | None:
        """The next key to process (mark it done with :meth:`done`); None on shutdown or timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.condition:
            while True:
                if self.shutting_down:
                    return None
                self._fire_timers()
                if self.ready:
                    key = self.ready.popleft()
                    self.queued.discard(key)
                    self.processing.add(key)
                    return key
                wait = self.timers[0][0] - time.monotonic() if self.timers else None
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self.condition.wait(wait)

    def _fire_timers(self) -> None:
        now = time.monotonic()
        while self.timers and self.timers[0][0] <= now:
            _, _, key = heapq.heappop(self.timers)
            if key in self.processing:
                self.dirty.add(key)
            elif key not in self.queued:
                self.queued.add(key)
                self.ready.append(key)

    def done(self, key: Hashable) -> None:
        with self.condition:
            self.processing.discard(key)
            if key in self.dirty and not self.shutting_down:
                self.dirty.discard(key)
                self.queued.add(key)
                self.ready.append(key)
                self.condition.notify()

    def shutdown(self) -> None:
        """Hand out no more keys; workers finish what they hold."""
        with self.condition:
            self.shutting_down = True
            self.ready.clear()
            self.queued.clear()
            self.condition.notify_all()
