"""A function defined in ``__main__`` (a script here; a notebook cell follows the same rule) runs as a job.

Only the function and what its code names travel (docs/python-api.md): a helper function, a
decorated class, a module imported under another name, constants. The script itself is never
re-run in a replica (its unguarded top level would submit the job again), and what rank 0
returns, an instance of the script's own class, unpickles in the script as that class.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.timeout(120)

SCRIPT = '''
import json as j
from dataclasses import dataclass

from trainctl import Client

GREETING = "hi"
SETTINGS = {"scale": 3}
print("top level ran", flush=True)  # must not run in a replica: only the function and what it names travel


@dataclass
class Score:
    value: float


BONUS = Score(0.5)  # an instance of a class defined here: it unpickles once Score's source ran


def helper(x):
    return x * SETTINGS["scale"]


def train(x):
    import os

    print(GREETING, os.environ["RANK"], j.dumps({"x": x}), flush=True)
    return Score(helper(x) + BONUS.value)


job = Client("local").run(train, args={"x": 2}, workers=2, name="main-fn", backoff_limit=0,
                          pickle_result=True)  # its own class: not data, so pickled by request
score = job.result(timeout=90, allow_pickle=True)
assert type(score) is Score, type(score)
print("RESULT", score.value)
for line in sorted(str(line) for line in job.logs(follow=True)):  # the worker may print after the master ended
    print("LOG", line)
job.delete()
'''


def test_a_main_function_ships_what_it_names_and_returns_its_own_class(tmp_path):
    (tmp_path / "notebook_like.py").write_text(SCRIPT)
    env = {"TRAINCTL_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "notebook_like.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=110)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("top level ran") == 1
    assert "RESULT 6.5" in done.stdout, done.stdout
    assert 'LOG master-0 | hi 0 {"x": 2}' in done.stdout and 'LOG worker-0 | hi 1 {"x": 2}' in done.stdout
    assert "LOG master-0 | top level ran" not in done.stdout


NOTEBOOK = r'''
import json
import linecache
from pathlib import Path

import __main__

del __main__.__file__  # a notebook kernel's __main__ has no file
CELLS = [
    "import numpy as np\nfrom trainctl import Client\n\nclient = Client('local')\nCONFIG = {'scale': 2}\n",
    "def helper(v):\n    return np.float64(v) * CONFIG['scale']\n",
    "def train(x):\n    import os\n    print('rank', os.environ['RANK'], flush=True)\n    return float(helper(x))\n",
    "job = client.run(train, args={'x': 1.5}, workers=2, name='cells', backoff_limit=0)\n"
    "print('RESULT', job.result(timeout=90))\n",
]
for number, cell in enumerate(CELLS):  # as ipykernel runs a cell: compiled under a name linecache knows
    filename = f"/tmp/ipykernel_0/{number}.py"
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    exec(compile(cell, filename, "exec"), __main__.__dict__)
command = job.resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
call = json.loads(Path(command[1]).with_name("call.json").read_text())  # [python, runner]: the shipped call
print("IMPORTS", call["imports"])
print("SOURCE", json.dumps(call["source"]))
'''


def test_notebook_cells_ship_the_function_and_what_it_names_from_linecache(tmp_path):
    """The cell mechanism IPython uses (sources only in linecache, no __file__), without IPython itself."""
    (tmp_path / "kernel.py").write_text(NOTEBOOK)
    env = {"TRAINCTL_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "kernel.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=110)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RESULT 3.0" in done.stdout
    assert "IMPORTS {'np': 'numpy'}" in done.stdout
    source = next(line for line in done.stdout.splitlines() if line.startswith("SOURCE"))
    assert "def helper" in source and "def train" in source and "client.run" not in source, source
