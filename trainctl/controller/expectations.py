"""Expectations: what this controller created or deleted and has not yet seen in its caches.

Watches lag behind writes. Reconciling a job whose new pod is not in the cache yet
would create it again; so a job with unmet expectations waits (its informer event wakes
it). Expectations expire, so a lost event delays a job by at most ``TTL_S``, never forever.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable

TTL_S = 30.0


class Expectations:
    def __init__(self) -> None:
        self.pending: dict[Hashable, dict[tuple[str, str, str], float]] = {}
        self.lock = threading.Lock()

    def expect(self, job: Hashable, operation: str, resource: str, name: str) -> None:
        with self.lock:
            self.pending.setdefault(job, {})[(operation, resource, name)] = time.monotonic()

    def observe(self, job: Hashable, operation: str, resource: str, name: str) -> None:
        """The cache now shows that ``operation`` (create | delete) on ``name`` happened (or was refused)."""
        with self.lock:
            waiting = self.pending.get(job)
            if waiting is not None:
                waiting.pop((operation, resource, name), None)
                if not waiting:
                    del self.pending[job]

    def wait_s(self, job: Hashable) -> float:
        """0 when the job may be reconciled; else seconds until its oldest expectation expires."""
        with self.lock:
            waiting = self.pending.get(job)
            if not waiting:
                return 0.0
            remaining = min(waiting.values()) + TTL_S - time.monotonic()
            if remaining <= 0:
                del self.pending[job]  # an event was lost: reconcile from what the cache shows
                return 0.0
            return remaining

    def forget(self, job: Hashable) -> None:
        with self.lock:
            self.pending.pop(job, None)
