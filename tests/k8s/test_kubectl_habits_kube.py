"""kubectl habits against the real API server: the same selector selects the same jobs as locally,
bad selectors are one line before any request, KIND/NAME, get, -o name|wide, completion of names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import OutputLines
from tests.k8s.test_kube_backend import KubeCLI, kube  # noqa: F401 - the fixture

pytestmark = pytest.mark.k8s

JOBS = {"sel-a": "team=nlp,tier=gold", "sel-b": "team=cv,tier=gold", "sel-c": "team=nlp", "sel-d": "owner=x"}
SELECTORS = ["team=nlp", "team==nlp", "team!=nlp", "team in (nlp,cv)", "team notin (cv)", "tier", "!tier",
             "team in (nlp),tier=gold", "team notin (nlp),!owner"]
SLEEP = ["--", "python", "-c", "import time; time.sleep(120)"]


def labels(spec: str) -> list[str]:
    return [word for pair in spec.split(",") for word in ("--label", pair)]


def names(result) -> set[str]:
    assert result.returncode == 0, result.stderr
    return {line.rsplit("/", 1)[1] for line in result.stdout.split()}


def test_a_selector_selects_the_same_jobs_on_both_backends(kube, tmp_path):
    kube.env["TRAINCTL_HOME"] = str(tmp_path / "home")
    for name, spec in JOBS.items():
        for backend in ([], ["--local"]):
            result = kube("submit", "jax", "--name", name, "-n", kube.namespace, *labels(spec), *backend, *SLEEP)
            assert result.returncode == 0, result.stderr
    try:
        for selector in SELECTORS:
            on_cluster = names(kube("list", "-n", kube.namespace, "-l", selector, "-o", "name"))
            locally = names(kube("list", "-n", kube.namespace, "-l", selector, "-o", "name", "--local"))
            assert on_cluster == locally, selector
        assert names(kube("list", "-n", kube.namespace, "-l", "team in (nlp),tier=gold", "-o", "name")) == {"sel-a"}
    finally:
        for name in JOBS:
            kube("delete", name, "-n", kube.namespace, "--local")


@pytest.mark.parametrize("command", [["list"], ["delete", "--all"]])
def test_a_bad_selector_is_one_line_on_kubernetes_too(kube, command):
    result = kube(*command, "-n", kube.namespace, "-l", "team in nlp")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "-l/--selector 'team in nlp'" in result.stderr


def test_kind_slash_name_get_and_output_forms(kube):
    assert kube("submit", "tf", "--name", "habit", "-n", kube.namespace, *SLEEP).returncode == 0
    assert kube("get", "tfjobs.kubeflow.org/habit", "-n", kube.namespace, "-o", "name").stdout.strip() \
        == "tfjob.kubeflow.org/habit"
    missing = kube("status", "pytorchjob/habit", "-n", kube.namespace)
    assert missing.returncode == 2 and 'job "habit" not found' in missing.stderr
    wide = kube("list", "-n", kube.namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-2:] == ["TYPES", "IMAGES"]
    row = next(line for line in wide if "habit" in line).split()
    assert row[wide[0].split().index("TYPES")] == "Worker:1"  # by header: columns are added over time


def test_job_names_complete_from_the_cluster(kube):
    assert kube("submit", "xgboost", "--name", "completes", "-n", kube.namespace, *SLEEP).returncode == 0
    env = {**kube.env, "_TRAINCTL_COMPLETE": "complete_bash", "COMP_WORDS": f"trainctl status -n {kube.namespace} co",
           "COMP_CWORD": "4"}
    result = subprocess.run([sys.executable, "-m", "trainctl"], env=env, capture_output=True, text=True, timeout=30)
    assert result.stdout.split() == ["completes"], result.stderr


def test_list_watch_on_kubernetes_prints_changes_until_ctrl_c(kube):
    import signal

    watcher = kube.popen("list", "-n", kube.namespace, "-w")
    printed = OutputLines(watcher)
    printed.wait_for("NAMESPACE")
    assert kube("submit", "paddle", "--name", "watched", "-n", kube.namespace, *SLEEP).returncode == 0
    printed.wait_for("watched")
    assert kube("delete", "watched", "-n", kube.namespace).returncode == 0
    deleted = printed.wait_for("Deleted")
    watcher.send_signal(signal.SIGINT)
    assert watcher.wait(timeout=30) == 0
    assert "Traceback" not in watcher.stderr.read()
    assert deleted.split()[:4] == [kube.namespace, "watched", "PaddleJob", "Deleted"]
