"""README.md's quick start, run as a newcomer runs it: the block copied verbatim, in a fresh venv.

The commands are read from README.md on every run (the first ```bash block under "## Quick
start"), so the test checks what the README says, not a copy of it. They run with bash in a
copy of the repository, as its top directory, with a shell that has no venv active, a private
TRAINCTL_HOME and no cluster. pip uses this machine's configuration and cache: the first run
downloads torch (minutes), later ones reuse the cache.

Also here: the install lines of examples/README.md are the ones scripts/test.sh (and so every
framework test) uses, and the quick start pins the versions requirements/frameworks.txt pins.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import REPO

INSTALL_AND_RUN_SECONDS = 1500  # a cold pip cache downloads torch; the job itself is bounded below
JOB_SECONDS = 120  # the bound for the job to end Succeeded


def fenced_bash(markdown: str, heading: str) -> str:
    """The first ```bash block after the line that starts with ``heading``."""
    after = markdown.split(f"\n{heading}", 1)[1]
    match = re.search(r"^```bash\n(.*?)^```", after, re.S | re.M)
    assert match, f"no ```bash block under {heading!r}"
    return match.group(1)


def repository_copy(target: Path) -> Path:
    """The working tree as a fresh clone would have it: tracked and new files, nothing ignored (.venv)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is not there to copy
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def fresh_shell_env(home: Path) -> dict[str, str]:
    """This user's environment minus the test run's venv; no cluster, a private state directory."""
    own_bin = str(Path(sys.executable).parent)
    path = [entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry and entry != own_bin]
    env = {key: value for key, value in os.environ.items()
           if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "TRAINCTL_BACKEND")}
    return {**env, "PATH": os.pathsep.join(path), "TRAINCTL_HOME": str(home), "KUBECONFIG": "/nonexistent"}


def timestamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.framework
@pytest.mark.timeout(INSTALL_AND_RUN_SECONDS + 60)
def test_readme_quick_start_verbatim_ends_succeeded(tmp_path):
    block = fenced_bash((REPO / "README.md").read_text(), "## Quick start")
    assert "trainctl submit" in block and "--follow" in block, block
    checkout = repository_copy(tmp_path / "trainctl")
    env = fresh_shell_env(tmp_path / "home")
    result = subprocess.run(["bash", "-e", "-c", block], cwd=checkout, env=env, capture_output=True, text=True,
                            timeout=INSTALL_AND_RUN_SECONDS)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert re.search(r": Succeeded on local$", output, re.M), output[-4000:]  # wait's verdict, on stderr
    listed = subprocess.run([str(checkout / ".venv" / "bin" / "trainctl"), "list", "-o", "json"], cwd=checkout,
                            env=env, capture_output=True, text=True, timeout=60)
    (job,) = json.loads(listed.stdout)["items"]
    states = {c["type"] for c in job["status"]["conditions"] if c["status"] == "True"}
    assert "Succeeded" in states, job["status"]
    took = timestamp(job["status"]["completionTime"]) - timestamp(job["metadata"]["creationTimestamp"])
    assert took.total_seconds() <= JOB_SECONDS, took
    results = [json.loads(line.split(" | ", 1)[1]) for line in result.stdout.splitlines() if '"event": "result"' in line]
    assert sorted(r["rank"] for r in results) == [0, 1] and {r["allreduce_sum"] for r in results} == {3.0}


def pinned(requirements: Path) -> dict[str, str]:
    pins = {}
    for line in requirements.read_text().splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            pins[name] = version
    return pins


def test_quick_start_pins_what_the_framework_requirements_pin():
    block = fenced_bash((REPO / "README.md").read_text(), "## Quick start")
    quick = {word.partition("==")[0]: word.partition("==")[2] for word in shlex.split(block) if "==" in word}
    assert set(quick) == {"torch", "numpy"}  # what examples/pytorch/train_ddp.py and examples/result.py import
    frameworks = pinned(REPO / "requirements" / "frameworks.txt")
    assert all(frameworks[name] == version for name, version in quick.items()), (quick, frameworks)


def test_examples_install_line_is_what_the_test_script_runs():
    """One line installs every example's imports; scripts/test.sh builds the tests' venv with exactly it."""
    block = fenced_bash((REPO / "examples" / "README.md").read_text(), "Install every framework")
    installs = [shlex.split(part)[2:] for part in block.strip().split("&&")]
    assert [words[:1] for words in installs] == [["-r"], ["--no-deps"]], installs
    script = (REPO / "scripts" / "test.sh").read_text()
    ran = [shlex.split(line.split("pip install", 1)[1].replace("-q ", "")) for line in script.splitlines()
           if "pip install" in line and "requirements/" in line]
    assert all(words in ran for words in installs), (ran, installs)  # test.sh may install more (test tools)
    for words in installs:
        assert (REPO / words[-1]).is_file(), words
