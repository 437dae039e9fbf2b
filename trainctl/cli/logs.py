"""``logs``: every replica's output, prefixed by replica, in time order or as it comes.

Output is written as bytes, a chunk of whole lines at a time, each line behind its
``replica |`` prefix (colored on a terminal with plain ANSI codes). Nothing goes through
Rich: per-line markup escaping and rendering capped ``logs`` at a few thousand lines a
second, and user text must never be read as markup anyway. The bytes are the process's
own, undecoded, so invalid UTF-8 or escape sequences come out exactly as ``cat`` shows them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, BinaryIO

from trainctl.cli import completers
from trainctl.cli.common import Context, Kubeconfig, Local, Namespace, make_client, stdout_is_terminal, watching
from trainctl.cli.formatting import PREFIX_COLORS, Name
from trainctl.cli.params import Option
from trainctl.cli.plain import stderr_line
from trainctl.errors import UserError

if TYPE_CHECKING:
    import typer

# Rich's names in PREFIX_COLORS as ANSI SGR codes (one palette for status tables and logs)
ANSI_CODES = {"cyan": 36, "magenta": 35, "green": 32, "yellow": 33, "blue": 34,
              "bright_red": 91, "bright_cyan": 96, "bright_magenta": 95}


def logs(name: Name, namespace: Namespace = None,
         replica: Annotated[str | None, Option(
             "--replica", help="Only this replica: worker-1, or the pod name status shows (mnist-worker-1).",
             autocompletion=completers.replica_names)] = None,
         follow: Annotated[bool, Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
         tail: Annotated[int | None, Option("--tail", help="Only the last N lines of each replica.")] = None,
         since_: Annotated[str | None, Option("--since", help="Only lines newer than this (e.g. 5m).")] = None,
         previous: Annotated[bool, Option("--previous", "-p", help="Logs of the replica's previous run.")] = False,
         timestamps: Annotated[bool, Option(
             "--timestamps", help="Each line's time (RFC 3339) after the prefix; local: to the second.")] = False,
         local: Local = False, context: Context = None, kubeconfig: Kubeconfig = None) -> None:
    if tail is not None and tail < 0:
        raise UserError(f"--tail {tail}: must be 0 or more")
    if follow and previous:
        raise UserError("--previous cannot be combined with --follow: a previous run has ended")
    from trainctl.submit.durations import parse_duration

    client = make_client(local, context, kubeconfig)
    chunks = client.log_chunks(name, namespace, replica=replica, follow=follow, tail=tail,
                               since_seconds=parse_duration(since_, "--since"), previous=previous,
                               timestamps=timestamps)
    writer = PrefixWriter(sys.stdout.buffer, color=stdout_is_terminal())
    if follow:
        say_if_suspended(client, name, namespace)
    # following, Ctrl-C prints one line saying the job keeps running (exit 130)
    with watching(name, namespace) if follow else contextlib.nullcontext():
        writer.write_all(chunks)
    hint = previous_hint(client, writer, name, namespace, previous)
    note(f"{writer.lines} line(s) of {name} on {client.backend.description}{hint}", dim=True)


def previous_hint(client, writer: PrefixWriter, name: str, namespace: str | None, previous: bool) -> str:
    """Between restarts a replica's new run has printed nothing yet; its last run's output is one flag away."""
    if writer.lines or previous:
        return ""
    restarted = [row for row in client.get(name, namespace).replicas if row.restarts]
    if not restarted:
        return ""
    return f": {restarted[0].name} restarted, its last run's output is under trainctl logs {name} --previous"


PIPE_BYTES = 1 << 20  # Linux's largest pipe an unprivileged process may ask for (/proc/sys/fs/pipe-max-size)


class PrefixWriter:
    """Writes chunks of lines behind ``replica |`` prefixes aligned to the widest replica seen."""

    def __init__(self, out: BinaryIO, color: bool) -> None:
        self.out, self.color = out, color
        widen_pipe(out)
        self.width = self.lines = 0
        self.prefixes: dict[str, bytes] = {}
        self.colors: dict[str, int] = {}

    def prefix(self, replica: str) -> bytes:
        if len(replica) > self.width:  # a wider name: every prefix is re-aligned from here on
            self.width = len(replica)
            self.prefixes.clear()
        if replica not in self.prefixes:
            label = f"{replica:<{self.width}} |"
            if self.color:
                code = self.colors.setdefault(replica, ANSI_CODES[PREFIX_COLORS[len(self.colors) % len(PREFIX_COLORS)]])
                label = f"\x1b[{code}m{label}\x1b[0m"
            self.prefixes[replica] = f"{label} ".encode()
        return self.prefixes[replica]

    def write_all(self, chunks: Iterable) -> None:
        try:
            for chunk in chunks:
                # trainctl.backends.base.prefix_lines without its last copy: two writes instead
                prefix = self.prefix(chunk.replica)
                body = chunk.data.replace(b"\n", b"\n" + prefix)
                self.out.write(prefix)
                self.out.write(memoryview(body)[:len(body) - len(prefix)])
                self.out.flush()  # a followed line shows now, not when a buffer fills
                self.lines += (len(body) - len(chunk.data)) // len(prefix)  # one prefix per line: no count pass
        except BrokenPipeError:  # `trainctl logs x | head`: the reader has all it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.out.fileno())  # no second error at exit
            raise


def widen_pipe(out: BinaryIO) -> None:
    """Into a pipe, a megabyte at a time instead of 64 KiB: the reader wakes a sixteenth as often (Linux's
    F_SETPIPE_SZ; anything else, or a refusal, leaves the pipe as it is)."""
    import fcntl
    import stat

    try:
        if stat.S_ISFIFO(os.fstat(out.fileno()).st_mode):
            fcntl.fcntl(out.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (OSError, ValueError, AttributeError):
        pass  # not a file descriptor, another system, or a limit lower than ours


def note(message: str, dim: bool = False) -> None:
    """One line on stderr (dimmed on a terminal), without loading Rich for it."""
    stderr_line(message, "dim" if dim else None)


def say_if_suspended(client, name: str, namespace: str | None) -> None:
    """``logs -f`` of a suspended job waits for its resume: say so, rather than seem to hang."""
    from trainctl.core.conditions import state_of

    if state_of(client.get(name, namespace).resource) == "Suspended":
        flag = f" -n {namespace}" if namespace else ""
        note(f"{name} is suspended: following until trainctl resume {name}{flag} runs it "
             "(Ctrl-C stops following; the job stays)")


def follow_logs(client, name: str, namespace: str | None) -> None:
    """Print every replica's lines as they come until the job ends (for ``submit --follow``)."""
    writer = PrefixWriter(sys.stdout.buffer, color=stdout_is_terminal())
    writer.write_all(client.log_chunks(name, namespace, follow=True))


def register(app: typer.Typer) -> None:
    app.command(help="Print every replica's logs, prefixed, in time order (-f: as they come, until the job ends). "
                     "Example: trainctl logs -f mnist --replica worker-1")(logs)
