"""A reaper: a process of its own that runs a test process's cleanup commands if that process ends without
running them itself.

A test process's servers and nodes live outside its process tree (sessions of their own, a network namespace),
so nothing stops them when the process is killed, and its own teardown can be cut short: pytest-xdist answers
Ctrl-C by telling each worker to exit, sends a worker still tearing down SIGINT after 5 s and SIGKILL after 10, and
the real node's teardown takes some 55 s. The reaper, in a session of its own (a terminal's Ctrl-C does not reach
it), holds the read end of a pipe whose write end only the test process holds; the process sends it commands as it
starts what needs them (``add``) and ``release`` once it stopped them itself. End of file before the release, that
is the process's death however it came, runs every command, the latest first.

    python -I tests/cluster/reaper.py FD   # run by Reaper: FD is the pipe's read end; the commands run in the
                                           # repository's root
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RELEASE = "release"


class Reaper:
    """The test process's side: one reaper per thing started (a test cluster, the real node)."""

    def __init__(self, *inherited_fds: int) -> None:
        """``inherited_fds``: kept open in the reaper until it is done (a lock the cleanup must hold)."""
        read, self._write = os.pipe()
        # -I: standard library only, not this directory's modules (dns.py, images.py ...) ahead of it
        self.process = subprocess.Popen([sys.executable, "-I", __file__, str(read)], pass_fds=(read, *inherited_fds),
                                        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        os.close(read)

    def add(self, argv: list[str]) -> None:
        """``argv`` runs if this process ends before ``release``."""
        os.write(self._write, (json.dumps(argv) + "\n").encode())

    def release(self) -> None:
        """Everything was stopped by this process: the reaper exits without running anything."""
        if self._write >= 0:
            os.write(self._write, (RELEASE + "\n").encode())
            os.close(self._write)
            self._write = -1
            self.process.wait()


def main(fd: int) -> int:
    commands: list[list[str]] = []
    with os.fdopen(fd) as pipe:
        for line in pipe:
            if line.strip() == RELEASE:
                return 0
            commands.append(json.loads(line))
    for argv in reversed(commands):  # end of file: the process that started them is gone
        subprocess.run(argv, stdin=subprocess.DEVNULL, cwd=REPO)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
