"""docs/python-api.md cannot rot: its python blocks run, in order, as one script (a notebook's cells).

They run as ``__main__`` of a fresh interpreter in an empty directory with a private
TRAINCTL_HOME, so the walkthrough's functions take the notebook path of function shipping, and
what the page says they print is checked against what they do print.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.framework, pytest.mark.timeout(300)]
DOC = REPO / "docs" / "python-api.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_walkthrough_runs_and_prints_what_it_says(tmp_path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 6
    (tmp_path / "walkthrough.py").write_text("\n\n".join(blocks))
    env = {"TRAINCTL_HOME": str(tmp_path / "home"), "TRAINCTL_BACKEND": "local", "PYTHONPATH": str(REPO),
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}  # as in an activated environment
    done = subprocess.run([sys.executable, "walkthrough.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=280)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for expected in ("Succeeded\n{'sum': 6.0, 'lr': 0.1}\n", "master-0 | rank 0: lr=0.1, epochs=1, all-reduced 6",
                     "worker-1 | rank 2: lr=0.1, epochs=1, all-reduced 6", "walkthrough-master-0 Succeeded 0",
                     "master-0 | rank 0: lr=0.2, epochs=1, all-reduced 3", "{'sum': 3.0, 'lr': 0.2}",
                     "True\n['walkthrough']\n", "master-0\nmaster-0 raised FloatingPointError: loss is NaN at lr=10.0; exit code 1",
                     "trainctl: diverges() raised FloatingPointError: loss is NaN at lr=10.0",
                     "['hello from 0', 'hello from 1']", "did you mean workers?", "workers 0: must be at least 1",
                     "restart_policy 'Sometimes': use one of Always, OnFailure, Never, ExitCode",
                     "20 20 {'loss': 0.05}\n20 1 {'loss': 1.0}\n"):
        assert expected in out, f"{expected!r} not in:\n{out}"
    assert "pytorchjob/walkthrough: Running" in done.stderr  # the progress lines (not a terminal: plain)
