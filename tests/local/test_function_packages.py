"""Client.run(packages=...) is --pip: the replicas install them before the function runs, with the Python that
runs it.

Offline (PIP_NO_INDEX): the package is a wheel built by hand in the test (tests/local/test_code_local.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.local import function_jobs
from tests.local.test_code_local import WHEEL, build_wheel
from trainctl import Client

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def offline(cli, monkeypatch):
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.setenv("PATH", cli.env["PATH"])
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.chdir(cli.cwd)
    build_wheel(cli.cwd / "dist")
    return cli


def test_packages_are_installed_before_the_function_runs(offline, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")  # as a Jupyter kernel sets it: pip's output then ends in a colour reset
    with pytest.raises(ModuleNotFoundError):
        import tinypkg  # noqa: F401  (not here: only the job has it)
    job = Client("local").run(function_jobs.uses_package, framework="jax", packages=[f"./dist/{WHEEL}"],
                              name="fn-pip", backoff_limit=0)
    assert job.result(timeout=100) == "tiny 1.0"
    assert any("Successfully installed tinypkg-1.0" in str(line) for line in job.logs())
    job.delete()


def test_packages_are_installed_for_the_interpreter_that_runs_the_function(offline, monkeypatch, tmp_path):
    """Issue 23, defect 8: a notebook's kernel is a virtualenv's Python, but the first python3 on its PATH is
    another (here one without pip): the packages are for the kernel's."""
    other = tmp_path / "other-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    monkeypatch.setenv("PATH", f"{other / 'bin'}{os.pathsep}{os.environ['PATH']}")
    job = Client("local").run(function_jobs.uses_package, framework="jax", packages=[f"./dist/{WHEEL}"],
                              name="fn-pip-python", backoff_limit=0)
    assert job.result(timeout=100) == "tiny 1.0"
    assert any(line.text.startswith(f"trainctl-pip: {sys.executable} -m pip install") for line in job.logs())
    job.delete()
