"""JobHandle.wait's progress: a live Rich line when stderr is a terminal, plain lines when it is not; and
Ctrl-C during ``wait()`` or ``logs(follow=True)``: a message that the job keeps running, not a traceback.

The terminal is a real pseudo-terminal, so Rich decides for itself that it may redraw in place.
(A notebook's live display: tests/notebook.)
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from trainctl import Client

pytestmark = pytest.mark.timeout(90)

SCRIPT = """
from pathlib import Path
from trainctl import Client

Path("nap.py").write_text("import time; print('napping', flush=True); time.sleep(1.5)")
job = Client("local").run(["python", "nap.py"], framework="jax", workers=2, name="nap")
job.wait(timeout=60)
job.delete()
"""


def start(tmp_path, stderr, script: str = SCRIPT, *args: str) -> subprocess.Popen:
    env = {"TRAINCTL_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "TERM": "xterm", "COLUMNS": "120",
           "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin"}
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=stderr)


def in_a_terminal(tmp_path, script: str = SCRIPT) -> str:
    """What ``script`` shows on a pseudo-terminal as its stderr, once it ended well."""
    controller, terminal = pty.openpty()
    try:
        process = start(tmp_path, terminal, script)
        os.close(terminal)  # read while it runs: a full terminal buffer would block its writes
        shown = b""
        while chunk := read_some(controller):
            shown += chunk
    finally:
        os.close(controller)
    assert process.wait(timeout=60) == 0
    return shown.decode(errors="replace")


def test_a_terminal_gets_a_live_status_line(tmp_path):
    text = in_a_terminal(tmp_path)
    assert "\x1b[" in text, text  # redrawn in place: cursor and colour codes, not a line per poll
    assert "jaxjob/nap: Running (Worker 2 active)" in text, text
    assert "napping" in text, text  # the latest log line


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


FOREVER = """
import sys
from trainctl import Client

job = Client("local").run(["python", "-c", "import time; time.sleep(300)"], framework="jax", name="forever")
job.wait() if sys.argv[1] == "wait" else list(job.logs(follow=True))
"""


@pytest.mark.parametrize("watching", ["wait", "logs"])
def test_ctrl_c_stops_the_watching_only_and_says_so(tmp_path, monkeypatch, watching):
    process = start(tmp_path, subprocess.PIPE, FOREVER, watching)
    monkeypatch.setenv("TRAINCTL_HOME", str(tmp_path / "home"))
    client, deadline = Client("local"), time.monotonic() + 60
    while not client.list() or client.job("forever").status != "Running":
        assert time.monotonic() < deadline and process.poll() is None, process.stderr.read()
        time.sleep(0.2)
    time.sleep(1)  # into wait()'s or the follow's poll
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=30)[1].decode()
    last = stderr.strip().splitlines()[-1]
    assert last == ("trainctl.errors.StoppedWatching: stopped watching forever; the job keeps running: "
                    "client.job('forever').status to check, client.job('forever').delete() to stop it"), stderr
    assert "time.sleep" not in stderr and "During handling" not in stderr, stderr
    assert client.job("forever").status == "Running"
    client.job("forever").delete()


REPORTS = """
from pathlib import Path
from trainctl import Client

Path("steps.py").write_text(
    "import time, trainctl\\n"
    "for step in range(1, 21):\\n"
    "    trainctl.report(step=step, total=20, loss=1 / step)\\n"
    "    time.sleep(0.1)\\n")
job = Client("local").run(["python", "steps.py"], framework="jax", name="steps")
job.wait(timeout=60)
job.delete()
"""


def test_a_reporting_job_shows_a_live_progress_bar_in_a_terminal(tmp_path):
    text = in_a_terminal(tmp_path, REPORTS)
    assert "\x1b[" in text, text
    assert "jaxjob/steps: Succeeded (Worker 1 succeeded)" in text and "━━━━━━━━━━━━━━━━ 20/20 100% loss 0.05" in text, text


def test_elsewhere_a_plain_line_per_tenth_of_the_steps(tmp_path):
    process = start(tmp_path, subprocess.PIPE, REPORTS)
    stderr = process.communicate(timeout=80)[1].decode()
    assert process.returncode == 0, stderr
    bars = [line for line in stderr.splitlines() if " loss " in line]
    assert bars and bars[-1] == "jaxjob/steps: ━━━━━━━━━━━━━━━━ 20/20 100% loss 0.05", stderr
    assert 2 <= len(bars) <= 11 and len(bars) == len(set(bars)), bars  # a tenth at a time, never per poll
