"""What kubectl users type works: kind spellings, KIND/NAME, get, -o name|wide, plain tables when piped,
list -w, set-based selectors, submit -o, hints that fit and name only real options.

Everything runs the real CLI in a subprocess against real local jobs (tests/conftest.py ``cli``).
"""

import pytest

from tests.conftest import OutputLines
from tests.unit.test_bad_input import assert_one_line_error
from trainctl.frameworks import by_name


@pytest.mark.parametrize("spelling", ["pytorch", "PyTorchJob", "pytorchjob", "pytorchjobs", "pytorchjob.kubeflow.org",
                                      "PyTorchJobs.kubeflow.org"])
def test_every_kubectl_spelling_of_a_kind(spelling):
    assert by_name(spelling).kind == "PyTorchJob"


@pytest.mark.parametrize("typo, suggestion", [("pytorc", "pytorch"), ("tensorfow", "tensorflow"), ("xgbost", "xgboost"),
                                              ("paddel", "paddle"), ("tfjbo", "tensorflow")])
def test_a_mistyped_kind_gets_did_you_mean(cli, typo, suggestion):
    assert_one_line_error(cli("submit", typo, "--dry-run", "--", "x"), f"did you mean {suggestion}?")


def test_a_kind_far_from_any_has_no_guess(cli):
    result = cli("submit", "caffe", "--dry-run", "--", "x")
    assert_one_line_error(result, "unknown job kind 'caffe': use one of pytorch, tensorflow")


SLEEP = ["--", "python", "-c", "import time; time.sleep(120)"]
LONG_NAME = "a-rather-long-job-name-that-must-never-be-cut-x"  # 47 characters


@pytest.fixture
def jobs(cli):
    """Two running jobs in two namespaces with labels; deleted afterwards."""
    made = [("team1", LONG_NAME, "pytorch", "team=nlp"), ("other", "tf1", "tf", "team=cv")]
    for namespace, name, kind, label in made:
        result = cli("submit", kind, "--name", name, "-n", namespace, "--label", label, "--label", "tier=a", *SLEEP)
        assert result.returncode == 0, result.stderr
    yield made
    for namespace, name, _, _ in made:
        cli("delete", name, "-n", namespace)


def test_list_forms_name_wide_and_plain_columns_when_piped(cli, jobs):
    names = cli("list", "-A", "-o", "name")
    assert sorted(names.stdout.split()) == ["pytorchjob.kubeflow.org/" + LONG_NAME, "tfjob.kubeflow.org/tf1"]
    cli.env["COLUMNS"] = "40"  # a pipe has no width: nothing may be cut or wrapped anyway
    wide = cli("list", "-A", "-o", "wide")
    assert "\x1b[" not in wide.stdout
    header, *rows = wide.stdout.splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "KIND", "STATE", "ATTEMPT", "REPLICAS", "AGE", "DURATION",
                              "PROGRESS", "TYPES", "IMAGES"]
    by_name = {row.split()[1]: row.split() for row in rows}
    assert by_name[LONG_NAME][4] == "1"  # the first attempt: never restarted nor resumed
    assert by_name[LONG_NAME][8] == "-"  # nothing reported: a cell of its own, so the columns still split
    assert by_name[LONG_NAME][9] == "Master:1,Worker:1" and by_name[LONG_NAME][10].startswith("docker.io/pytorch/")
    assert by_name["tf1"][2] == "TFJob" and len(by_name["tf1"]) == 11


def test_status_kind_slash_name_get_alias_and_output_forms(cli, jobs):
    assert cli("status", "tfjob/tf1", "-n", "other", "-o", "name").stdout.strip() == "tfjob.kubeflow.org/tf1"
    for spelling in ("TFJob", "tfjobs", "tfjob.kubeflow.org", "tensorflow"):
        assert cli("get", f"{spelling}/tf1", "-n", "other", "-o", "name").stdout.strip() == "tfjob.kubeflow.org/tf1"
    assert cli("get", "tf1", "-n", "other", "-o", "json").stdout == cli("status", "tf1", "-n", "other", "-o", "json").stdout
    wide = cli("status", f"pytorchjob/{LONG_NAME}", "-n", "team1", "-o", "wide").stdout
    replica_header = next(line for line in wide.splitlines() if line.startswith("REPLICA"))
    assert replica_header.split()[-3:] == ["IMAGE", "STARTED", "FINISHED"]
    assert f"{LONG_NAME}-master-0" in wide
    assert_one_line_error(cli("status", "pytorchjob/tf1", "-n", "other"), '"tf1" is a TFJob')
    assert_one_line_error(cli("status", "pytorchjo/tf1", "-n", "other"), "did you mean pytorch?")
    assert_one_line_error(cli("status", "tfjob/", "-n", "other"), "write NAME or KIND/NAME")


def test_on_a_terminal_the_name_is_never_cut(cli, jobs):
    import os
    import pty
    import subprocess
    import sys

    primary, secondary = pty.openpty()
    env = {**cli.env, "COLUMNS": "60", "TERM": "xterm"}
    process = subprocess.run([sys.executable, "-m", "trainctl", "list", "-A"], stdout=secondary, stderr=subprocess.PIPE,
                             env=env, cwd=cli.cwd, timeout=60)
    os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(primary)
    assert process.returncode == 0
    assert LONG_NAME in output.decode()  # whole, on one line, although the terminal is 60 columns wide


@pytest.mark.parametrize("args", [["list", "-o", "xml"], ["status", "x", "-o", "table"],
                                  ["submit", "pytorch", "--dry-run", "-o", "wide", "--", "x"],
                                  ["apply", "-f", "-", "-o", "name"], ["crds", "print", "-o", "wide"]])
def test_output_forms_only_where_they_mean_something(cli, args):
    assert_one_line_error(cli(*args, input=""), "unknown output format")


def test_set_based_selectors_on_the_local_backend(cli, jobs):
    def selected(selector):
        return sorted(line.rsplit("/", 1)[1] for line in cli("list", "-A", "-l", selector, "-o", "name").stdout.split())

    assert selected("team in (nlp, cv)") == sorted([LONG_NAME, "tf1"])
    assert selected("team notin (nlp)") == ["tf1"]
    assert selected("team==nlp,tier") == [LONG_NAME]
    assert selected("!tier") == []
    assert selected("team!=cv") == [LONG_NAME]
    for command in (["list"], ["delete", "--all"]):
        assert_one_line_error(cli(*command, "-l", "team in nlp"), "-l/--selector 'team in nlp'")
    assert len(cli("list", "-A", "-o", "name").stdout.split()) == 2  # the bad delete removed nothing


def test_list_of_a_namespace_without_jobs_says_which_namespaces_have_them(cli, jobs):
    """Upstream YAML often names its own namespace: a plain list must not end the search with "no jobs"."""
    def listed(*args):
        result = cli("list", *args)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert listed() == "no jobs in namespace default (local); 1 in other, 1 in team1: use -n NAMESPACE or -A"
    assert listed("-l", "team=cv") == "no jobs in namespace default (local); 1 in other: use -n other or -A"
    assert listed("-n", "nothing-here", "-l", "team=none") == "no jobs in namespace nothing-here (local)"
    assert listed("-A", "-l", "team=none") == "no jobs (local)"


def test_list_watch_prints_changes_until_ctrl_c(cli, jobs):
    import signal

    watcher = cli.popen("list", "-A", "-w")
    printed = OutputLines(watcher)
    printed.wait_for("tf1")
    assert cli("delete", "tf1", "-n", "other").returncode == 0
    deleted = printed.wait_for("Deleted")
    watcher.send_signal(signal.SIGINT)
    assert watcher.wait(timeout=30) == 0
    assert "Traceback" not in watcher.stderr.read()
    assert printed.lines[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert deleted.split()[:4] == ["other", "tf1", "TFJob", "Deleted"]


def test_submit_prints_the_created_job_with_o_and_hints_that_fit(cli):
    import yaml

    result = cli("submit", "jax", "--name", "created", "-n", "ns1", "-o", "yaml", *SLEEP)
    try:
        assert result.returncode == 0, result.stderr
        stored = yaml.safe_load(result.stdout)
        assert stored["metadata"]["namespace"] == "ns1" and stored["metadata"]["uid"]  # as stored, not as rendered
        hints = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("trainctl ")]
        assert hints == ["trainctl logs -f created -n ns1", "trainctl status created -n ns1",
                         "trainctl wait created -n ns1"]
        assert all(len(line) <= 80 for line in result.stderr.splitlines() if "note:" not in line and "image" not in line)
    finally:
        cli("delete", "created", "-n", "ns1")


@pytest.mark.parametrize("args, expected", [
    (["python", "train.py", "--epochs", "3"], "No such option: --epochs; if --epochs is an option of the job's command, "
                                              "put -- before the command"),
    (["python", "train.py"], "the job's command goes after --"),
])
def test_a_missing_double_dash_is_explained(cli, args, expected):
    assert_one_line_error(cli("submit", "pytorch", "--dry-run", *args), expected)
