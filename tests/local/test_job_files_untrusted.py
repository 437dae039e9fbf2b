"""A job's directory is written by untrusted code (issue 54): its replicas can reach it (TRAINCTL_CHECKPOINT_DIR/..)
and leave a link to /dev/zero, a FIFO or a directory at any file trainctl keeps there. The supervisor must still
end the job when its replica exits, in little memory, and every reading command must answer, in one line where a
file cannot be read (docs/local-backend.md, "Files a job may shape").

Every trainctl process here runs under an address-space limit, inherited by the supervisor that ``submit`` starts:
a reader that ignores its bound fails with MemoryError within a second instead of eating the machine.
"""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.local.test_faults import reap_leftovers  # noqa: F401  (autouse: what a failing test leaves running)
from trainctl.backends.local import processes

pytestmark = pytest.mark.timeout(120)

ADDRESS_SPACE = 2 << 30  # far above what any trainctl process needs, far below what an unbounded read takes
SUPERVISOR_MEMORY = 100 << 20  # issue 54: the supervisor stays under 100 MB whatever a job does to its directory
ENDS_WITHIN = 30.0

# The replica: replaces each file named in argv[1] ({"logs/{r}.log": "zero", ...}, relative to its job's directory,
# {r} its replica id) with a link to /dev/zero, a FIFO or a directory, then fails.
HOSTILE = r"""
import json, os, pathlib, sys, time
termination = pathlib.Path(os.environ["TRAINCTL_TERMINATION_LOG"])
job_dir, replica = termination.parent.parent, termination.stem
print("before the files were replaced", flush=True)
time.sleep(1.5)  # the supervisor indexes the log (logs/{r}.offsets) and writes runtime.json meanwhile
for name, kind in json.loads(sys.argv[1]).items():
    path = job_dir / name.format(r=replica)
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif os.path.lexists(path):
        path.unlink()
    {"zero": lambda: path.symlink_to("/dev/zero"), "fifo": lambda: os.mkfifo(path), "dir": path.mkdir}[kind]()
sys.exit(1)
"""

FILES = ["logs/{r}.log", "logs/{r}.offsets", "logs/{r}.termination", "logs/{r}.progress", "logs/{r}.preempting",
         "events.jsonl", "uid", "containment", ".lock"]
KINDS = {"zero": "a symlink", "fifo": "a FIFO", "dir": "a directory"}  # each, as the one line names it


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def trainctl(cli, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """``trainctl ARGS`` as the cli fixture runs it, under the address-space limit; a hang fails the test."""
    return subprocess.run([sys.executable, "-m", "trainctl", *args], cwd=cli.cwd, env=cli.env, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=limited)


def submit_hostile(cli, name: str, replaced: dict[str, str]) -> Path:
    """A one-replica job that replaces ``replaced``'s files and fails; its directory."""
    result = trainctl(cli, "submit", "pytorch", "--name", name, "--workers", "1", "--restart-policy",
                      "Never", "--",
                      "python", "-c", HOSTILE, json.dumps(replaced))
    assert result.returncode == 0, result.stderr
    return cli.home / "jobs" / "default" / name


def supervisor_pid(job_dir: Path) -> int:
    deadline = time.monotonic() + ENDS_WITHIN
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            pid = json.loads((job_dir / "runtime.json").read_text()).get("supervisor_pid")
            if pid:
                return pid
        time.sleep(0.05)
    raise AssertionError("no supervisor recorded itself")


def peak_memory(pid: int) -> int | None:
    """The process's peak resident memory (VmHWM), in bytes; None once it is gone (a zombie has none)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) << 10 for line in status.splitlines() if line.startswith("VmHWM:")), None)


def watch_until_ended(cli, job_dir: Path) -> tuple[dict, int]:
    """The job's ended resource, as its supervisor recorded it, and the supervisor's peak memory meanwhile."""
    pid, peak = supervisor_pid(job_dir), 0
    deadline = time.monotonic() + ENDS_WITHIN
    while processes.alive(pid):
        peak = max(peak, peak_memory(pid) or 0)
        assert peak < SUPERVISOR_MEMORY, f"the supervisor holds {peak >> 20} MiB"
        assert time.monotonic() < deadline, f"the job did not end in {ENDS_WITHIN:.0f}s; supervisor at {peak >> 20} MiB"
        time.sleep(0.02)
    result = trainctl(cli, "status", job_dir.name, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), peak


def failed_condition(resource: dict) -> dict:
    found = [c for c in resource["status"]["conditions"] if c["type"] == "Failed" and c["status"] == "True"]
    assert found, resource["status"]
    return found[0]


@pytest.mark.parametrize("kind", KINDS)
def test_a_job_that_replaces_its_files_still_ends_failed_and_every_command_answers(cli, kind):
    job_dir = submit_hostile(cli, f"hostile-{kind}", dict.fromkeys(FILES, kind))
    resource, _ = watch_until_ended(cli, job_dir)
    failed = failed_condition(resource)
    assert "SupervisorLost" not in failed["reason"], failed  # the supervisor saw the exit and recorded it

    status = trainctl(cli, "status", job_dir.name)
    assert status.returncode == 0 and "Failed" in status.stdout, status.stderr
    assert "logs/master-0.log: unreadable (a " in status.stdout, status.stdout  # the run's message names it
    logs = trainctl(cli, "logs", job_dir.name)
    assert logs.returncode == 0, logs.stderr
    assert [line for line in logs.stdout.splitlines() if "unreadable" in line] == \
        [f"master-0 | logs/master-0.log: unreadable ({KINDS[kind]}, not a regular file)"]
    exported = trainctl(cli, "export", job_dir.name, "-o", str(cli.cwd / "record"))
    assert exported.returncode == 0, exported.stderr
    assert "unreadable" in (cli.cwd / "record" / "logs" / "master-0.log").read_text()

    deleted = trainctl(cli, "delete", job_dir.name)
    assert deleted.returncode == 0, deleted.stderr
    assert not job_dir.exists()


def test_the_supervisor_stays_under_100_mb_while_its_job_points_its_files_at_dev_zero(cli):
    job_dir = submit_hostile(cli, "hungry", dict.fromkeys(FILES, "zero"))
    resource, peak = watch_until_ended(cli, job_dir)
    assert failed_condition(resource)["reason"] != "PyTorchJobSupervisorLost"
    assert 0 < peak < SUPERVISOR_MEMORY


def test_a_file_the_supervisor_writes_replaced_by_a_link_is_never_written_through(cli, tmp_path):
    """The supervisor appends to a replica's log index while the log grows: a link the replica left there (to a
    file of the user's elsewhere) is replaced by a new index, and what it names is left as it was."""
    elsewhere = tmp_path / "precious.txt"
    elsewhere.write_text("keep me\n")
    script = (f"import os, pathlib, time\nindex = pathlib.Path(os.environ['TRAINCTL_TERMINATION_LOG'])"
              f".with_suffix('.offsets')\nindex.unlink(missing_ok=True)\nindex.symlink_to({str(elsewhere)!r})\n"
              f"for line in range(15):\n    print(line, flush=True)\n    time.sleep(0.2)\n")
    result = trainctl(cli, "submit", "pytorch", "--name", "linked", "--workers", "1", "--", "python", "-c", script)
    assert result.returncode == 0, result.stderr
    waited = trainctl(cli, "wait", "linked", "--timeout", "60", timeout=90)
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    assert elsewhere.read_text() == "keep me\n"
    index = cli.home / "jobs" / "default" / "linked" / "logs" / "master-0.offsets"
    assert not index.is_symlink() and index.read_text().endswith(" 35\n")  # "0\n" to "14\n", indexed
