"""The local backend end to end, driven through the real CLI in subprocesses.

Replicas are tiny Python scripts that exit with chosen codes, so every run policy
(restart policies, backoffLimit, activeDeadlineSeconds, suspend) is checked against
real processes; /proc is the witness that nothing of a job is left behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

# Exits CODE until it has run FAILS times (a counter file per replica in the submit dir), then 0:
# flaky.py FAILS CODE [COUNTER].
FLAKY = """
import os, pathlib, sys
counter = pathlib.Path(f"{sys.argv[3] if len(sys.argv) > 3 else 'runs'}-{os.environ.get('RANK', '0')}")
runs = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(runs))
print(f"run {runs}", flush=True)
sys.exit(0 if runs > int(sys.argv[1]) else int(sys.argv[2]))
"""
# Prints its env of interest, then sleeps; a child in its own session tries to escape the process group.
LONG = """
import os, subprocess, sys, time
print("started", os.environ.get("RANK"), os.environ.get("MASTER_PORT"), flush=True)
if len(sys.argv) > 1:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
time.sleep(float(os.environ.get("SLEEP", "300")))
"""


@pytest.fixture
def scripts(cli) -> Path:
    (cli.cwd / "flaky.py").write_text(FLAKY)
    (cli.cwd / "long.py").write_text(LONG)
    return cli.cwd


def submit(cli, name: str, *options: str) -> None:
    result = cli("submit", "pytorch", "--name", name, *options)
    assert result.returncode == 0, result.stderr
    assert "local" in result.stdout


def resource(cli, name: str) -> dict:
    result = cli("status", name, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def condition(job: dict, ctype: str) -> dict | None:
    return next((c for c in job["status"].get("conditions", []) if c["type"] == ctype and c["status"] == "True"), None)


def wait(cli, name: str, until: str = "Succeeded", timeout: str = "40s") -> int:
    return cli("wait", name, "--for", until, "--timeout", timeout).returncode


def replica_line(cli, name: str, replica: str) -> list[str]:
    """The status table row of one replica: name, state, restarts, exit code, ..."""
    table = cli("status", name).stdout
    line = next(line for line in table.splitlines() if line.split() and line.split()[0] == replica)
    return line.split()


def job_processes(uid: str) -> list[int]:
    needle = f"TRAINCTL_JOB_UID={uid}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes().split(b"\0"):
                if Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def runtime(cli, name: str) -> dict:
    return json.loads((cli.home / "jobs" / "default" / name / "runtime.json").read_text())


def wait_until(predicate, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def test_on_failure_restarts_until_success(cli, scripts):
    submit(cli, "flaky", "--workers", "1", "--restart-policy", "OnFailure", "--", "python", "flaky.py", "2", "1")
    assert wait(cli, "flaky") == 0
    assert replica_line(cli, "flaky", "flaky-master-0")[1:4] == ["Succeeded", "2", "0"]
    assert cli("logs", "flaky").stdout.strip().endswith("run 3")
    assert "run 2" in cli("logs", "flaky", "--previous").stdout


def test_exit_code_policy_retries_137_and_fails_at_once_on_1(cli, scripts):
    submit(cli, "retried", "--workers", "1", "--restart-policy", "ExitCode", "--", "python", "flaky.py", "1", "137")
    assert wait(cli, "retried") == 0
    assert replica_line(cli, "retried", "retried-master-0")[1:3] == ["Succeeded", "1"]

    submit(cli, "permanent", "--workers", "1", "--restart-policy", "ExitCode", "--", "python", "flaky.py", "1", "1", "other")
    assert wait(cli, "permanent") == 1
    assert replica_line(cli, "permanent", "permanent-master-0")[1:4] == ["Failed", "0", "1"]
    assert condition(resource(cli, "permanent"), "Failed")


def test_never_fails_without_restart(cli, scripts):
    submit(cli, "never", "--workers", "1", "--restart-policy", "Never", "--", "python", "flaky.py", "1", "3")
    assert wait(cli, "never", "Failed") == 0
    assert replica_line(cli, "never", "never-master-0")[1:4] == ["Failed", "0", "3"]


def test_backoff_limit_stops_retries(cli, scripts):
    submit(cli, "backoff", "--workers", "1", "--restart-policy", "OnFailure", "--backoff-limit", "1",
           "--", "python", "flaky.py", "99", "1")
    assert wait(cli, "backoff") == 1
    failed = condition(resource(cli, "backoff"), "Failed")
    assert failed and "backoff limit" in failed["message"]
    assert (cli.cwd / "runs-0").read_text() == "2"  # the first run and one restart


def test_active_deadline_fails_a_long_job_in_time(cli, scripts):
    started = time.monotonic()
    submit(cli, "deadline", "--workers", "2", "--active-deadline", "2", "--", "python", "long.py")
    assert wait(cli, "deadline", "Failed") == 0
    assert time.monotonic() - started < 2 + 2
    job = resource(cli, "deadline")
    assert "deadline" in condition(job, "Failed")["message"]
    wait_until(lambda: not job_processes(job["metadata"]["uid"]), timeout=5)


def test_a_deadline_centuries_away_neither_kills_the_supervisor_nor_fails_the_job(cli, scripts):
    """activeDeadlineSeconds is an int64: 300000000000 is valid, and overflowed the supervisor's date
    arithmetic, so the supervisor died and the succeeded job was reported Failed."""
    submit(cli, "patient", "--workers", "2", "--active-deadline", "300000000000", "--", "python", "flaky.py", "0", "0")
    assert wait(cli, "patient") == 0
    job = resource(cli, "patient")
    assert condition(job, "Succeeded") and not condition(job, "Failed")


def test_suspend_stops_replicas_and_resume_restarts_them(cli, scripts):
    submit(cli, "pausable", "--workers", "2", "--", "python", "long.py")
    assert wait(cli, "pausable", "Running") == 0
    uid = resource(cli, "pausable")["metadata"]["uid"]
    wait_until(lambda: len(job_processes(uid)) == 2)

    assert cli("suspend", "pausable").returncode == 0
    wait_until(lambda: not job_processes(uid))
    assert wait(cli, "pausable", "Suspended") == 0

    assert cli("resume", "pausable").returncode == 0
    wait_until(lambda: len(job_processes(uid)) == 2)
    assert wait(cli, "pausable", "Running") == 0
    cli("delete", "pausable")


def test_delete_leaves_no_process_of_the_job(cli, scripts):
    submit(cli, "doomed", "--workers", "2", "--", "python", "long.py", "escape")
    uid = resource(cli, "doomed")["metadata"]["uid"]
    wait_until(lambda: len(job_processes(uid)) == 4)  # two replicas, each with an escaped child
    result = cli("delete", "doomed")
    assert result.returncode == 0 and "local" in result.stdout
    assert job_processes(uid) == []
    assert not (cli.home / "jobs" / "default" / "doomed").exists()
    gone = cli("status", "doomed")
    assert gone.returncode == 2 and "doomed" in gone.stderr and "trainctl list" in gone.stderr


def test_logs_follow_started_before_the_replicas(cli, scripts):
    cli.env["SLEEP"] = "0.5"
    submit(cli, "followed", "--workers", "3", "--suspend", "--", "python", "long.py")
    follower = cli.popen("logs", "-f", "followed")
    time.sleep(0.5)
    assert cli("resume", "followed").returncode == 0
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 0, err
    lines = out.splitlines()
    for rank, replica in enumerate(("master-0", "worker-0", "worker-1")):
        assert any(re.match(rf"{replica}\s*\| started {rank} \d+$", line) for line in lines), out


def test_kill_9_of_the_supervisor_is_reported_and_delete_still_cleans_up(cli, scripts):
    submit(cli, "orphaned", "--workers", "2", "--", "python", "long.py")
    uid = resource(cli, "orphaned")["metadata"]["uid"]
    wait_until(lambda: len(job_processes(uid)) == 2 and runtime(cli, "orphaned").get("supervisor_pid"))
    os.kill(runtime(cli, "orphaned")["supervisor_pid"], signal.SIGKILL)
    os.killpg(runtime(cli, "orphaned")["replicas"]["orphaned-worker-0"]["pid"], signal.SIGKILL)
    time.sleep(0.3)

    report = cli("status", "orphaned")
    assert report.returncode == 0
    assert "supervisor" in report.stdout and "gone" in report.stdout
    assert replica_line(cli, "orphaned", "orphaned-master-0")[1:3] == ["Running", "(unsupervised)"]
    assert replica_line(cli, "orphaned", "orphaned-worker-0")[1:3] == ["Ended", "(unsupervised)"]
    assert "exit code unknown" in report.stdout
    assert condition(resource(cli, "orphaned"), "Failed")["reason"].endswith("SupervisorLost")

    assert cli("delete", "orphaned").returncode == 0
    assert job_processes(uid) == []


def test_concurrent_jobs_get_distinct_ports(cli, scripts):
    for name in ("one", "two"):
        submit(cli, name, "--workers", "2", "--", "python", "long.py")
    wait_until(lambda: all(len(runtime(cli, n).get("replicas", {})) == 2 for n in ("one", "two")))
    ports = [port for name in ("one", "two") for port in runtime(cli, name)["ports"].values()]
    assert len(ports) == len(set(ports)) == 4
    wait_until(lambda: cli("logs", "two").stdout.count("started") == 2)
    master_port = runtime(cli, "two")["ports"]["Master/0"]
    assert f"worker-0 | started 1 {master_port}" in cli("logs", "two").stdout
    cli("delete", "one", "two")



def test_logs_follow_keeps_the_lines_of_every_restart(cli, scripts):
    submit(cli, "restarting", "--workers", "1", "--suspend", "--", "python", "flaky.py", "2", "1")
    follower = cli.popen("logs", "-f", "restarting")
    assert cli("resume", "restarting").returncode == 0
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 0, err
    assert [line.split("| ")[1] for line in out.splitlines()] == ["run 1", "run 2", "run 3"]


def test_logs_since_and_tail_select_recent_lines(cli, scripts):
    (cli.cwd / "phases.py").write_text("import time\nprint('early', flush=True)\ntime.sleep(2.5)\n"
                                       "print('late 1', flush=True)\nprint('late 2', flush=True)\ntime.sleep(30)\n")
    submit(cli, "phased", "--workers", "1", "--", "python", "phases.py")
    wait_until(lambda: "late 2" in cli("logs", "phased").stdout)
    recent = cli("logs", "phased", "--since", "1s").stdout
    assert "late 1" in recent and "early" not in recent
    assert cli("logs", "phased", "--tail", "1").stdout.split("| ")[1].strip() == "late 2"
    assert cli("logs", "phased", "--since", "1x").returncode == 2
    cli("delete", "phased")


def test_each_replica_gets_its_own_gpus_and_too_many_is_refused(cli, scripts):
    (cli.cwd / "gpus.py").write_text("import os\nprint('gpus', os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\n")
    cli.env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"
    submit(cli, "gpu", "--workers", "2", "--gpus", "2", "--", "python", "gpus.py")
    assert wait(cli, "gpu") == 0
    assert sorted(cli("logs", "gpu").stdout.splitlines()) == ["master-0 | gpus 0,1", "worker-0 | gpus 2,3"]

    refused = cli("submit", "pytorch", "--name", "greedy", "--workers", "3", "--gpus", "2", "--", "python", "gpus.py")
    assert refused.returncode == 2 and "6 GPUs" in refused.stderr and "has 4" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert cli("status", "greedy").returncode == 2  # nothing half-created


def test_a_replica_that_asks_for_no_gpu_sees_none_and_on_a_cpu_only_machine_no_variable_at_all(cli, scripts):
    """As a pod: without a GPU limit it sees none, and on a node without GPUs it has no CUDA_VISIBLE_DEVICES at all.
    Paddle's launcher takes even an empty one for a GPU machine, and its collective then fails (issue 32)."""
    (cli.cwd / "cuda.py").write_text("import os\nprint('cuda', repr(os.environ.get('CUDA_VISIBLE_DEVICES')))\n")
    cli.env["CUDA_VISIBLE_DEVICES"] = "0,1"  # a machine with two GPUs
    submit(cli, "hidden", "--workers", "1", "--", "python", "cuda.py")
    assert wait(cli, "hidden") == 0
    assert cli("logs", "hidden").stdout.split("| ")[1].strip() == "cuda ''"
    cli.without_gpus()  # and a machine without
    submit(cli, "cpu-only", "--workers", "1", "--", "python", "cuda.py")
    assert wait(cli, "cpu-only") == 0
    assert cli("logs", "cpu-only").stdout.split("| ")[1].strip() == "cuda None"


def test_ttl_after_finished_removes_the_job_and_its_logs(cli, scripts):
    submit(cli, "shortlived", "--workers", "1", "--ttl-after-finished", "1", "--", "python", "flaky.py", "0", "0")
    job_dir = cli.home / "jobs" / "default" / "shortlived"
    wait_until(lambda: (job_dir / "logs" / "master-0.log").exists())
    wait_until(lambda: not job_dir.exists(), timeout=10)
    assert cli("status", "shortlived").returncode == 2


def test_replicas_share_the_cores_instead_of_oversubscribing(cli, scripts):
    (cli.cwd / "threads.py").write_text("import os\nprint('threads', os.environ['OMP_NUM_THREADS'], flush=True)\n")
    cli.env.pop("OMP_NUM_THREADS", None)
    submit(cli, "omp", "--workers", "2", "--", "python", "threads.py")
    assert wait(cli, "omp") == 0
    share = str(max(1, (os.cpu_count() or 1) // 2))
    assert sorted(cli("logs", "omp").stdout.splitlines()) == [f"master-0 | threads {share}", f"worker-0 | threads {share}"]
    submit(cli, "omp-user", "--workers", "2", "-e", "OMP_NUM_THREADS=7", "--", "python", "threads.py")
    assert wait(cli, "omp-user") == 0
    assert set(cli("logs", "omp-user").stdout.split()) >= {"7"}  # the job's own setting wins
