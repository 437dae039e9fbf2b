"""Hostile files in a working directory or an ``apply -f`` file, run for real: the CLI as a user runs it
and the init container's command as a pod runs it. Every case ends within 5 s in one line, and the
peak memory (ru_maxrss, from wait4) of submit, apply and the unpacker stays under 200 MB:
only regular files are read, every read is bounded, and limits on unpacked bytes and file count are
checked before anything is written."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainctl.code import pods, unpack
from trainctl.code.archive import Archive

SECONDS, MEGABYTES = 5, 200


@dataclass
class Measured:
    code: int
    stdout: str  # its first MiB
    stderr: str
    seconds: float
    peak_mb: float
    stdout_bytes: int = 0

    def one_line(self) -> str:
        lines = self.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in self.stderr, self.stderr[-2000:]
        return lines[0]


# A child's ru_maxrss starts from its parent's RSS at fork: measured from pytest, it would count pytest's
# own memory. So a small Python process (about 10 MB, counted too: an upper bound) starts the command and
# reports its children's peak alone.
PEAK_OF_CHILD = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measured(command: list[str], cwd: Path, env: dict | None = None, hang: float = 3 * SECONDS,
             file_size_limit: int | None = None) -> Measured:
    """``command`` run to its end, with its wall time and peak RSS; a hang is killed after ``hang`` s and fails.
    ``file_size_limit``: the most bytes it may write into one file (RLIMIT_FSIZE: a disk that fills up)."""
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as peak:
        start = time.monotonic()
        process = subprocess.Popen([sys.executable, "-c", PEAK_OF_CHILD, peak.name, *command], cwd=cwd, env=env,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                                   preexec_fn=limited if file_size_limit else None)
        try:
            process.wait(hang)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"{command[-6:]} still running after {hang} s")
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return Measured(process.returncode, out.read(1 << 20).decode(errors="replace"),
                        err.read().decode(errors="replace"), seconds, int(peak.read()) / 1024, out.seek(0, 2))


def trainctl(cli, *args: str) -> Measured:
    return measured([sys.executable, "-m", "trainctl", *args], cli.cwd, cli.env)


def trainctl_slow(cli, *args: str) -> Measured:
    """A legitimate command over a big snapshot: gzip alone takes seconds, so only its memory is bounded."""
    return measured([sys.executable, "-m", "trainctl", *args], cli.cwd, cli.env, hang=180)


def submit_dry_run(cli) -> Measured:
    return trainctl(cli, "submit", "pytorch", "--workdir", "project", "--dry-run", "-o", "yaml", "--", "python",
                    "train.py")


@pytest.fixture
def project(cli) -> Path:
    (cli.cwd / "project").mkdir()
    (cli.cwd / "project" / "train.py").write_text("print('ok')\n")
    return cli.cwd / "project"


def within_limits(run: Measured) -> None:
    assert run.seconds < SECONDS, f"{run.seconds:.1f} s"
    assert run.peak_mb < MEGABYTES, f"{run.peak_mb:.0f} MB"


# ---- the working directory ---------------------------------------------------------------------

@pytest.mark.parametrize("ignore_file", [".gitignore", ".trainctlignore"])
def test_an_ignore_file_that_is_a_fifo_or_dev_zero_is_refused_in_one_line(cli, project, ignore_file):
    os.mkfifo(project / ignore_file)
    run = submit_dry_run(cli)
    within_limits(run)
    assert run.code == 2 and ignore_file in run.one_line() and "not a regular file" in run.one_line()
    (project / ignore_file).unlink()
    (project / ignore_file).symlink_to("/dev/zero")
    run = submit_dry_run(cli)
    within_limits(run)
    assert run.code == 2 and ignore_file in run.one_line() and "character device" in run.one_line()


def test_a_1_gib_sparse_file_is_refused_by_its_unpacked_size(cli, project):
    with open(project / "sparse.bin", "wb") as sparse:
        sparse.truncate(1 << 30)
    run = submit_dry_run(cli)
    within_limits(run)
    line = run.one_line()
    assert run.code == 2 and "sparse.bin (1.0 GiB)" in line and "256 MiB" in line and run.stdout == ""


def test_special_files_and_a_symlink_loop_are_each_named_in_one_warning(cli, project):
    os.mkfifo(project / "pipe")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(project / "sock"))
    os.mknod(project / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    (project / "loop-a").symlink_to("loop-b")
    (project / "loop-b").symlink_to("loop-a")
    try:
        run = submit_dry_run(cli)
    finally:
        listening.close()
    within_limits(run)
    assert run.code == 0 and "Traceback" not in run.stderr, run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.startswith("warning:")]
    assert sorted(warnings) == sorted([
        "warning: skipped symlink loop-a: it loops", "warning: skipped symlink loop-b: it loops",
        "warning: skipped null: a character device, not a regular file",
        "warning: skipped pipe: a FIFO, not a regular file", "warning: skipped sock: a socket, not a regular file"])
    assert "code: 1 file," in run.stderr



def incompressible(path: Path, mib: int) -> None:
    with open(path, "wb") as out:
        for _ in range(mib):
            out.write(os.urandom(1 << 20))


@pytest.mark.parametrize("output", [[], ["-o", "json"]], ids=["abridged", "every ConfigMap printed"])
def test_a_raised_limit_does_not_raise_submits_memory(cli, project, output):
    """150 MiB that gzip cannot shrink, under --workdir-limit 256Mi: the archive goes to a private temporary file
    and each ConfigMap's chunk is read from it as that ConfigMap is printed, so the peak is what it is at the
    default limit (it was 208 MB with the archive in memory)."""
    incompressible(project / "weights.bin", 150)
    run = trainctl_slow(cli, "submit", "pytorch", "--workdir", "project", "--workdir-limit", "256Mi", "--dry-run",
                        *output, "--", "python", "train.py")
    assert run.code == 0, run.stderr[-2000:]
    assert run.peak_mb < MEGABYTES, f"{run.peak_mb:.0f} MB"
    if output:
        assert run.stdout_bytes > (150 << 20) * 4 // 3  # the whole archive, in base64
    else:
        assert "travels   2 files, 150.0 MiB (150.1 MiB compressed)" in run.stdout, run.stdout[:2000]


def test_a_temporary_directory_that_fills_up_is_one_line(cli, project):
    """The archive's temporary file cannot grow (a full disk: here RLIMIT_FSIZE, EFBIG): the packed file is not
    blamed, and the line says where the space ran out."""
    incompressible(project / "weights.bin", 4)
    run = measured([sys.executable, "-m", "trainctl", "submit", "pytorch", "--workdir", "project", "--dry-run", "--",
                    "python", "train.py"], cli.cwd, cli.env, file_size_limit=2 << 20)
    within_limits(run)
    line = run.one_line()
    assert run.code == 2 and "could not be written to a temporary file in" in line and "TMPDIR" in line, line


# ---- apply -f and the unpacker -------------------------------------------------------------------

class Zeros(io.RawIOBase):
    """``size`` zero bytes, made as they are read: a 512 MiB member without 512 MiB in memory."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count


def archive_of(members: list[tuple[str, int]]) -> bytes:
    """A tar.gz of (name, size) zero-filled files, as a hostile file may carry one under a matching hash."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for name, size in members:
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BufferedReader(Zeros(size)) if size else None)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def hostile_archives() -> dict[str, bytes]:
    return {"big member": archive_of([("train.py", 3), ("big.bin", 512 << 20)]),
            "100k members": archive_of([(f"f{index}", 0) for index in range(100_000)])}


def applied_file(archive: bytes) -> str:
    """What submit --dry-run prints for a job shipping ``archive``: its ConfigMaps, then the job."""
    import yaml

    digest = f"sha256:{hashlib.sha256(archive).hexdigest()}"
    documents = [{"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"trainctl-code-{digest[7:27]}-{index}",
                               "labels": {"trainctl.io/code-snapshot": digest[7:27]},
                               "annotations": {"trainctl.io/code-digest": digest}},
                  "binaryData": {"chunk": base64.b64encode(chunk).decode()}}
                 for index, chunk in enumerate(pods.chunks(Archive.of(archive)))]
    documents.append({"apiVersion": "kubeflow.org/v1", "kind": "JAXJob",
                      "metadata": {"name": "hostile", "annotations": {"trainctl.io/code-digest": digest}},
                      "spec": {"jaxReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
                          {"name": "jax", "image": "python:3.11", "command": ["python", "-c", "pass"]}]}}}}}})
    return yaml.safe_dump_all(documents)


@pytest.mark.parametrize("case", ["big member", "100k members"])
def test_apply_of_a_hostile_archive_is_refused_before_anything_is_written(cli, hostile_archives, case):
    (cli.cwd / "job.yaml").write_text(applied_file(hostile_archives[case]))
    run = trainctl(cli, "apply", "-f", "job.yaml")
    within_limits(run)
    line = run.one_line()
    assert run.code == 2 and ("256 MiB" in line if case == "big member" else "50,000" in line), line
    assert not (cli.home / "jobs").exists() or not any((cli.home / "jobs").iterdir())


def test_apply_of_a_fifo_with_no_writer_ends_in_one_line(cli):
    os.mkfifo(cli.cwd / "jobs.yaml")
    run = trainctl(cli, "apply", "-f", "jobs.yaml")
    within_limits(run)
    assert run.code == 2 and "jobs.yaml" in run.one_line()


def unpacker(archive: bytes, chunks: Path, into: Path) -> Measured:
    """The init container's command as the pod runs it, over ``archive`` cut into ConfigMap chunks."""
    chunks.mkdir()
    for index, chunk in enumerate(pods.chunks(Archive.of(archive))):
        (chunks / f"{index:05d}").write_bytes(chunk)
    digest = f"sha256:{hashlib.sha256(archive).hexdigest()}"
    command = pods.script_command("unpack", "trainctl-unpack",
                                  ["--chunks", str(chunks), "--digest", digest, "--into", str(into)])
    return measured(command, chunks.parent)


@pytest.mark.parametrize("case", ["big member", "100k members"])
def test_the_unpacker_refuses_a_hostile_archive_before_writing_anything(tmp_path, hostile_archives, case):
    run = unpacker(hostile_archives[case], tmp_path / "chunks", tmp_path / "ws")
    within_limits(run)
    line = run.one_line()
    assert run.code == 1 and line.startswith("trainctl-unpack: ") and ("big.bin" in line or "f50000" in line), line
    assert not (tmp_path / "ws").exists() or not any((tmp_path / "ws").iterdir())


def test_the_unpacker_streams_a_legitimate_snapshot_near_the_limit(tmp_path):
    """200 MiB in one member: written 64 KiB at a time, never held whole."""
    archive = archive_of([("weights.bin", 200 << 20), ("train.py", 3)])
    run = unpacker(archive, tmp_path / "chunks", tmp_path / "ws")
    assert run.code == 0, run.stderr
    assert run.peak_mb < MEGABYTES, f"{run.peak_mb:.0f} MB"
    assert (tmp_path / "ws" / "weights.bin").stat().st_size == 200 << 20
    assert unpack.MAX_BYTES == 256 << 20 and unpack.MAX_FILES == 50_000


def chained_pax_headers(count: int) -> bytes:
    """``count`` PAX headers in a row before one member: tarfile follows them by recursion."""
    raw = io.BytesIO()
    record = b"15 comment=abc\n"
    for _ in range(count):
        pax = tarfile.TarInfo("././@PaxHeader")
        pax.type, pax.size = tarfile.XHDTYPE, len(record)
        raw.write(pax.tobuf(tarfile.USTAR_FORMAT) + record.ljust(512, b"\0"))
    raw.write(tarfile.TarInfo("x").tobuf(tarfile.USTAR_FORMAT) + bytes(1024))
    return gzip.compress(raw.getvalue())


def test_tar_headers_no_snapshot_holds_are_refused_in_one_line(tmp_path):
    huge = io.BytesIO()
    with tarfile.open(fileobj=huge, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        member = tarfile.TarInfo("a")
        member.pax_headers = {"comment": "x" * (10 << 20)}  # tarfile would hold all 10 MiB of it
        tar.addfile(member, io.BytesIO(b""))
    cases = {huge.getvalue(): "a tar header of 10,486,272 bytes", chained_pax_headers(3000): "chained too deep"}
    for archive, refusal in cases.items():
        with pytest.raises(unpack.Refused, match=refusal):
            unpack.extract(archive, str(tmp_path / "ws"))
    assert not (tmp_path / "ws").exists()
