"""Where the suite's CPU goes: run a command, sample every process's CPU time twice a second, and print the CPU
seconds per test, per tier and per kind of process (docs/test-cluster.md, "The suite's time").

    python3 scripts/cpu_by_test.py [--top N] [--json FILE] -- bash scripts/test.sh tests/local

On 2 cores the suite keeps both busy, so its length is the CPU its tests make the machine spend (their own
process, every CLI call, local supervisor, replica and pod), not the sum of their wall times: a test that sleeps
costs nothing, one that imports torch in ten processes costs some 20 s. A process is charged to the test in its
environment (pytest sets PYTEST_CURRENT_TEST, and every subprocess a test starts inherits it); what no test
started (the pytest processes themselves, the API servers and the real node's daemons when a fixture started
them for the session: they carry that first test's name in its set-up) is shown by kind. A process that lives
under half a second is seen only if a sample falls in its life, so short CLI calls are undercounted.
It samples every process on the machine: run nothing else beside it. Standard library only; run it as root to
see the real node's processes.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.5


def read_process(pid: str) -> tuple[tuple[int, int], int] | None:
    """((pid, start time), CPU ticks) of one process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (int(pid), int(fields[19])), int(fields[11]) + int(fields[12])


def describe(pid: int) -> tuple[str, str]:
    """(the test in its environment, its command line) of a process seen for the first time."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            test = next((entry[20:].decode(errors="replace") for entry in environ.read().split(b"\0")
                         if entry.startswith(b"PYTEST_CURRENT_TEST=")), "")
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            command = cmdline.read().replace(b"\0", b" ")[:300].decode(errors="replace").strip()
    except OSError:
        return "", ""
    return test, command


class Sampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[tuple[int, int], list] = {}  # key -> [first ticks, last ticks, test, command]
        self.stopping = threading.Event()
        self.first_pass = True

    def run(self) -> None:
        while not self.stopping.is_set():
            for name in os.listdir("/proc"):
                if name.isdigit():
                    self.sample(name)
            self.first_pass = False
            self.stopping.wait(SAMPLE_S)

    def sample(self, pid: str) -> None:
        found = read_process(pid)
        if found is None:
            return
        key, ticks = found
        entry = self.seen.get(key)
        if entry is None:  # a process that was there before the command started is charged only what it spends after
            entry = self.seen[key] = [ticks if self.first_pass else 0, ticks, "", ""]
        entry[1] = ticks
        if entry[3] == "" or entry[1] - entry[0] < TICK:  # a fork seen before its exec: read it again after
            test, command = describe(key[0])
            if command:
                entry[2:] = [test, command]

    def rows(self) -> list[tuple[float, str, str]]:
        return [((last - first) / TICK, test, command) for first, last, test, command in self.seen.values()
                if last > first]


def kind_of(command: str) -> str:
    """A short name for a process: its binary, or for Python its module or script."""
    words = command.split()
    if not words:
        return "(kernel or gone)"
    binary = words[0].rsplit("/", 1)[-1]
    if "python" not in binary:
        return binary
    if "exec(eval(sys.stdin" in command:
        return "pytest-xdist worker"
    module = re.search(r"-m (\S+)", command)
    if module:
        return f"python -m {module.group(1)}"
    script = next((word for word in words[1:] if not word.startswith("-")), "")
    return f"python {script.rsplit('/', 1)[-1][:40]}"


def report(rows: list[tuple[float, str, str]], top: int) -> None:
    by_test, by_tier, by_kind = collections.Counter(), collections.Counter(), collections.Counter()
    for seconds, test, command in rows:
        by_kind[kind_of(command)] += seconds
        if test:
            nodeid = test.rsplit(" (", 1)[0]
            by_test[nodeid] += seconds
            parts = nodeid.split("/")
            by_tier[parts[1] if len(parts) > 2 else "(top)"] += seconds
    print(f"\n== CPU seconds sampled: {sum(seconds for seconds, _, _ in rows):.0f}")
    for title, counter in (("per kind of process", by_kind), ("per tier (processes a test started)", by_tier),
                           ("per test (processes it started)", by_test)):
        print(f"\n== {title}")
        for name, seconds in counter.most_common(top):
            print(f"{seconds:8.1f}  {name}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=40, help="lines per table (default 40)")
    parser.add_argument("--json", help="also write every process's row here: [seconds, test, command]")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    arguments = parser.parse_args(argv)
    command = arguments.command[1:] if arguments.command[:1] == ["--"] else arguments.command
    if not command:
        parser.error("no command: give it after --, e.g. -- bash scripts/test.sh tests/unit")
    sampler = Sampler()
    sampler.start()
    status = subprocess.call(command)
    sampler.stopping.set()
    sampler.join()
    rows = sampler.rows()
    if arguments.json:
        with open(arguments.json, "w") as out:
            json.dump(rows, out)
    report(rows, arguments.top)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
