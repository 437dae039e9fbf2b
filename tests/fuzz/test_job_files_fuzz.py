"""Fuzzing what a job may do to its own directory (issue 54): every file there is the replicas' to shape.

Whatever stands at any name a local job's directory holds (a link to /dev/zero, a FIFO, a directory, a huge
sparse file, a dangling link, a link to a file elsewhere), every function of trainctl that reads or writes it
returns within a bound of time, reads no more than its bound (counted by the kernel: /proc/self/io's rchar), holds
no more memory than a few times that, never follows a link and never blocks (docs/local-backend.md, "Files a job
may shape"). The readers are called directly, on a job directory laid out as the local backend lays it out.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import tempfile
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import COUNTS, fuzz
from trainctl.backends.local import logs, store, supervisor
from trainctl.backends.local.store import JobDir
from trainctl.errors import UserError

pytestmark = pytest.mark.fuzz

REPLICA = "master-0"
NAMES = ["job.json", "runtime.json", "events.jsonl", "uid", "containment", ".lock", f"logs/{REPLICA}.log",
         f"logs/{REPLICA}.offsets", f"logs/{REPLICA}.previous.log", f"logs/{REPLICA}.previous.offsets",
         f"logs/{REPLICA}.termination", f"logs/{REPLICA}.progress", f"logs/{REPLICA}.preempting"]
KINDS = ["zero", "fifo", "directory", "huge", "dangling", "outside"]
HUGE = 40 << 20  # past every bound below; sparse, with a line end every LINE bytes
LINE = 64 << 10
OUTSIDE = b"OUTSIDE-TOKEN: a file of the user's that no reader may show\n"
SECONDS = 10.0  # each call; the slowest take a fraction of a second
SLACK = 1 << 20  # what else a call reads: /proc/self/io itself, a module imported on first use
RESOURCE = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "fuzzed", "namespace": "default", "uid": "fuzzed-uid",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "pytorch", "command": ["python", "-c", "1"]}]}}}}},
            "status": {"conditions": []}}
STATE = store.MAX_STATE_BYTES + 1
LOG_READ = HUGE + logs.MAX_INDEX_BYTES  # a log is read whole (a regular one: it is the job's output), its index not


def lay_out(root: Path) -> JobDir:
    """A job's directory with every file a local job has, each holding a little of what it holds."""
    job_dir = JobDir("default", "fuzzed", root=root)
    job_dir.logs.mkdir(parents=True)
    job_dir.write_job(RESOURCE)
    job_dir.write_runtime({"uid": "fuzzed-uid", "replicas": {}, "supervisor_pid": 1})
    job_dir.append_event({"type": "Normal", "reason": "Created", "message": "m", "time": "2026-01-01T00:00:00Z"})
    job_dir.uid_file.write_text("fuzzed-uid")
    job_dir.record_containment({"kind": "marker"})
    (job_dir.path / ".lock").touch()
    for previous in (False, True):
        job_dir.log_file(REPLICA, previous).write_bytes(b"a line\nanother\n")
        job_dir.offsets_file(REPLICA, previous).write_text("1700000000.000 7\n1700000001.000 15\n")
    job_dir.termination_file(REPLICA).write_text("its message")
    job_dir.progress_file(REPLICA).write_text('trainctl-progress {"step": 1}\n')
    job_dir.preempting_file(REPLICA).write_text("Suspended\n")
    return job_dir


def place(path: Path, kind: str, outside: Path) -> None:
    """Replace ``path`` by what a hostile replica would leave there."""
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif os.path.lexists(path):
        path.unlink()
    if kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(outside.parent / "nothing-here")
    elif kind == "outside":
        path.symlink_to(outside)
    else:
        with open(path, "wb") as huge:
            for offset in range(LINE - 1, HUGE, LINE):
                huge.seek(offset)
                huge.write(b"\n")


def bytes_read() -> int:
    with open("/proc/self/io", "rb") as io:
        return int(next(line for line in io.read().splitlines() if line.startswith(b"rchar:")).split()[1])


def whole(chunks) -> str:
    """Consume log chunks one at a time (as ``logs`` prints them); what they say, within each chunk's bound."""
    kept = []
    for chunk in chunks:
        assert len(chunk.data) <= logs.CHUNK_BYTES + LINE, len(chunk.data)
        kept.append(chunk.data[:200])  # what is checked below is at a chunk's start; the rest need not be held
    return repr(kept)


def readers(job_dir: JobDir) -> dict[str, tuple[int, object]]:
    """Each reader and writer of the job's files: its bound on bytes read, and a call of it."""
    def quietly(call):
        """A reader that may answer with a one-line UserError (a damaged job.json): that is an answer too."""
        def called():
            try:
                return call()
            except UserError as error:
                assert "\n" not in error.message, error.message
                return error.message
        return called

    def lock():
        with job_dir.locked(timeout=1.0) as held:
            return held

    return {
        "read_job": (STATE, quietly(job_dir.read_job)),
        "read_runtime": (STATE, quietly(job_dir.read_runtime)),
        "events": (store.MAX_EVENTS_BYTES, job_dir.events),
        "uids": (store.MAX_UID_BYTES + 2 * STATE, job_dir.uids),
        "containment_records": (store.MAX_CONTAINMENT_BYTES, job_dir.containment_records),
        "read_termination_file": (supervisor.MAX_TERMINATION_MESSAGE_BYTES,
                                  lambda: supervisor.read_termination_file(job_dir.termination_file(REPLICA))),
        "log_tail": (supervisor.LOG_FALLBACK_BYTES, lambda: supervisor.log_tail(job_dir.log_file(REPLICA))),
        "read_index": (logs.MAX_INDEX_BYTES, lambda: logs.read_index(job_dir.offsets_file(REPLICA))),
        "report_lines": (logs.MAX_REPORT_BYTES, lambda: len(logs.report_lines(job_dir.progress_file(REPLICA), True))),
        "read_logs": (2 * LOG_READ, lambda: whole(logs.read_logs(job_dir, [REPLICA], None, False, 3600, True))
                      + whole(logs.read_logs(job_dir, [REPLICA], 5, True))),
        "follow_logs": (2 * LOG_READ, lambda: whole(logs.follow_logs(job_dir, [REPLICA], None, None, lambda: True))),
        "append_line": (0, lambda: store.append_line(job_dir.offsets_file(REPLICA), "1700000002.000 20")),
        "append_event": (0, lambda: job_dir.append_event({"type": "Normal", "reason": "R", "message": "m"})),
        "write_notice": (0, lambda: supervisor.write_notice(job_dir.preempting_file(REPLICA), "Suspended\n")),
        "lock": (0, lock),
        "termination_message": (supervisor.MAX_TERMINATION_MESSAGE_BYTES + supervisor.LOG_FALLBACK_BYTES,
                                lambda: supervisor.termination_message(job_dir, REPLICA, failed=True)),
    }


class Blocked(Exception):
    pass


def _on_alarm(signum, frame):
    raise Blocked(f"no answer within {SECONDS}s")


@contextlib.contextmanager
def bounded(name: str, read_bound: int):
    """The call in the block answers within SECONDS, reads at most ``read_bound`` bytes and holds at most a few
    times that in memory; an unbounded read fails within a GiB of address space rather than filling the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    in_use = int(next(line for line in Path("/proc/self/status").read_text().splitlines()
                      if line.startswith("VmSize:")).split()[1]) << 10
    resource.setrlimit(resource.RLIMIT_AS, (in_use + (2 << 30), hard))
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    tracemalloc.start()
    before = bytes_read()
    try:
        yield
        read = bytes_read() - before
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert read <= read_bound + SLACK, f"{name} read {read} bytes, its bound is {read_bound}"
    memory = 4 * min(read_bound, logs.MAX_INDEX_BYTES if read_bound >= LOG_READ else read_bound) + (8 << 20)
    assert peak <= memory, f"{name} held {peak} bytes"


@fuzz(30)
@given(name=st.sampled_from(NAMES), kind=st.sampled_from(KINDS))
def test_no_file_a_job_leaves_makes_trainctl_read_past_its_bound_or_block(name, kind):
    COUNTS["cases"] += 1
    with tempfile.TemporaryDirectory(prefix="job-files-") as scratch:
        outside = Path(scratch) / "elsewhere.txt"
        outside.write_bytes(OUTSIDE)
        job_dir = lay_out(Path(scratch) / "home")
        place(job_dir.path / name, kind, outside)
        for reader, (bound, call) in readers(job_dir).items():
            started = time.monotonic()
            with bounded(f"{reader} ({name} as {kind})", bound):
                answer = call()
            assert time.monotonic() - started < SECONDS
            assert b"OUTSIDE-TOKEN" not in repr(answer).encode(), (reader, answer)
        assert outside.read_bytes() == OUTSIDE  # no write went through a link
        for written in (job_dir.offsets_file(REPLICA), job_dir.preempting_file(REPLICA), job_dir.path / ".lock",
                        job_dir.path / "events.jsonl"):
            assert written.is_file() and not written.is_symlink(), written  # what a replica left there was replaced


def test_an_unreadable_log_is_one_line_naming_it(tmp_path):
    """The one line that stands for a log a replica replaced, from every log reader."""
    job_dir = lay_out(tmp_path / "home")
    place(job_dir.log_file(REPLICA), "fifo", tmp_path / "x")
    expected = f"logs/{REPLICA}.log: unreadable (a FIFO, not a regular file)"
    assert [chunk.data for chunk in logs.read_logs(job_dir, [REPLICA], None, False)] == [expected.encode() + b"\n"]
    followed = b"".join(c.data for c in logs.follow_logs(job_dir, [REPLICA], None, None, lambda: True))
    assert followed.decode().splitlines() == [expected]
    assert supervisor.log_tail(job_dir.log_file(REPLICA)) == expected
    place(job_dir.path / "events.jsonl", "zero", tmp_path / "x")
    assert [event["message"] for event in job_dir.events()] == ["events.jsonl: unreadable (a symlink, not a regular "
                                                                "file)"]
    assert json.dumps(job_dir.events())  # as status prints it
