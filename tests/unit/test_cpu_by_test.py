"""scripts/cpu_by_test.py: a process's CPU is charged to the test in its environment."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("cpu_by_test", REPO / "scripts" / "cpu_by_test.py")
cpu_by_test = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpu_by_test)

BURN = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass\n"


def test_a_busy_subprocess_is_charged_to_the_test_in_its_environment(tmp_path):
    (tmp_path / "burn.py").write_text(BURN)
    env = {"PATH": "/usr/bin:/bin", "PYTEST_CURRENT_TEST": "tests/local/test_x.py::test_burns (call)"}
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "cpu_by_test.py"), "--top", "3", "--",
                             "env", *[f"{key}={value}" for key, value in env.items()], sys.executable,
                             str(tmp_path / "burn.py")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    per_test = result.stdout.split("== per test (processes it started)\n", 1)[1].splitlines()
    charged = [float(line.split()[0]) for line in per_test if line.split()[1:] == ["tests/local/test_x.py::test_burns"]]
    assert charged and 1.0 <= charged[0] <= 3.0, result.stdout  # (the machine's other processes are listed too)
    assert "python burn.py" in result.stdout.split("== per kind of process\n", 1)[1]


def test_kinds_name_the_module_or_script_of_a_python_and_the_binary_otherwise():
    assert cpu_by_test.kind_of("/venv/bin/python -m trainctl submit pytorch") == "python -m trainctl"
    assert cpu_by_test.kind_of("/usr/bin/python3 -u /tmp/x/train_ddp.py --epochs 1") == "python train_ddp.py"
    assert cpu_by_test.kind_of("/cache/kube-apiserver --etcd-servers=x") == "kube-apiserver"
    assert cpu_by_test.kind_of("") == "(kernel or gone)"
