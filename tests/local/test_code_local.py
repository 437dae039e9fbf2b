"""Code shipping on the local backend, for real: --workdir runs from the job's own copy, and --pip /
--requirements install a wheel built here (no network: PIP_NO_INDEX) before the command, through
the same wrapper a pod runs; a failed install fails the replica without running the command."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

WHEEL = "tinypkg-1.0-py3-none-any.whl"


def build_wheel(directory: Path) -> Path:
    """A minimal pure-Python wheel, written by hand (no build backend, no network)."""
    files = {
        "tinypkg/__init__.py": "VALUE = 'tiny 1.0'\n",
        "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files["tinypkg-1.0.dist-info/RECORD"] = "\n".join([*record, "tinypkg-1.0.dist-info/RECORD,,"]) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(directory / WHEEL, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return directory / WHEEL


def offline(cli):
    cli.env["PIP_NO_INDEX"] = "1"
    return cli


def test_pip_installs_before_the_command_once_per_job(cli):
    build_wheel(cli.cwd / "dist")
    offline(cli)
    result = cli("submit", "pytorch", "--workers", "2", "--name", "pipok", "--workdir", ".", "--pip",
                 f"./dist/{WHEEL}", "--wait", "--", "python", "-c", "import tinypkg; print('got', tinypkg.VALUE)")
    assert result.returncode == 0, (result.stdout, result.stderr)
    logs = cli("logs", "pipok").stdout
    assert logs.count("got tiny 1.0") == 2
    assert logs.count("Successfully installed tinypkg-1.0") == 1  # the replicas share the job's cache
    assert "trainctl-pip: packages already installed in" in logs
    assert (cli.home / "jobs" / "default" / "pipok" / "pip").is_dir()


def test_requirements_file_relative_to_the_workdir(cli):
    build_wheel(cli.cwd / "dist")
    (cli.cwd / "requirements.txt").write_text(f"--no-index\n./dist/{WHEEL}\n")  # an option first, as many have
    result = offline(cli)("submit", "jax", "--name", "reqok", "--workdir", ".", "--requirements", "requirements.txt",
                          "--wait", "--", "python", "-c", "import tinypkg; print('got', tinypkg.VALUE)")
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "got tiny 1.0" in cli("logs", "reqok").stdout


def test_a_failed_install_fails_the_replica_and_says_so(cli):
    result = offline(cli)("submit", "pytorch", "--workers", "1", "--name", "pipbad", "--pip", "./no-such.whl",
                          "--backoff-limit", "0", "--wait", "--", "python", "-c", "print('the command ran')")
    assert result.returncode == 1
    logs = cli("logs", "pipbad").stdout
    assert "trainctl-pip: pip install failed with exit code 1: the job's command did not run" in logs
    assert "the command ran" not in logs
    assert "Failed" in cli("status", "pipbad").stdout


def test_workdir_runs_from_the_jobs_own_copy(cli):
    (cli.cwd / "train.py").write_text("import os, time\ntime.sleep(1.5)\nprint(open('data.txt').read(), os.getcwd())\n")
    (cli.cwd / "data.txt").write_text("before")
    result = cli("submit", "xgboost", "--name", "copy", "--workdir", ".", "--", "python", "train.py")
    assert result.returncode == 0, result.stderr
    # two files: the state directory (TRAINCTL_HOME, inside the project here) never travels
    assert f"in a snapshot of {cli.cwd}" in result.stdout and "code: 2 files" in result.stdout
    (cli.cwd / "data.txt").write_text("after")  # an edit made while the job runs does not reach it
    assert cli("wait", "copy").returncode == 0
    line = cli("logs", "copy").stdout.strip()
    assert line.endswith(f"before {cli.home / 'jobs' / 'default' / 'copy' / 'workspace'}"), line
    assert "code: sha256:" in cli("status", "copy").stdout


def test_preflight_sees_the_command_inside_the_pip_wrapper(cli):
    refused = cli("submit", "pytorch", "--pip", "einops", "--", "python", "missing.py")
    assert refused.returncode == 2 and "no file missing.py" in refused.stderr, refused.stderr
    assert not (cli.home / "jobs").exists() or not any((cli.home / "jobs").rglob("job.json"))
