"""Which replica's failure brought a job down: the cause, told from its consequences by evidence.

When one replica of a distributed job fails, its peers fail a moment later: a rank waiting in an
all-reduce gets gloo's "Connection closed by peer", NCCL's watchdog aborts, TensorFlow raises
UnavailableError, mpirun stops the rest. They exit within the same second as the cause, often with
an exit code of their own, so a clock with one-second resolution cannot tell who started it. The
evidence each failed run leaves can:

1. a run that ended in a framework's peer-loss signature (each framework module lists its own,
   :attr:`trainctl.frameworks.base.Framework.peer_loss_signatures`) is a consequence: "stopped
   after its peer was lost (gloo)"; so is a run the job itself stopped when it failed, unless it had
   raised before (its record, or a traceback that ends its log: its shutdown hung until the stop);
2. every other failed run is a cause, named by its exception where one is known (the function
   runner's record, the runner's ``trainctl: f() raised ...`` line, or the last Python traceback of
   the log: the first wins) or else by its exit code and signal;
3. of the causes the earliest wins, each placed in the narrowest window of time known for it: the
   function runner's record (nanoseconds, give or take the machines' clock skew), the window
   between the two polls of the local supervisor around the exit, or a container's
   ``finishedAt`` (a whole second);
4. causes whose windows overlap the earliest one's cannot be ordered, and the attribution says so
   ("master-0 and worker-0 failed within 0.1 s; no exception found") instead of guessing.

It is pure: the reconcile core uses it on what runtimes observe (exit codes, times, termination
messages) for the Failed condition's message, and trainctl/sdk/failures.py on the replica rows plus
each failed run's log for the failure summary, so both tell the same story.
"""

from __future__ import annotations

import json
import math
import re
import signal
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache

from trainctl.errors import visible
from trainctl.functions.runner import RAISED_MARKER

#: the clocks of two machines agree to about this (NTP); on one machine it only widens a window
CLOCK_SKEW_S = 0.01
#: a container's finishedAt is RFC 3339 truncated to the second: the exit happened in that second
FINISHED_RESOLUTION_S = 1.0
#: windows that overlap by less than this still order: the local supervisor polls one replica after another,
#: so one's "seen running" and the other's "found ended" may be microseconds out of order
OVERLAP_TOLERANCE_S = 0.001
#: of an exception line, what a sentence quotes (a condition message must stay a message)
MAX_EXCEPTION_CHARS = 300
TRACEBACK_HEADER = "Traceback (most recent call last):"
# ``SomeError: message`` or a bare ``KeyboardInterrupt``, module path allowed (torch.distributed.DistBackendError)
EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(?::\s.*|:)?")
RUNNER_LINE = re.compile(r"trainctl: \S+\(\) raised (?P<exception>.+)")
TRAILING_LINES = 3  # after the exception that ended a stopped run: "terminate called ...", a warning at shutdown


@dataclass(frozen=True)
class Run:
    """One ended run of a replica, with whatever is known of how and when it ended."""

    replica: str  # short id, e.g. worker-1 (the `logs --replica` name)
    exit_code: int | None
    reason: str = ""  # what the backend said: Error, OOMKilled, ContainerCannotRun ...
    finished: str | None = None  # RFC 3339
    previous: bool = False  # the replica was restarted since: the run's log is the previous one
    restarts: int = 0
    exit_window: tuple[float, float] | None = None  # Unix seconds: it exited in between (local backend)
    message: str = ""  # the termination message: function runner records, or the log's tail
    stopped: bool = False  # the job stopped it (the failure's cleanup): it did not fail by itself
    log: tuple[str, ...] = ()  # the last lines of its log, where the caller read them

    @property
    def explanation(self) -> str:
        """``exit code 137 (OOMKilled, SIGKILL)``: the code plus every name it has."""
        names = [name for name in (self.reason, signal_name(self.exit_code)) if name]
        code = "no exit code" if self.exit_code is None else f"exit code {self.exit_code}"
        return f"{code} ({', '.join(dict.fromkeys(names))})" if names else code


@dataclass(frozen=True)
class Judged:
    """A run with the verdict on it: a cause (with its exception, if any) or a consequence."""

    run: Run
    exception: str | None = None  # ``RuntimeError: deliberate failure on rank 1``
    rank: str | None = None  # the process that raised, where one replica runs several (mpirun, torchrun)
    peer_loss: str | None = None  # the label of the signature it matched: gloo, NCCL, MPI ...
    window: tuple[float, float] = (math.inf, math.inf)  # when it failed, as narrowly as known

    @property
    def is_cause(self) -> bool:
        return self.peer_loss is None and (not self.run.stopped or self.exception is not None)

    @property
    def plain_exit(self) -> bool:
        """A cause known only by its own exit code: no exception, signal or reason to tell more."""
        return self.is_cause and not self.exception and self.run.exit_code is not None \
            and not signal_of(self.run.exit_code) and self.run.reason != "OOMKilled"

    def what(self) -> str:
        """What happened to it, after its name: ``raised ValueError: x``, ``was killed by signal 9 (SIGKILL)``."""
        if self.peer_loss:
            return f"stopped after its peer was lost ({self.peer_loss})"
        if self.exception:
            return f"raised {self.exception}"
        if self.run.stopped:
            return "stopped when the job failed"
        code, reason = self.run.exit_code, self.run.reason
        if reason == "OOMKilled":
            return "was OOMKilled"
        killer = signal_of(code)
        if killer:
            return f"was killed by signal {killer.value} ({killer.name})"
        if code is None:
            return f"failed ({reason or 'no exit code'})"
        return f"exited with code {code}"

    def sentence(self) -> str:
        rank = f" (rank {self.rank})" if self.rank else ""
        return f"{self.run.replica}{rank} {self.what()}"


@dataclass(frozen=True)
class Attribution:
    causes: list[Judged] = field(default_factory=list)  # earliest first
    consequences: list[Judged] = field(default_factory=list)  # earliest first, those the job stopped last
    tied: int = 0  # how many causes, from the first, cannot be ordered against each other (0 without causes)

    @property
    def culprit(self) -> Judged | None:
        """The run to show first: the cause (of tied ones, the first with an exception), else the earliest
        consequence (its peer's own failure was not seen), else none."""
        tied = self.causes[:self.tied]
        with_exception = [judged for judged in tied if judged.exception]
        if tied:
            return (with_exception or tied)[0]
        return self.consequences[0] if self.consequences else None

    @property
    def unordered(self) -> list[Judged]:
        """The causes that failed too close together to tell which was first; [] when one is clearly first."""
        return self.causes[:self.tied] if self.tied > 1 else []

    def spread(self) -> str:
        """How close together the unordered causes failed, rounded up to one significant digit: ``0.1``."""
        windows = [judged.window for judged in self.unordered]
        seconds = max(high for _, high in windows) - min(low for low, _ in windows)
        return f"{round_up(seconds):g}"

    def sentence(self) -> str:
        """One line for the Failed condition: who caused the failure, or that nobody can tell."""
        if self.unordered:
            names = join_names([judged.run.replica for judged in self.unordered])
            if not any(judged.exception for judged in self.unordered):
                return f"{names} failed within {self.spread()} s; no exception found"
            details = "; ".join(judged.sentence() for judged in self.unordered)
            return f"{names} failed within {self.spread()} s, too close to tell which was first ({details})"
        culprit = self.culprit
        if culprit is None:
            return ""
        if not culprit.is_cause:
            return f"{culprit.sentence()}; no replica's own failure was found"
        return culprit.sentence()


def failed_runs_of(current: Run, last: Run, failed: bool, succeeded: bool) -> list[Run]:
    """A replica's runs that failed: the current one if it did (or recorded a raise and is still shutting
    down), and the one before it if that failed and no run since has succeeded (a retry that worked clears it)."""
    ending = not succeeded and bool(raised_records(current.message.splitlines()))
    return [*([current] if failed or ending else []),
            *([last] if last.exit_code not in (None, 0) and not succeeded else [])]


def attribute(runs: list[Run], kind: str) -> Attribution:
    """The verdict on every failed run of a job of ``kind`` (its framework's signatures are tried first)."""
    judged = [judge(run, signatures(kind)) for run in runs]
    causes = sorted((j for j in judged if j.is_cause), key=lambda j: j.window)
    consequences = sorted((j for j in judged if not j.is_cause), key=lambda j: (j.run.stopped, j.window))
    tied = sum(1 for cause in causes if cause.window[0] < causes[0].window[1] - OVERLAP_TOLERANCE_S) \
        or min(len(causes), 1)
    return Attribution(causes, consequences, tied)


def judge(run: Run, known: tuple) -> Judged:
    lines = [*run.message.splitlines(), *run.log]
    records = raised_records(lines)
    # a run the job stopped counts as failing by itself only by what it raised before: the runner's record, or a
    # traceback that ends its log (its shutdown hung, say, until the stop), not one it printed and survived
    exception, rank = (records[0]["exception"], records[0].get("rank")) if records \
        else (last_exception(lines, at_end=run.stopped), None)
    # an exception is judged by itself; without one, by the whole tail, joined: mpirun wraps its lines
    searched = exception or " ".join(lines)
    peer_loss = next((label for label, pattern in known if pattern.search(searched)), None)
    window = record_window(records[0]) if records else exit_window(run)
    return Judged(run, one_line(exception), one_line(rank), peer_loss, window)


@cache
def signatures(kind: str) -> tuple[tuple[str, re.Pattern], ...]:
    """Every framework's peer-loss signatures as (label, pattern), the job's own framework first: a
    PyTorchJob may run anything, and a gloo error is a gloo error in whatever job it happens."""
    from trainctl.frameworks import ALL

    ordered = sorted(ALL, key=lambda framework: framework.kind != kind)
    return tuple((sig.label, sig.pattern) for framework in ordered for sig in framework.peer_loss_signatures)


def raised_records(lines: list[str]) -> list[dict]:
    """The function runner's records (:data:`trainctl.functions.runner.RAISED_MARKER` lines), earliest first;
    lines that do not parse as one are not records."""
    records = []
    for line in lines:
        if line.startswith(RAISED_MARKER):
            try:
                record = json.loads(line[len(RAISED_MARKER):])
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("exception"), str) \
                    and type(record.get("time_ns")) is int and isinstance(record.get("rank"), (str, type(None))):
                records.append(record)
    return sorted(records, key=lambda record: record["time_ns"])


def last_exception(lines: list[str], at_end: bool = False) -> str | None:
    """The exception a log ends with: the function runner's own line, else the last Python traceback's
    exception line (each line's prefix before the header stripped: torch's ``[rank1]: ``); a launcher's
    report of a child's failure (torchrun's ChildFailedError) gives way to the child's own traceback.
    ``at_end``: only one followed by at most :data:`TRAILING_LINES` lines (what a hung shutdown prints)."""
    found = last_exception_at(lines)
    if found is None:
        return None
    exception, index = found
    if at_end and sum(1 for line in lines[index + 1:] if line.strip()) > TRAILING_LINES:
        return None
    return exception


def last_exception_at(lines: list[str]) -> tuple[str, int] | None:
    for index in range(len(lines) - 1, -1, -1):
        runner = RUNNER_LINE.fullmatch(lines[index].strip())
        if runner:
            return runner["exception"], index
    headers = [index for index, line in enumerate(lines) if TRACEBACK_HEADER in line]
    for start in reversed(headers):
        found = exception_after(lines, start)
        if found and not any(report in found[0] for report in launcher_reports()):
            return found
    return None


def exception_after(lines: list[str], start: int) -> tuple[str, int] | None:
    prefix = lines[start][:lines[start].index(TRACEBACK_HEADER)]
    for index in range(start + 1, len(lines)):
        text = lines[index].removeprefix(prefix)
        if not text.strip() or text[0].isspace():
            continue  # a frame, its source line, or its ^^^^ marks
        return (text.strip(), index) if EXCEPTION_LINE.fullmatch(text.strip()) else None
    return None


@cache
def launcher_reports() -> tuple[str, ...]:
    from trainctl.frameworks import ALL

    return tuple(report for framework in ALL for report in framework.launcher_reports)


def one_line(text: str | None) -> str | None:
    """``text`` fit for a one-line message: whitespace runs as one space, other control characters made visible
    (``^[``: a record is anyone's to write, trainctl.errors.visible), anything else unprintable as a space, at
    most :data:`MAX_EXCEPTION_CHARS` characters."""
    if text is None:
        return None
    shown = visible(" ".join(text.split()))
    flat = " ".join("".join(char if char.isprintable() else " " for char in shown).split())
    return flat if len(flat) <= MAX_EXCEPTION_CHARS else flat[:MAX_EXCEPTION_CHARS - 3].rstrip() + "..."


def record_window(record: dict) -> tuple[float, float]:
    moment = record["time_ns"] / 1e9
    return moment - CLOCK_SKEW_S, moment + CLOCK_SKEW_S


def exit_window(run: Run) -> tuple[float, float]:
    if run.exit_window:
        return run.exit_window
    moment = parse_rfc3339(run.finished)
    return (moment, moment + FINISHED_RESOLUTION_S) if moment is not None else (math.inf, math.inf)


def parse_rfc3339(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp()
    except ValueError:
        return None


def signal_of(code: int | None) -> signal.Signals | None:
    """SIGKILL for 137 (128 + 9, a container's convention) or -9 (Python's); None for ordinary codes."""
    if code is not None and -128 < code < 0:
        number = -code
    elif code is not None and 128 < code < 256:
        number = code - 128
    else:
        return None
    try:
        return signal.Signals(number)
    except ValueError:
        return None


def signal_name(code: int | None) -> str:
    """``SIGKILL`` for 137 or -9; '' for ordinary codes."""
    killer = signal_of(code)
    return killer.name if killer else ""


def round_up(seconds: float) -> float:
    """To one significant digit, upwards: 0.13 -> 0.2, 1.0 -> 1."""
    if seconds <= 0:
        return 0.0
    scale = 10 ** math.floor(math.log10(seconds))
    return math.ceil(round(seconds / scale, 6)) * scale


def join_names(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
