"""Faults the local backend must survive without losing control of a job or writing outside its store.

Each class of issue 13 ("nothing lost, nothing escapes") is driven against real
supervisors and replica processes: hostile names, damaged state files, a full disk (a
small tmpfs as TRAINCTL_HOME), a supervisor SIGKILLed at random moments, and 20 submits
of one name at once. /proc is the witness that no process of a job outlives its delete.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import multiprocessing
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.local.conftest import dry_run
from trainctl.backends.local import processes
from trainctl.backends.local.backend import SUPERVISOR_START_GRACE_ENV, LocalBackend
from trainctl.backends.local.store import JobDir
from trainctl.errors import UserError
from trainctl.sdk.client import Client

pytestmark = pytest.mark.timeout(120)

# Sleeps; with an argument it also starts a child in its own session (outside the replica's process group).
LONG = """
import subprocess, sys, time
print("started", flush=True)
if len(sys.argv) > 1:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
time.sleep(300)
"""
# Fails its first two runs, so a supervisor killed at a random moment may be starting, restarting or idle.
FLAKY = """
import os, pathlib, sys, time
counter = pathlib.Path(f"runs-{os.environ['TRAINCTL_JOB_UID']}-{os.environ.get('RANK', '0')}")
runs = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(runs))
print(f"run {runs}", flush=True)
time.sleep(0.2)
sys.exit(1 if runs <= 2 else 0)
"""


# ---- helpers -------------------------------------------------------------------------------------

@pytest.fixture
def scripts(cli) -> Path:
    (cli.cwd / "long.py").write_text(LONG)
    (cli.cwd / "flaky.py").write_text(FLAKY)
    return cli.cwd


@pytest.fixture(autouse=True)
def reap_leftovers(cli):
    """Whatever a failing test leaves running (every process of these tests carries its TRAINCTL_HOME)."""
    yield
    for pid in processes.processes_with("TRAINCTL_HOME", str(cli.home)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def submit(cli, name: str, *command: str, workers: int = 2) -> None:
    result = cli("submit", "pytorch", "--name", name, "--workers", str(workers), "--", *command)
    assert result.returncode == 0, result.stderr


def job_dir(cli, name: str, namespace: str = "default") -> Path:
    return cli.home / "jobs" / namespace / name


def uid_of(cli, name: str) -> str:
    return json.loads((job_dir(cli, name) / "job.json").read_text())["metadata"]["uid"]


def running(marker: str, uid: str) -> list[int]:
    return [pid for pid in processes.processes_with(marker, uid) if processes.alive(pid)]


def wait_until(predicate, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached in {timeout}s"
        time.sleep(0.1)


def job_age(cli, name: str) -> float:
    """Seconds since the job's creationTimestamp (whole seconds, as the backend reads it)."""
    stamp = json.loads((job_dir(cli, name) / "job.json").read_text())["metadata"]["creationTimestamp"]
    created = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    return (datetime.datetime.now(datetime.timezone.utc) - created).total_seconds()


def start_long_job(cli, name: str, *args: str) -> str:
    """A 2-replica job whose replicas (and, with "escape", their escaped children) run; its uid."""
    submit(cli, name, "python", "long.py", *args)
    uid = uid_of(cli, name)
    wait_until(lambda: len(running(processes.MARKER, uid)) == (4 if args else 2), what="replicas running")
    wait_until(lambda: json.loads((job_dir(cli, name) / "runtime.json").read_text()).get("supervisor_pid"),
               what="supervisor recorded")
    return uid


def damage(cli, name: str, content: bytes) -> Path:
    """Write ``content`` to the job's job.json between two passes of its supervisor: under the job's lock, as the
    supervisor writes it (without the lock the damage can land between its read and its write, and be lost)."""
    job_file = job_dir(cli, name) / "job.json"
    with JobDir("default", name, root=cli.home).locked():
        job_file.write_bytes(content)
    return job_file


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def assert_deleted_without_trace(cli, name: str, uid: str) -> None:
    result = cli("delete", name)
    assert result.returncode == 0, result.stderr
    assert running(processes.MARKER, uid) == [] and running(processes.SUPERVISOR_MARKER, uid) == []
    assert not job_dir(cli, name).exists()


def job_resource(cli, name: str, **metadata) -> dict:
    """The PyTorchJob `submit` renders, for driving the API and the backend directly."""
    resource = dry_run(cli, "submit", "pytorch", "--name", name, "--workers", "1", "--dry-run", "-o", "json",
                       "--", "python", "long.py")
    resource["metadata"].update(metadata)
    return resource


# ---- 1. nothing escapes the store -----------------------------------------------------------------

HOSTILE = ["../../escape-dir", "..", ".", "a/b", "ABSOLUTE", "[red]x", "x\ny", ".hidden", "Upper", "a" * 64]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_store_refuses_any_name_that_could_leave_its_root(cli, scripts, monkeypatch, tmp_path, hostile):
    hostile = str(tmp_path / "absolute") if hostile == "ABSOLUTE" else hostile
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.chdir(cli.cwd)
    backend = LocalBackend()
    resource = job_resource(cli, "fine", namespace=hostile)
    with pytest.raises(UserError, match="namespace"):
        backend.create(resource)  # the backend itself, below the CLI's validation
    for call in (lambda: backend.get("fine", hostile), lambda: backend.delete("fine", hostile),
                 lambda: backend.list(hostile), lambda: JobDir("default", hostile),
                 lambda: JobDir("default", "fine").log_file(hostile)):
        with pytest.raises(UserError):
            call()
    assert not list(cli.home.rglob("job.json")) and not (cli.home.parent / "escape-dir").exists()
    assert not (tmp_path / "absolute").exists()


def test_a_symlinked_namespace_leading_outside_is_refused(cli, scripts, monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    outside = tmp_path / "outside"
    outside.mkdir()
    (cli.home / "jobs").mkdir(parents=True)
    (cli.home / "jobs" / "linked").symlink_to(outside)
    with pytest.raises(UserError, match="outside the state directory"):
        JobDir("linked", "job")
    assert cli("submit", "pytorch", "--name", "job", "-n", "linked", "--", "python", "long.py").returncode == 2
    assert list(outside.iterdir()) == []


def test_list_passes_over_directories_that_are_no_job_names(cli, scripts):
    submit(cli, "real", "python", "long.py", workers=1)
    stored = (job_dir(cli, "real") / "job.json").read_text()
    for odd in ("[red]x", "bad\nname", ".draft"):  # left there by hand or by an older trainctl
        job_dir(cli, odd).mkdir()
        (job_dir(cli, odd) / "job.json").write_text(stored)
    (cli.home / "jobs" / "[red]ns").mkdir()
    result = cli("list", "-A", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert [item["metadata"]["name"] for item in json.loads(result.stdout)["items"]] == ["real"]
    table = cli("list")
    assert table.returncode == 0 and "real" in table.stdout and "[red]" not in table.stdout
    assert cli("delete", "real").returncode == 0


# ---- 2. damaged state ----------------------------------------------------------------------------

def test_truncated_job_json_is_named_and_delete_still_stops_every_process(cli, scripts):
    uid = start_long_job(cli, "torn", "escape")
    job_file = damage(cli, "torn", (job_dir(cli, "torn") / "job.json").read_bytes()[:40])

    for command in (("status", "torn"), ("logs", "torn"), ("wait", "torn", "--timeout", "1s"),
                    ("logs", "torn", "--since", "1m")):
        assert_one_line_error(cli(*command), str(job_file), "damaged", "trainctl delete torn")
    listed = cli("list", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    [item] = json.loads(listed.stdout)["items"]
    assert item["metadata"]["name"] == "torn" and item["status"]["conditions"][0]["type"] == "Damaged"
    time.sleep(1)  # the supervisor meets the damaged file on its next passes and must hold still
    assert running(processes.SUPERVISOR_MARKER, uid) and len(running(processes.MARKER, uid)) == 4
    assert_deleted_without_trace(cli, "torn", uid)


@pytest.mark.parametrize("content", ["{}", "[1, 2]", '{"kind": "PyTorchJob", "metadata": "x", "spec": {}}',
                                     '{"kind": "PyTorchJob", "metadata": {}, "spec": {}, "status": {"conditions": 5}}'])
def test_a_job_json_that_is_json_but_no_job_is_damaged_too(cli, scripts, content):
    uid = start_long_job(cli, "hollow")
    job_file = damage(cli, "hollow", content.encode())
    assert_one_line_error(cli("status", "hollow"), str(job_file), "trainctl delete hollow")
    listed = cli("list")
    assert listed.returncode == 0 and "Damaged" in listed.stdout, listed.stderr
    assert_deleted_without_trace(cli, "hollow", uid)


def test_a_runtime_table_and_events_of_the_wrong_shape_are_reported_not_fatal(cli, scripts):
    uid = start_long_job(cli, "tampered")
    for pid in running(processes.SUPERVISOR_MARKER, uid):
        os.kill(pid, signal.SIGKILL)  # so nobody rewrites the files
    wait_until(lambda: not running(processes.SUPERVISOR_MARKER, uid), what="supervisor gone")
    runtime_file = job_dir(cli, "tampered") / "runtime.json"
    runtime_file.write_text(json.dumps({**json.loads(runtime_file.read_text()), "replicas": {"x": {"pid": 1}}}))
    with open(job_dir(cli, "tampered") / "events.jsonl", "a") as events:
        events.write('{"type": "Normal", "reason": 5, "message": ["a"]}\n[1]\n"text"\n')
    report = cli("status", "tampered")
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    assert str(runtime_file) in report.stdout and "lacks its name" in report.stdout
    assert_deleted_without_trace(cli, "tampered", uid)


def test_a_recorded_supervisor_pid_reused_by_another_process_is_not_taken_for_the_supervisor(cli, scripts):
    uid = start_long_job(cli, "reused")
    for pid in running(processes.SUPERVISOR_MARKER, uid):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not running(processes.SUPERVISOR_MARKER, uid), what="supervisor gone")
    runtime_file = job_dir(cli, "reused") / "runtime.json"
    runtime_file.write_text(json.dumps({**json.loads(runtime_file.read_text()), "supervisor_pid": os.getpid()}))
    job = json.loads(cli("status", "reused", "-o", "json").stdout)
    assert [c["reason"] for c in job["status"]["conditions"] if c["type"] == "Failed"] == ["PyTorchJobSupervisorLost"]
    assert_deleted_without_trace(cli, "reused", uid)


def test_resume_restarts_the_lost_supervisor_of_a_suspended_job(cli, scripts):
    uid = start_long_job(cli, "dormant")
    assert cli("suspend", "dormant").returncode == 0
    assert cli("wait", "dormant", "--for", "Suspended", "--timeout", "20s").returncode == 0
    wait_until(lambda: not running(processes.MARKER, uid), what="replicas stopped")
    for pid in running(processes.SUPERVISOR_MARKER, uid):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    assert "Suspended" in cli("status", "dormant").stdout.splitlines()[0]  # nothing ran unwatched: not lost
    assert cli("resume", "dormant").returncode == 0
    wait_until(lambda: len(running(processes.MARKER, uid)) == 2 and running(processes.SUPERVISOR_MARKER, uid),
               what="resumed under a new supervisor")
    assert_deleted_without_trace(cli, "dormant", uid)


def test_delete_needs_neither_job_json_nor_runtime_json_nor_the_supervisor(cli, scripts):
    uid = start_long_job(cli, "wrecked", "escape")
    for pid in running(processes.SUPERVISOR_MARKER, uid):
        os.kill(pid, signal.SIGKILL)
    (job_dir(cli, "wrecked") / "job.json").write_text("{")
    (job_dir(cli, "wrecked") / "runtime.json").write_bytes(b"\xff\xfe garbage")
    assert_deleted_without_trace(cli, "wrecked", uid)


def test_delete_does_not_wait_forever_on_a_supervisor_that_holds_the_lock(cli, scripts):
    uid = start_long_job(cli, "stuck")
    holder = subprocess.Popen(["python", "-c", HOLD_LOCK, str(job_dir(cli, "stuck") / ".lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # a supervisor hung inside its critical section
        assert_deleted_without_trace(cli, "stuck", uid)
    finally:
        holder.kill()
        holder.wait()


HOLD_LOCK = """
import fcntl, sys, time
handle = open(sys.argv[1], "a")
fcntl.flock(handle, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(300)
"""


def test_more_replicas_than_a_machine_can_run_is_refused_before_anything_starts(cli, scripts):
    result = cli("submit", "pytorch", "--name", "huge", "--workers", "100000", "--", "python", "long.py")
    assert_one_line_error(result, "100,000 replicas", "at most 256")
    assert not job_dir(cli, "huge").exists()


def test_a_damaged_runtime_table_never_fails_a_healthy_job(cli, scripts):
    cli.env[SUPERVISOR_START_GRACE_ENV] = "1"  # the default 10 s proves the same, slower
    uid = start_long_job(cli, "healthy")
    # past the grace a just-started supervisor gets before it can be called lost: the table alone saves it
    wait_until(lambda: job_age(cli, "healthy") > 1, what="the supervisor's start grace over")
    supervisor = running(processes.SUPERVISOR_MARKER, uid)[0]
    job_file, runtime_file = job_dir(cli, "healthy") / "job.json", job_dir(cli, "healthy") / "runtime.json"
    os.kill(supervisor, signal.SIGSTOP)  # so it cannot rewrite the table before status reads it
    try:
        runtime_file.write_text('{"supervisor_pid": ')
        stored = job_file.read_bytes()
        report = cli("status", "healthy", "-o", "json")
        assert report.returncode == 0, report.stderr
        assert "Failed" not in [c["type"] for c in json.loads(report.stdout)["status"]["conditions"]
                                if c["status"] == "True"]
        shown = cli("status", "healthy")
        assert str(runtime_file) in shown.stdout and "damaged" in shown.stdout
        assert job_file.read_bytes() == stored  # a reading command wrote nothing
    finally:
        os.kill(supervisor, signal.SIGCONT)
    wait_until(lambda: "supervisor_pid" in runtime_file.read_text() and runtime_file.read_text().endswith("}"),
               what="table rewritten")
    assert cli("wait", "healthy", "--for", "Running", "--timeout", "5s").returncode == 0
    assert_deleted_without_trace(cli, "healthy", uid)


def test_partial_lines_in_events_and_log_index_are_skipped(cli, scripts):
    uid = start_long_job(cli, "partial")
    with open(job_dir(cli, "partial") / "events.jsonl", "a") as events:
        events.write('{"type": "Normal", "rea')
    with open(job_dir(cli, "partial") / "logs" / "master-0.offsets", "a") as offsets:
        offsets.write("17")
    report = cli("status", "partial")
    assert report.returncode == 0 and "Running" in report.stdout, report.stderr
    since = cli("logs", "partial", "--since", "1h")
    assert since.returncode == 0 and "started" in since.stdout, since.stderr
    assert_deleted_without_trace(cli, "partial", uid)


# ---- 3. a full disk --------------------------------------------------------------------------------

@pytest.fixture
def small_disk(cli):
    """TRAINCTL_HOME on a 4 MiB tmpfs of its own, so a test can fill it."""
    cli.home.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(cli.home)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs root: {mounted.stderr.strip()}")
    yield cli.home
    for pid in processes.processes_with("TRAINCTL_HOME", str(cli.home)):  # before unmounting their files
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    subprocess.run(["umount", "-l", str(cli.home)], check=True)


@contextlib.contextmanager
def disk_full(home: Path):
    """Fill the filesystem to the last byte while the block runs."""
    filler = home / "filler"
    with open(filler, "wb", buffering=0) as handle:
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 4096)
    with contextlib.suppress(OSError):
        with open(home / "probe", "wb", buffering=0) as probe:
            probe.write(b"x")  # the last partial block
    try:
        yield
    finally:
        filler.unlink()
        (home / "probe").unlink(missing_ok=True)


def test_a_full_disk_neither_kills_the_supervisor_nor_crashes_readers(cli, scripts, small_disk):
    uid = start_long_job(cli, "crowded")
    supervisor = running(processes.SUPERVISOR_MARKER, uid)
    with disk_full(small_disk):
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:  # four seconds of heartbeats that cannot be written
            report = cli("status", "crowded")
            assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
            assert running(processes.SUPERVISOR_MARKER, uid) == supervisor
        waited = cli("wait", "crowded", "--for", "Succeeded", "--timeout", "1s")
        assert waited.returncode == 1 and "Traceback" not in waited.stderr, waited.stderr
        assert_one_line_error(cli("suspend", "crowded"), "No space left", "nothing changed")
    time.sleep(2)  # the supervisor writes again
    assert running(processes.SUPERVISOR_MARKER, uid) == supervisor
    job = json.loads(cli("status", "crowded", "-o", "json").stdout)
    assert [c["type"] for c in job["status"]["conditions"] if c["status"] == "True"][-1] == "Running"
    table = cli("status", "crowded").stdout
    assert table.count("Running") >= 3 and "unsupervised" not in table
    assert not list(small_disk.rglob("*.tmp"))
    assert_deleted_without_trace(cli, "crowded", uid)


def test_submit_on_a_full_disk_fails_in_one_line_and_leaves_nothing(cli, scripts, small_disk):
    (small_disk / "jobs" / "default").mkdir(parents=True)
    with disk_full(small_disk):
        result = cli("submit", "pytorch", "--name", "nospace", "--", "python", "long.py")
        assert_one_line_error(result, "nospace", "No space left")
    assert sorted(p.name for p in (small_disk / "jobs" / "default").iterdir()) == []
    assert processes.processes_with("TRAINCTL_HOME", str(small_disk)) == []


# ---- 4. half-created jobs ------------------------------------------------------------------------

def test_a_create_that_fails_half_way_leaves_no_directory(cli, scripts, monkeypatch):
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.chdir(cli.cwd)
    resource = job_resource(cli, "halfway")
    resource["metadata"]["annotations"] = {"when": datetime.date(2024, 1, 1)}  # YAML's date: not JSON
    with pytest.raises(TypeError):
        LocalBackend().create(resource)  # the backend itself, below validation
    assert list((cli.home / "jobs" / "default").iterdir()) == []


# ---- 8. a submitted status is not believed -------------------------------------------------------

def test_apply_drops_a_status_block(cli, scripts):
    resource = job_resource(cli, "claims")
    resource["status"] = {"conditions": [{"type": "Succeeded", "status": "True", "reason": "Fake", "message": "x"}],
                          "completionTime": "2020-01-01T00:00:00Z"}
    (cli.cwd / "claims.json").write_text(json.dumps(resource))
    applied = cli("apply", "-f", "claims.json")
    assert applied.returncode == 0, applied.stderr
    stored = json.loads((job_dir(cli, "claims") / "job.json").read_text())
    assert "Fake" not in json.dumps(stored.get("status")) and "2020-01-01" not in json.dumps(stored)
    assert cli("wait", "claims", "--for", "Running", "--timeout", "20s").returncode == 0
    assert_deleted_without_trace(cli, "claims", uid_of(cli, "claims"))


# ---- 9. one name, one job --------------------------------------------------------------------------

def submit_at(start_at: float, results, resource: dict) -> None:
    """One of the racing submitters (a process of its own): what its submit returned or raised.

    Every racer spins until the same instant, so all twenty are runnable together and the
    two cores switch between them in the middle of each other's submit.
    """
    while time.time() < start_at:
        pass
    try:
        results.put(Client(backend="local").submit(resource)["metadata"]["uid"])
    except UserError as err:
        results.put(f"UserError: {err}")


@pytest.mark.parametrize("name", ["contested", "disputed", "claimed"])  # a race lost by luck rarely repeats
def test_twenty_concurrent_submits_of_one_name_create_one_job(cli, scripts, monkeypatch, name):
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.chdir(cli.cwd)
    resource = job_resource(cli, name)
    context = multiprocessing.get_context("fork")  # already imported: nothing to load before the race
    results, start_at = context.Queue(), time.time() + 1.0
    racers = [context.Process(target=submit_at, args=(start_at, results, resource)) for _ in range(20)]
    for racer in racers:
        racer.start()
    outcomes = [results.get(timeout=60) for _ in racers]
    for racer in racers:
        racer.join()
    losers = [o for o in outcomes if o.startswith("UserError")]
    assert len(losers) == 19 and all("already exists" in o for o in losers), outcomes
    uid = uid_of(cli, name)
    assert set(outcomes) - set(losers) == {uid}
    time.sleep(1)
    supervisors = [pid for pid in processes.processes_with("TRAINCTL_HOME", str(cli.home))
                   if b"trainctl.backends.local.supervisor" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert supervisors == running(processes.SUPERVISOR_MARKER, uid) and len(supervisors) == 1
    assert [p.name for p in (cli.home / "jobs" / "default").iterdir()] == [name]
    assert_deleted_without_trace(cli, name, uid)


# ---- the supervisor killed at random moments --------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_supervisor_sigkilled_at_a_random_moment_loses_nothing(cli, scripts, seed):
    name = f"killed-{seed}"
    submit(cli, name, "python", "flaky.py")
    uid = uid_of(cli, name)
    time.sleep(random.Random(seed).uniform(0.0, 2.5))  # starting, restarting or between passes
    for pid in running(processes.SUPERVISOR_MARKER, uid):
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not running(processes.SUPERVISOR_MARKER, uid), what="supervisor gone")

    stored = (job_dir(cli, name) / "job.json").read_bytes()
    json.loads(stored)  # every state file is whole: written to a temporary name and renamed
    json.loads((job_dir(cli, name) / "runtime.json").read_text())
    report = cli("status", name)
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    assert (job_dir(cli, name) / "job.json").read_bytes() == stored  # status judged, but wrote nothing
    assert not [p.name for p in (cli.home / "jobs" / "default").iterdir() if p.name != name]
    assert_deleted_without_trace(cli, name, uid)


def test_a_draft_left_by_a_killed_submit_is_removed_by_the_next_create_and_a_live_one_is_not(cli, scripts):
    """kill -9 of a submit mid-create leaves its hidden draft directory (its cleanup never ran): the next
    create in the namespace removes drafts whose creator is dead, and only those."""
    namespace_dir = cli.home / "jobs" / "default"
    namespace_dir.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: its pid names no process now
    abandoned = namespace_dir / f".lost.{dead.pid}.k2j4x9ab.creating"
    abandoned.mkdir()
    (abandoned / "job.json").write_text('{"half": ')
    in_progress = namespace_dir / f".busy.{os.getpid()}.q8w7e6rt.creating"  # its creator (this test) is alive
    in_progress.mkdir()
    submit(cli, "after", "python", "-c", "print(1)")
    assert not abandoned.exists()
    assert in_progress.is_dir()
    assert cli("delete", "after").returncode == 0
