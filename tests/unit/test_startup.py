"""trainctl --help stays fast: it imports neither the Kubernetes client nor any ML framework."""

import json
import subprocess
import sys

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
