"""Functions of a user's own package: the module's source travels, and relative imports still work.

The package lives in the directory the job is submitted from (a project), so the replica finds the
package's other modules there: from a package's ``__init__`` (whose submodules are looked up where
the replica finds the package) and from a submodule (``from . import``, ``from .x import``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.timeout(120)

SCRIPT = """
from trainctl import Client
import mypkg
from mypkg import steps

client = Client("local")
for func in (mypkg.train, steps.train_step):
    job = client.run(func, args={"times": 2}, framework="jax", backoff_limit=0)
    print(func.__module__, job.result(timeout=90))
    job.delete()
"""


def test_package_functions_keep_their_relative_imports(tmp_path):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import consts\n\n\ndef train(times):\n"
                                         "    from .consts import VALUE\n    return VALUE * times + consts.VALUE\n")
    (package / "consts.py").write_text("VALUE = 10\n")
    (package / "steps.py").write_text("from .consts import VALUE\n\n\ndef train_step(times):\n"
                                      "    return VALUE - times\n")
    (tmp_path / "go.py").write_text(SCRIPT)
    env = {"TRAINCTL_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "go.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=110)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["mypkg 30", "mypkg.steps 8"]
