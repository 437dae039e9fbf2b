"""No process of a replica outlives it, whatever it does to its session or its environment (audit class 5).

Each replica starts two daemons that leave everything the environment marker relies on behind: the
audit's ``setsid env -i sleep`` and a double fork that execs ``sleep`` with an empty environment. Each
test runs under every containment this machine allows (containment.py, forced with
TRAINCTL_CONTAINMENT and checked in runtime.json), and /proc is the witness: after ``delete``, a
restart, a deadline, a TTL or a delete after the supervisor was killed, no daemon is left. A replica
that cannot start at all is a failed start, never a dead supervisor (audit class 4).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.local.conftest import dry_run
from trainctl.backends.local import containment, processes
from trainctl.backends.local.backend import LocalBackend

pytestmark = pytest.mark.timeout(120)

# daemons.py TOKEN [RUNS_THAT_FAIL]: starts both escaping daemons (each runs `sleep TOKEN`), says so, then
# fails its first RUNS_THAT_FAIL runs after a moment and otherwise sleeps until stopped.
DAEMONS = """
import os, pathlib, shutil, subprocess, sys, time
token, failing = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
subprocess.run(["sh", "-c", f"setsid env -i sleep {token} &"], check=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve(shutil.which("sleep"), ["sleep", token], {})
    os._exit(0)
counter = pathlib.Path(f"runs-{token}")
runs = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(runs))
print(f"run {runs}: daemons started", flush=True)
if runs <= failing:
    time.sleep(0.5)
    sys.exit(1)
time.sleep(300)
"""


def available(kind: str) -> bool:
    found = containment.PROBES[kind](str(uuid.uuid4()))
    if found is not None:
        found.end_job()  # the probe's empty job cgroup
    return found is not None


CONTAINED = [pytest.param(kind, marks=pytest.mark.skipif(not available(kind), reason=f"this machine allows no {kind}"))
             for kind in ("cgroup2", "cgroup1", "pidns")]


@pytest.fixture
def contained(cli, request):
    """The CLI with TRAINCTL_CONTAINMENT set to the test's kind, and the daemon script in its directory."""
    cli.env[containment.CHOICE_VARIABLE] = request.param
    (cli.cwd / "daemons.py").write_text(DAEMONS)
    yield cli
    for pid in processes.processes_with("TRAINCTL_HOME", str(cli.home)):  # whatever a failing test leaves
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def daemons(token: str) -> list[int]:
    """Live processes running ``sleep TOKEN``, with no TRAINCTL_JOB_UID (they did escape the marker)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == f"sleep\0{token}\0".encode() \
                    and processes.alive(int(entry.name)):
                assert processes.MARKER.encode() not in (entry / "environ").read_bytes()
                found.append(int(entry.name))
    return found


def wait_until(predicate, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached in {timeout}s"
        time.sleep(0.1)


def submit(cli, name: str, *options: str, failing: int = 0) -> str:
    """A one-replica job whose replica starts the daemons; the token its daemons run with."""
    token = f"{900000 + secrets.randbelow(99999)}.{secrets.randbelow(10**6)}"
    result = cli("submit", "pytorch", "--name", name, "--workers", "1", *options, "--",
                 "python", "daemons.py", token, str(failing))
    assert result.returncode == 0, result.stderr
    return token


def runs(cli, token: str) -> int:
    """How many runs of daemons.py with ``token`` have started their daemons (its counter file)."""
    counter = cli.cwd / f"runs-{token}"
    return int(counter.read_text() or 0) if counter.exists() else 0


def runtime(cli, name: str) -> dict:
    return json.loads((cli.home / "jobs" / "default" / name / "runtime.json").read_text())


def started(cli, name: str, token: str, kind: str) -> None:
    wait_until(lambda: len(daemons(token)) == 2, what="both daemons running")
    assert runtime(cli, name)["containment"]["kind"] == kind  # not a silent fallback to another kind


@pytest.mark.parametrize("contained", CONTAINED, indirect=True)
def test_delete_ends_daemons_that_left_the_session_and_the_environment(contained):
    kind = contained.env[containment.CHOICE_VARIABLE]
    token = submit(contained, "escapist")
    started(contained, "escapist", token, kind)
    cgroup = runtime(contained, "escapist")["containment"]["cgroup"]
    assert contained("delete", "escapist").returncode == 0
    wait_until(lambda: not daemons(token), timeout=3, what="daemons gone")
    assert cgroup is None or not os.path.exists(cgroup)  # and the job's cgroup is removed


@pytest.mark.parametrize("contained", CONTAINED, indirect=True)
def test_a_restart_ends_what_the_failed_run_left_behind(contained):
    kind = contained.env[containment.CHOICE_VARIABLE]
    token = submit(contained, "relapse", "--restart-policy", "OnFailure", failing=1)
    # the run counter daemons.py writes once its daemons started: read here, not by a `trainctl logs` process
    # (~0.2 CPU-s) ten times a second
    wait_until(lambda: runs(contained, token) == 2, what="the second run")
    started(contained, "relapse", token, kind)  # two daemons: the second run's; the first run's are gone
    time.sleep(0.5)
    assert len(daemons(token)) == 2
    assert runtime(contained, "relapse")["replicas"]["relapse-master-0"]["restarts"] == 1
    assert contained("delete", "relapse").returncode == 0
    wait_until(lambda: not daemons(token), timeout=3, what="daemons gone")


@pytest.mark.parametrize("contained", CONTAINED, indirect=True)
def test_a_replica_the_supervisor_stops_at_the_deadline_leaves_nothing(contained):
    kind = contained.env[containment.CHOICE_VARIABLE]
    token = submit(contained, "overdue", "--active-deadline", "3")
    started(contained, "overdue", token, kind)
    assert contained("wait", "overdue", "--for", "Failed", "--timeout", "20s").returncode == 0
    wait_until(lambda: not daemons(token), timeout=5, what="daemons gone")
    assert contained("status", "overdue").returncode == 0  # the job stays, nothing of it runs
    contained("delete", "overdue")


@pytest.mark.parametrize("contained", CONTAINED, indirect=True)
def test_a_ttl_deletes_the_job_and_everything_its_replica_left(contained):
    kind = contained.env[containment.CHOICE_VARIABLE]
    token = submit(contained, "mayfly", "--active-deadline", "3", "--ttl-after-finished", "1")
    started(contained, "mayfly", token, kind)
    wait_until(lambda: not (contained.home / "jobs" / "default" / "mayfly").exists(), what="the TTL's delete")
    wait_until(lambda: not daemons(token), timeout=3, what="daemons gone")


@pytest.mark.parametrize("contained", CONTAINED, indirect=True)
def test_delete_after_the_supervisor_was_killed_still_ends_the_daemons(contained):
    kind = contained.env[containment.CHOICE_VARIABLE]
    token = submit(contained, "headless")
    started(contained, "headless", token, kind)
    wait_until(lambda: runtime(contained, "headless").get("supervisor_pid"), what="supervisor recorded")
    os.kill(runtime(contained, "headless")["supervisor_pid"], signal.SIGKILL)
    (contained.home / "jobs" / "default" / "headless" / "runtime.json").write_text("{")  # and its table damaged
    time.sleep(0.3)
    assert len(daemons(token)) == 2  # nobody watches them now: only delete can end them
    assert contained("delete", "headless").returncode == 0
    wait_until(lambda: not daemons(token), timeout=3, what="daemons gone")


# ---- exit codes and signals read the same in every containment ------------------------------------------

EXITS = """
import os, signal, sys, time
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if sys.argv[1] == "exit":
    sys.exit(3)
signal.signal(signal.SIGTERM, lambda *_: (print("got SIGTERM", flush=True), sys.exit(7)))
print("waiting", flush=True)
time.sleep(300)
"""


@pytest.mark.parametrize("contained", [*CONTAINED, "marker"], indirect=True)
def test_exit_codes_signals_and_a_forwarded_sigterm_are_what_the_command_did(contained):
    (contained.cwd / "exits.py").write_text(EXITS)
    for how in ("exit", "kill", "wait"):
        assert contained("submit", "pytorch", "--name", how, "--workers", "1", "--restart-policy", "Never",
                         "--", "python", "exits.py", how).returncode == 0
    for how in ("exit", "kill"):
        assert contained("wait", how, "--for", "Failed", "--timeout", "20s").returncode == 0
    log = contained.home / "jobs" / "default" / "wait" / "logs" / "master-0.log"  # read here: no CLI process per poll
    wait_until(lambda: log.exists() and "waiting" in log.read_text(), what="the replica waiting")
    assert contained("suspend", "wait").returncode == 0  # the supervisor stops it with SIGTERM
    wait_until(lambda: runtime(contained, "wait")["replicas"]["wait-master-0"]["state"] == "Deleted",
               what="the replica stopped")
    rows = {how: runtime(contained, how)["replicas"][f"{how}-master-0"] for how in ("exit", "kill", "wait")}
    assert {how: (row["exit_code"], row["reason"]) for how, row in rows.items()} == {
        "exit": (3, "Error"), "kill": (137, "Killed"), "wait": (7, "Error")}
    assert contained("logs", "wait").stdout.count("got SIGTERM") == 1  # forwarded once, not once per layer
    assert runtime(contained, "wait")["containment"]["kind"] == contained.env[containment.CHOICE_VARIABLE]
    contained("delete", "exit", "kill", "wait")


# ---- a replica that cannot start -----------------------------------------------------------------------

@pytest.mark.parametrize("contained", [*CONTAINED, "marker"], indirect=True)
@pytest.mark.parametrize("broken, said", [
    ({"env": [{"name": "A", "value": "a\0b"}]}, "embedded null byte"),
    ({"command": ["no-such-command-anywhere"]}, "No such file or directory"),
], ids=["nul-in-env", "missing-command"])
def test_a_replica_that_cannot_start_fails_with_a_reason_and_the_supervisor_lives(contained, monkeypatch, broken,
                                                                                   said):
    """Below validation (a job.json written by hand, a command gone since preflight): kubelet's StartError,
    exit code 128, the cause in the replica's log and in status, and restarts as the policy says."""
    monkeypatch.setenv("TRAINCTL_HOME", str(contained.home))
    monkeypatch.setenv(containment.CHOICE_VARIABLE, contained.env[containment.CHOICE_VARIABLE])
    monkeypatch.chdir(contained.cwd)
    resource = dry_run(contained, "submit", "pytorch", "--name", "unstartable", "--workers", "1", "--backoff-limit",
                       "1", "--dry-run", "-o", "json", "--", "python", "daemons.py")
    resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0].update(broken)
    LocalBackend().create(resource, preflight=False)
    assert contained("wait", "unstartable", "--for", "Failed", "--timeout", "30s").returncode == 0
    job = json.loads(contained("status", "unstartable", "-o", "json").stdout)
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert "SupervisorLost" not in failed["reason"] and "backoff limit" in failed["message"], failed
    report = contained("status", "unstartable").stdout
    assert "StartError" in report and said in report and "128" in report, report
    row = runtime(contained, "unstartable")["replicas"]["unstartable-master-0"]
    assert (row["exit_code"], row["reason"], row["restarts"]) == (128, "StartError", 1)
    supervisor_log = (contained.home / "jobs" / "default" / "unstartable" / "supervisor.log").read_text()
    assert "Traceback" not in supervisor_log, supervisor_log
    contained("delete", "unstartable")
