"""What ``JobHandle.wait`` shows while it waits: one live line in a terminal, plain lines elsewhere.

In a terminal, Rich's status spinner on stderr is rewritten in place (as ``trainctl wait``
does). Anywhere else (a notebook, a log file, CI) a line is printed only when something a
person cares about changes (the job's state, or its replica counts), never per poll, so a
long wait in Jupyter is a handful of lines rather than a scrolling wall. Everything shown
comes from the job resource the wait reads anyway: no extra request per poll.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Reporter = Callable[[dict], None]


def describe(resource: dict) -> str:
    """``Running (Master 1 active, Worker 2 active)``: the state and what the status counts."""
    from trainctl.api import state_of

    counts = []
    for rtype, status in ((resource.get("status") or {}).get("replicaStatuses") or {}).items():
        parts = [f"{status[key]} {key}" for key in ("active", "succeeded", "failed") if status.get(key)]
        if parts:
            counts.append(f"{rtype} {', '.join(parts)}")
    return state_of(resource) + (f" ({'; '.join(counts)})" if counts else "")


@contextmanager
def reporter(label: str, enabled: bool = True) -> Iterator[Reporter]:
    """A callback for ``Client.wait(on_progress=...)`` that shows ``label: <state>`` as it changes."""
    if not enabled:
        yield lambda resource: None
    elif sys.stderr.isatty():
        with rich_status(label) as report:
            yield report
    else:
        yield plain_lines(label)


@contextmanager
def rich_status(label: str) -> Iterator[Reporter]:
    from rich.console import Console
    from rich.markup import escape

    started = time.monotonic()
    with Console(stderr=True).status(escape(f"{label}: waiting")) as spinner:
        yield lambda resource: spinner.update(escape(f"{label}: {describe(resource)} "
                                                     f"({time.monotonic() - started:.0f}s)"))


def plain_lines(label: str) -> Reporter:
    shown = [""]

    def report(resource: dict) -> None:
        text = describe(resource)
        if text != shown[0]:
            shown[0] = text
            print(f"{label}: {text}", file=sys.stderr, flush=True)

    return report
