"""JobHandle.wait's progress: a live Rich line when stderr is a terminal, plain lines when it is not.

The terminal is a real pseudo-terminal, so Rich decides for itself that it may redraw in place.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.timeout(90)

SCRIPT = """
from pathlib import Path
from trainctl import Client

Path("nap.py").write_text("import time; time.sleep(1.5)")
job = Client("local").run(["python", "nap.py"], framework="jax", workers=2, name="nap")
job.wait(timeout=60)
job.delete()
"""


def start(tmp_path, stderr) -> subprocess.Popen:
    env = {"TRAINCTL_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "TERM": "xterm", "COLUMNS": "120",
           "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin"}
    return subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=stderr)


def test_a_terminal_gets_a_live_status_line(tmp_path):
    controller, terminal = pty.openpty()
    try:
        process = start(tmp_path, terminal)
        os.close(terminal)  # read while it runs: a full terminal buffer would block its writes
        shown = b""
        while chunk := read_some(controller):
            shown += chunk
    finally:
        os.close(controller)
    assert process.wait(timeout=60) == 0
    text = shown.decode(errors="replace")
    assert "\x1b[" in text, text  # redrawn in place: cursor and colour codes, not a line per poll
    assert "jaxjob/nap: Running (Worker 2 active)" in text, text


def read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the terminal's other side is closed and drained
        return b""


def test_elsewhere_a_plain_line_per_change(tmp_path):
    process = start(tmp_path, subprocess.PIPE)
    stderr = process.communicate(timeout=80)[1].decode()
    assert process.returncode == 0, stderr
    lines = stderr.splitlines()
    assert "\x1b[" not in stderr
    assert "jaxjob/nap: Running (Worker 2 active)" in lines
    assert lines[-1] == "jaxjob/nap: Succeeded (Worker 2 succeeded)"
    assert len(lines) == len(set(lines)) <= 5, lines  # only changes, never a line per poll
