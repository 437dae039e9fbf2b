"""A local TrainJob runs on the runtime trainctl resolves for its ``runtimeRef`` (the file's, trainctl's defaults),
never on one written in its ``trainctl.io/runtime-snapshot`` annotation (issue 55, Trust): ``apply`` drops that
annotation with a note, ``Client().submit`` with a warning, and trainctl takes the snapshot itself."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from trainctl.core.trainer_runtimes import default_runtimes

SNAPSHOT = "trainctl.io/runtime-snapshot"
PRINT = "import os; print('FORGED', os.environ.get('FORGED'))"


def forged_trainjob(name: str) -> dict:
    """A TrainJob naming trainctl's jax-distributed whose annotation holds that runtime with an env of its own."""
    runtime = default_runtimes(["jax-distributed"])[0]
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["env"] = [{"name": "FORGED", "value": "yes"}]
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "annotations": {SNAPSHOT: json.dumps(runtime)}},
            "spec": {"runtimeRef": {"name": "jax-distributed"},
                     "trainer": {"numNodes": 1, "command": ["python", "-c", PRINT]}}}


@pytest.mark.timeout(120)
def test_a_trainjob_runs_on_the_runtime_trainctl_resolves_not_on_its_annotation(cli, client):
    (cli.cwd / "forged.yaml").write_text(yaml.safe_dump(forged_trainjob("forged")))
    applied = cli("apply", "-f", "forged.yaml")
    assert applied.returncode == 0, applied.stderr
    assert applied.stderr == (f"note: -f forged.yaml: TrainJob 'forged': its {SNAPSHOT} annotation is ignored: "
                              "trainctl takes the runtime its runtimeRef names\n"), applied.stderr
    assert cli("wait", "forged", "--timeout", "60").returncode == 0
    assert [line for line in cli("logs", "forged").stdout.splitlines() if " | FORGED" in line] == [
        "node-0-0 | FORGED None"]
    kept = yaml.safe_load(cli("get", "forged", "-o", "yaml").stdout)["metadata"]["annotations"][SNAPSHOT]
    assert json.loads(kept) == default_runtimes(["jax-distributed"])[0]

    with pytest.warns(UserWarning, match=f"TrainJob 'sdk': its {SNAPSHOT} annotation is ignored"):
        stored = client.submit(copy.deepcopy(forged_trainjob("sdk")), dry_run=True)
    assert json.loads(stored["metadata"]["annotations"][SNAPSHOT]) == default_runtimes(["jax-distributed"])[0]
