"""trainctl --help stays fast: it imports neither the Kubernetes client nor any ML framework."""

import json
import subprocess
import sys

from tests.conftest import REPO

HEAVY = ["kubernetes", "torch", "tensorflow", "paddle", "jax", "xgboost", "mpi4py", "jinja2", "yaml", "jsonschema"]

PROBE = """
import sys, runpy
sys.argv = ["trainctl", "--help"]
try:
    from trainctl.cli.app import main
    main()
except SystemExit:
    pass
import json
print(json.dumps(sorted(m for m in sys.modules)), file=sys.stderr)
"""


def test_help_imports_nothing_heavy():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    modules = set(json.loads(result.stderr.strip().splitlines()[-1]))
    assert "Usage" in result.stdout
    loaded = sorted(name for name in HEAVY if name in modules)
    assert loaded == [], f"trainctl --help imported {loaded}"


def test_submit_help_shows_workers_meaning_and_an_example():
    result = subprocess.run([sys.executable, "-m", "trainctl", "submit", "--help"], capture_output=True, text=True,
                            env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"}, timeout=60)
    text = " ".join(result.stdout.split())
    assert "pytorch: N nodes: Master 1 + Worker N-1" in text and "mpi: Launcher 1 + Worker N" in text
    assert "trainctl submit pytorch --workers 4" in text


def modules_probe(*argv: str) -> str:
    """A program that runs ``trainctl ARGV`` in-process and prints the modules it imported, as JSON, to stderr."""
    return (f"import json, sys\nsys.argv = {['trainctl', *argv]!r}\nfrom trainctl.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")


LIST_PROBE = modules_probe("list", "--local", "-n", "default")


def test_parsing_options_does_not_import_pydantic(tmp_path):
    """typer 0.29 converts option values through Pydantic (~55 ms to import); trainctl's own
    conversion (cli/coercion.py) handles plain strings, integers, booleans and string lists."""
    env = {"TRAINCTL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", LIST_PROBE], capture_output=True, text=True, timeout=60, env=env)
    modules = set(json.loads(result.stderr.strip().splitlines()[-1]))
    assert "no jobs" in result.stdout, result.stdout + result.stderr
    assert "pydantic" not in modules and "kubernetes" not in modules


SUBMIT_PROBE = modules_probe("submit", "pytorch", "-f", "values.yaml", "--dry-run", "--no-preflight", "-o", "json", "--",
                             "python", "t.py")


def test_submit_with_a_values_file_does_not_import_pydantic_and_the_file_still_completes(tmp_path):
    """The one Path option (-f) made every submit import Pydantic (~0.1 s of CPU); its value is converted here
    now, while typer still declares it a path, so a shell completes it with file names."""
    (tmp_path / "values.yaml").write_text("workers: 3\n")
    (tmp_path / "t.py").write_text("")
    env = {"TRAINCTL_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", SUBMIT_PROBE], capture_output=True, text=True, timeout=60,
                            env=env, cwd=tmp_path)
    *_, modules_line = result.stderr.strip().splitlines()
    assert json.loads(result.stdout)["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2, result.stderr
    assert "pydantic" not in json.loads(modules_line)
    completed = subprocess.run([sys.executable, "-m", "trainctl"], capture_output=True, text=True, timeout=60,
                               env={**env, "_TRAINCTL_COMPLETE": "complete_zsh",
                                    "_TYPER_COMPLETE_ARGS": "trainctl submit -f "}, cwd=tmp_path)
    assert completed.stdout.split() == ["_files"], completed.stdout + completed.stderr


def test_plain_conversion_keeps_one_line_errors_and_typer_keeps_ranges():
    def run(*args):
        return subprocess.run([sys.executable, "-m", "trainctl", *args], capture_output=True, text=True, timeout=60)

    bad_int = run("submit", "pytorch", "--workers", "x", "--dry-run", "--", "python", "t.py")
    assert bad_int.returncode == 2 and bad_int.stderr.strip().splitlines() == [
        "error: Invalid value for '--workers': 'x' is not an integer (see: trainctl submit --help)"]
    out_of_range = run("controller", "run", "--concurrency", "0")  # min=1: typer's own check
    assert out_of_range.returncode == 2 and "--concurrency" in out_of_range.stderr
    assert "greater than or equal to 1" in out_of_range.stderr
    good = run("submit", "pytorch", "--workers", "3", "--env", "A=1", "--env", "B=2", "--dry-run", "--no-preflight",
               "-o", "json", "--", "python", "t.py")
    resource = json.loads(good.stdout)
    assert resource["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    env = resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]
    assert [e for e in env if e["name"] in ("A", "B")] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]


SDK_PROBE = """
import json, sys
import trainctl
light = sorted(sys.modules)
from trainctl import Client, JobFailed, JobHandle
Client("local")
print(json.dumps([light, sorted(sys.modules)]))
"""


def test_import_trainctl_and_the_sdk_names_stay_light():
    """A notebook's `import trainctl` loads no framework, no Kubernetes client and no CLI or rendering
    machinery; even `from trainctl import Client` (and making one) loads none of them."""
    result = subprocess.run([sys.executable, "-c", SDK_PROBE], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    after_import, after_client = (set(modules) for modules in json.loads(result.stdout))
    heavy = ["torch", "tensorflow", "kubernetes", "jinja2", "rich", "typer", "yaml", "xgboost", "jax"]
    assert [name for name in heavy if name in after_import] == []
    assert [name for name in heavy if name in after_client] == []
    assert not any(name.startswith("trainctl.") for name in after_import), "import trainctl loads only itself"
