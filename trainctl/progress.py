"""What ``JobHandle.wait`` shows while it waits: one live line in a notebook or a terminal, plain lines elsewhere.

The live line is the job's state, the time waited and the latest line any replica logged:
``pytorchjob/mnist: Running (Master 1 active) 42s | epoch 3 loss 0.21``. In a Jupyter kernel
it is one output updated in place (an IPython display); in a terminal, Rich's status spinner on
stderr, rewritten in place (as ``trainctl wait`` does). Anywhere else (a log file, CI, a piped
script) a line is printed only when something a person cares about changes (the job's state,
or its replica counts), never per poll, so a long wait is a handful of lines rather than a
scrolling wall. The state comes from the job resource the wait reads anyway; the latest log
line is read when the state changes and at most every :data:`LOG_PEEK_SECONDS` otherwise (on a
cluster, a request per pod).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Reporter = Callable[[dict], None]
LatestLine = Callable[[], "str | None"]
LOG_PEEK_SECONDS = 1.0
SHOWN_LOG_CHARS = 120
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours and cursor moves: the line is shown as text


def describe(resource: dict) -> str:
    """``Running (Master 1 active, Worker 2 active)``: the state and what the status counts."""
    from trainctl.core.conditions import state_of, status_of

    counts = []
    for rtype, status in (status_of(resource).get("replicaStatuses") or {}).items():
        parts = [f"{status[key]} {key}" for key in ("active", "succeeded", "failed") if status.get(key)]
        if parts:
            counts.append(f"{rtype} {', '.join(parts)}")
    return state_of(resource) + (f" ({'; '.join(counts)})" if counts else "")


@contextmanager
def reporter(label: str, enabled: bool = True, latest_line: LatestLine | None = None) -> Iterator[Reporter]:
    """A callback for ``Client.wait(on_progress=...)`` that shows ``label: <state>`` as it changes;
    ``latest_line`` reads the job's last log line for the live displays."""
    if not enabled:
        yield lambda resource: None
    elif in_notebook():
        yield notebook_display(live_line(label, latest_line))
    elif sys.stderr.isatty():
        with rich_status(label, live_line(label, latest_line)) as report:
            yield report
    else:
        yield plain_lines(label)


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (an IPython shell with a kernel), which can update an output."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def live_line(label: str, latest_line: LatestLine | None) -> Callable[[dict], str]:
    """The text of the live line for a resource: state, seconds waited, latest log line (read now and then)."""
    started, peeked, latest, state = time.monotonic(), [float("-inf")], [""], [""]

    def text(resource: dict) -> str:
        now, described = time.monotonic(), describe(resource)
        if latest_line is not None and (now - peeked[0] >= LOG_PEEK_SECONDS or described != state[0]):
            peeked[0], state[0] = now, described
            latest[0] = shown_text(latest_line() or "") or latest[0]
        return f"{label}: {described} {now - started:.0f}s" + (f" | {latest[0]}" if latest[0] else "")

    return text


def shown_text(line: str) -> str:
    """A log line as one line of text: what a progress bar drew last (after its final ``\\r``), no escapes."""
    drawn = next((part for part in reversed(line.split("\r")) if part.strip()), "")
    return ESCAPES.sub("", drawn).strip()[:SHOWN_LOG_CHARS]


def notebook_display(text: Callable[[dict], str]) -> Reporter:
    from IPython.display import display

    output = display({"text/plain": "waiting"}, raw=True, display_id=True)
    shown = [""]

    def report(resource: dict) -> None:
        line = text(resource)
        if line != shown[0]:  # at most once a second: the seconds waited tick
            shown[0] = line
            output.update({"text/plain": line}, raw=True)

    return report


@contextmanager
def rich_status(label: str, text: Callable[[dict], str]) -> Iterator[Reporter]:
    from rich.console import Console
    from rich.markup import escape

    with Console(stderr=True).status(escape(f"{label}: waiting")) as spinner:
        yield lambda resource: spinner.update(escape(text(resource)))


def plain_lines(label: str) -> Reporter:
    shown = [""]

    def report(resource: dict) -> None:
        text = describe(resource)
        if text != shown[0]:
            shown[0] = text
            print(f"{label}: {text}", file=sys.stderr, flush=True)

    return report
