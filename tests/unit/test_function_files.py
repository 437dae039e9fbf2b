"""trainctl.functions.shipping.remove_placed: a deleted local job takes its function files along, and nothing else."""

from __future__ import annotations

import pytest

from trainctl.functions.shipping import RUNNER_FILE, remove_placed


def job(*commands: list[str]) -> dict:
    return {"spec": {"jaxReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
        {"command": command} for command in commands]}}}}}}


def test_only_the_runner_directory_directly_under_the_root_goes(tmp_path):
    root, outside = tmp_path / "functions", tmp_path / "elsewhere"
    for directory in (root / "abc", root / "keep", outside):
        directory.mkdir(parents=True)
        (directory / RUNNER_FILE).write_text("")
    remove_placed(job(["python", str(root / "abc" / RUNNER_FILE)],
                      ["python", str(outside / RUNNER_FILE)],  # not under the root
                      ["python", str(root / "keep" / ".." / ".." / "elsewhere" / RUNNER_FILE)],
                      ["python", "relative/" + RUNNER_FILE]), root)
    assert sorted(path.name for path in root.iterdir()) == ["keep"]
    assert (outside / RUNNER_FILE).exists()


@pytest.mark.parametrize("resource", [None, [], {"spec": None}, {"spec": {"jaxReplicaSpecs": []}},
                                      {"spec": {"jaxReplicaSpecs": {"Worker": {"template": {"spec": {
                                          "containers": [None, {"command": "python x"}, {"command": [1, None]}]}}}}}}])
def test_a_damaged_resource_removes_nothing_and_raises_nothing(tmp_path, resource):
    (tmp_path / "abc").mkdir()
    remove_placed(resource, tmp_path)
    assert (tmp_path / "abc").is_dir()
