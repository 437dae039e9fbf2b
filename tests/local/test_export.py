"""A local job's record (issue 26): nothing but ``delete`` (or its TTL, which deletes the job) removes its logs,
result and metrics, whatever cleanPodPolicy says and however often it restarted; ``export`` writes them all as
files, whole or not at all."""

from __future__ import annotations

import importlib
import json

import pytest
import yaml

from trainctl.errors import NotFound

pytestmark = pytest.mark.timeout(180)

MODULE = '''\
import os
import pathlib
import signal
import time

import trainctl


def once_killed(value):
    marker = pathlib.Path(f"ran-{os.environ['RANK']}")
    print("run starts on rank", os.environ["RANK"], flush=True)
    if not marker.exists():
        marker.touch()
        print("first run, killed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # a signal: restarted, as a preempted pod would be
    if os.environ["RANK"] == "0":
        wait_for_the_worker()
    for step in range(1, 6):
        trainctl.report(step=step, total=5, loss=1 / step)
    if os.environ["RANK"] == "1":
        pathlib.Path("worker-done").write_text(str(os.getpid()))
    return {"value": value}


def wait_for_the_worker():
    # The master's success ends the job: the worker's second run must be over by then, or it would still be
    # waiting to restart (its killed run, never retried, then is the job's failure) or be stopped mid-run.
    # Its pid, in a file it writes as it returns, is gone once its supervisor has reaped it.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        done = pathlib.Path("worker-done")
        if done.exists() and done.read_text() and not pid_alive(int(done.read_text())):
            return
        time.sleep(0.05)
    raise TimeoutError("worker-0's second run did not end within 90 s")


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
'''


@pytest.fixture
def module(cli, monkeypatch):
    (cli.cwd / "export_module.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(cli.cwd))
    return importlib.import_module("export_module")


def test_only_delete_removes_a_jobs_logs_and_export_writes_them_all(client, cli, module):
    job = client.run(module.once_killed, args={"value": 7}, workers=2, name="kept", clean_pod_policy="All",
                     restart_policy="OnFailure")
    job.wait(timeout=120, progress=False)
    assert job.result() == {"value": 7}
    for replica in ("master-0", "worker-0"):  # both runs of each, after the cleanup that ended the job
        assert "first run, killed" in [line.text for line in job.client.logs("kept", replica=replica, previous=True)]
        assert f"run starts on rank {replica != 'master-0':d}" in [line.text for line in job.logs(replica=replica)]
    assert [point.step for point in job.metrics()] == [1, 2, 3, 4, 5]

    exported = job.export(cli.cwd / "kept-record")
    assert yaml.safe_load((exported / "job.yaml").read_text())["metadata"]["name"] == "kept"
    assert isinstance(yaml.safe_load((exported / "events.yaml").read_text()), list)
    assert sorted(path.name for path in (exported / "logs").iterdir()) == [
        "master-0.log", "master-0.previous.log", "worker-0.log", "worker-0.previous.log"]
    assert "first run, killed" in (exported / "logs" / "master-0.previous.log").read_text()
    assert json.loads((exported / "result.json").read_text()) == {"$dict": [["value", 7]]}  # the tagged JSON, as is
    points = [json.loads(line) for line in (exported / "metrics" / "master-0.jsonl").read_text().splitlines()]
    assert [p["step"] for p in points] == [1, 2, 3, 4, 5] and points[0]["metrics"] == {"loss": 1.0}
    assert not (exported / "failure.txt").exists()
    assert [p.name for p in cli.cwd.iterdir() if p.name.startswith(".kept-record")] == []  # no draft left

    job.delete()
    with pytest.raises(NotFound):
        job.client.logs("kept")


def test_export_refuses_bad_directories_in_one_line_and_writes_nothing(cli):
    assert cli("submit", "pytorch", "--name", "small", "--workers", "1", "--wait", "--", "python", "-c",
               "print('hello')").returncode == 0
    full = cli.cwd / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    (cli.cwd / "a-file").write_text("x")
    cases = {"full": "exists and is not an empty directory", "a-file": "exists and is not an empty directory",
             "no/such/parent": "its parent directory", "/proc/no-export": "cannot write in /proc"}
    for target, words in cases.items():
        result = cli("export", "small", "-o", target)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result
        assert words in result.stderr and "-o/--output" in result.stderr, result.stderr
    assert [p.name for p in full.iterdir()] == ["keep.txt"] and not (cli.cwd / "no").exists()
    missing = cli("export", "nosuchjob", "-o", "out")
    assert missing.returncode == 2 and not (cli.cwd / "out").exists()

    (cli.cwd / "empty").mkdir()
    exported = cli("export", "small", "-o", "empty")
    assert exported.returncode == 0, exported.stderr
    assert (cli.cwd / "empty" / "logs" / "master-0.log").read_text() == "hello\n"
    assert "exported small to" in exported.stdout and "logs/master-0.log" in exported.stdout
    cli("delete", "small")
