"""``--checkpoints host:PATH`` checked as what it is, not only as it is spelled (issue 54, class 4): a path holding a
character that does not print, a node's scheduled-job spools, and, on the local backend where the node is this
machine, a path whose symbolic links lead into a system directory, are refused in one line before anything exists.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.unit.test_bad_input import assert_one_line_error
from trainctl.core import checkpoint_volume
from trainctl.core.checkpoint_volume import local_directory, local_problem, problem


def job(checkpoints: str, namespace: str = "default") -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "ckpt", "namespace": namespace, "annotations": {checkpoint_volume.ANNOTATION:
                                                                                  checkpoints}}}


@pytest.mark.parametrize("path, shown, position", [
    ("/mnt/a\nb", "'\\n'", 7),
    ("/mnt/\x1b[31mred", "'\\x1b'", 6),
    ("/mnt/\u202eevil", "'\\u202e'", 6),  # a bidirectional override reverses what follows
    ("/mnt/a\x7f", "'\\x7f'", 7),
    ("/mnt/a\x00", "'\\x00'", 7),
    ("/mnt/a\u2028b", "'\\u2028'", 7),
    ("/mnt/a\udcffb", "'\\udcff'", 7),  # a byte that was not UTF-8
])
def test_a_host_path_with_a_character_that_does_not_print_is_refused(path, shown, position):
    assert problem(f"host:{path}") == (f"the host path holds {shown} (character {position}), which does not print: "
                                       "name a directory without control or invisible characters")


@pytest.mark.parametrize("path", ["/var/spool/cron", "/var/spool", "/var/spool/cron/crontabs", "/var/mail",
                                  "/var/lock", "/var/lib/containers/storage", "/var/lib/dpkg", "/snap"])
def test_the_nodes_spools_and_package_records_are_system_directories(path):
    assert "a system directory of the node" in problem(f"host:{path}")


@pytest.mark.parametrize("path", ["/mnt/a b", "/srv/ckpt", "/var/tmp/c", "/var/lib/mine", "/home/me/é"])
def test_printable_paths_of_ones_own_are_fine(path):
    assert problem(f"host:{path}") is None


def test_a_symbolic_link_into_etc_is_refused_locally_as_etc(tmp_path):
    (tmp_path / "link").symlink_to("/etc")
    issue = local_problem(job(f"host:{tmp_path}/link"))
    assert issue.startswith(f"the job's directory {tmp_path}/link/default/ckpt leads to /etc/default/ckpt through a "
                            "symbolic link, and /etc/default/ckpt is in /etc, a system directory")
    assert problem(f"host:{tmp_path}/link") is None  # as written it is fine: a cluster node's links are unknown here


@pytest.mark.parametrize("make", [
    lambda root: (root / "ckpt").mkdir() or (root / "ckpt" / "default").symlink_to("/var/spool"),  # the namespace
    lambda root: (root / "ckpt").symlink_to("/"),  # leads to /default/ckpt: clear, so not refused (below)
    lambda root: (root / "ckpt").symlink_to(root / "hop") or (root / "hop").symlink_to("/proc"),  # two hops
])
def test_a_link_anywhere_in_the_job_directory_is_followed(tmp_path, make):
    make(tmp_path)
    spelled = f"{tmp_path}/ckpt/default/ckpt"
    real = os.path.realpath(spelled)
    issue = local_problem(job(f"host:{tmp_path}/ckpt"))
    assert (issue is None) == (checkpoint_volume.system_problem(real) is None)
    state_dir = str(tmp_path / "state")
    assert local_directory(job(f"host:{tmp_path}/ckpt"), state_dir) == (real if issue is None else
                                                                        f"{state_dir}/checkpoints")


def test_a_link_made_after_submit_leaves_the_replicas_in_the_jobs_own_directory(tmp_path):
    (tmp_path / "ckpt").mkdir()
    resource = job(f"host:{tmp_path}/ckpt")
    assert local_directory(resource, "/state") == f"{tmp_path}/ckpt/default/ckpt"
    (tmp_path / "ckpt" / "default").symlink_to("/etc")
    assert local_directory(resource, "/state") == "/state/checkpoints"


def test_submit_refuses_a_link_into_etc_in_one_line_and_creates_nothing(cli):
    (cli.cwd / "link").symlink_to("/etc")
    (cli.cwd / "t.py").write_text("pass\n")
    result = cli("submit", "pytorch", "--name", "ckpt", "--checkpoints", f"host:{cli.cwd}/link", "--", "python", "t.py")
    assert_one_line_error(result, f"--checkpoints (annotation trainctl.io/checkpoints) 'host:{cli.cwd}/link': the "
                                  f"job's directory {cli.cwd}/link/default/ckpt leads to /etc/default/ckpt")
    assert cli("list").stdout.startswith("no jobs") and not os.path.exists("/etc/default/ckpt")


def test_apply_refuses_a_host_path_spelled_with_an_escape(cli):
    resource = job("host:/mnt/\x1b]0;pwned\x07")
    resource["spec"] = {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "img", "command": ["python", "-c", "pass"]}]}}}}}
    result = cli("apply", "-f", "-", "--dry-run", input=json.dumps(resource))
    assert_one_line_error(result, "the host path holds '\\x1b' (character 6), which does not print")
