"""``trainctl logs`` on real local jobs: time order, timestamps, pod names, Ctrl-C and suspended jobs."""

from __future__ import annotations

import re
import signal
import time

import pytest

from tests.local.test_local_runtime import resource, submit, wait

pytestmark = pytest.mark.timeout(90)

# Rank 0 prints at 0 s and 5 s, rank 1 at 2.5 s: far enough apart for the index's 1 s step even
# when a busy machine delays the supervisor's index entries.
TURNS = """
import os, sys, time
rank = int(os.environ["RANK"])
for at, text in ([(0, "first"), (5, "third")] if rank == 0 else [(2.5, "second")]):
    time.sleep(max(0, at - (time.monotonic() - START)))
    print(text, flush=True)
"""
START = "import time; START = time.monotonic()\n"
# Prints a line, then runs until stopped.
FOREVER = "import time\nprint('up', flush=True)\ntime.sleep(300)\n"


def test_a_finished_jobs_logs_are_in_time_order_with_timestamps_and_pod_names(cli):
    (cli.cwd / "turns.py").write_text(START + TURNS)
    submit(cli, "turns", "--workers", "2", "--", "python", "turns.py")
    assert wait(cli, "turns") == 0
    out = cli("logs", "turns").stdout
    assert out.splitlines() == ["master-0 | first", "worker-0 | second", "master-0 | third"]
    assert cli("logs", "-f", "turns").stdout == out  # following a finished job: the same merged lines
    stamped = cli("logs", "turns", "--timestamps").stdout.splitlines()
    assert all(re.fullmatch(r"\S+ \| \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \w+", line) for line in stamped), stamped
    by_pod = cli("logs", "turns", "--replica", "turns-worker-0")
    assert by_pod.returncode == 0 and by_pod.stdout.splitlines() == ["worker-0 | second"]
    wrong = cli("logs", "turns", "--replica", "turns-worker-7")
    assert wrong.returncode == 2 and "turns-worker-0" in wrong.stderr and len(wrong.stderr.splitlines()) == 1


def test_ctrl_c_during_follow_says_the_job_keeps_running(cli):
    (cli.cwd / "forever.py").write_text(FOREVER)
    submit(cli, "forever", "--workers", "1", "--", "python", "forever.py")
    follower = cli.popen("logs", "-f", "forever")
    assert follower.stdout.readline().strip() == "master-0 | up"
    follower.send_signal(signal.SIGINT)
    _, err = follower.communicate(timeout=30)
    assert follower.returncode == 130
    assert err.strip().splitlines() == [
        "stopped watching forever; the job keeps running: trainctl status forever to check, "
        "trainctl delete forever to stop it"]
    time.sleep(1)
    assert "Running" in [c["type"] for c in resource(cli, "forever")["status"]["conditions"] if c["status"] == "True"]
    cli("delete", "forever")


def test_follow_of_a_suspended_job_says_so_then_follows_it_after_resume(cli):
    (cli.cwd / "short.py").write_text("print('ran', flush=True)\n")
    submit(cli, "paused", "--workers", "1", "--suspend", "--", "python", "short.py")
    assert wait(cli, "paused", "Suspended") == 0
    follower = cli.popen("logs", "-f", "paused")
    notice = follower.stderr.readline()
    assert "paused is suspended" in notice and "trainctl resume paused" in notice
    assert cli("resume", "paused").returncode == 0
    out, _ = follower.communicate(timeout=60)
    assert follower.returncode == 0 and out.splitlines() == ["master-0 | ran"]
