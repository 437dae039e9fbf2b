"""Client.run(packages=...) is --pip: the replicas install them before the function runs.

Offline (PIP_NO_INDEX): the package is a wheel built by hand in the test (tests/local/test_code_local.py).
"""

from __future__ import annotations

import pytest

from tests.local import function_jobs
from tests.local.test_code_local import WHEEL, build_wheel
from trainctl import Client

pytestmark = pytest.mark.timeout(120)


def test_packages_are_installed_before_the_function_runs(cli, monkeypatch):
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.setenv("PATH", cli.env["PATH"])
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.chdir(cli.cwd)
    build_wheel(cli.cwd / "dist")
    with pytest.raises(ModuleNotFoundError):
        import tinypkg  # noqa: F401  (not here: only the job has it)
    job = Client("local").run(function_jobs.uses_package, framework="jax", packages=[f"./dist/{WHEEL}"],
                              name="fn-pip", backoff_limit=0)
    assert job.result(timeout=100) == "tiny 1.0"
    assert any("Successfully installed tinypkg-1.0" in str(line) for line in job.logs())
    job.delete()
