"""A job that ships code (snapshot, init container, volumes, --pip wrapper) is still a valid
kubeflow.org/v1 resource for all six kinds: checked against the upstream operator's CRD schema."""

import pytest

from tests.compat.test_upstream import upstream_validator
from trainctl.frameworks import ALL
from trainctl.submit.code_plan import request
from trainctl.submit.options import SubmitOptions
from trainctl.submit.render import render


@pytest.mark.parametrize("framework", ALL, ids=[fw.kind for fw in ALL])
def test_every_kind_with_a_snapshot_satisfies_the_upstream_crd(upstream, framework, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "requirements.txt").write_text("einops\n")
    schema = upstream_validator(upstream, framework)
    packages = {} if framework.kind == "MPIJob" else {"pip": ["numpy==2.1"],
                                                      "requirements": str(tmp_path / "requirements.txt")}
    for extra in ({}, {"workdir_mount": "/code", "volume": ["pvc:data:/data"], "shm_size": "1Gi", **packages}):
        options = SubmitOptions(command=["python", "train.py"], name="job", workers=2, workdir=str(tmp_path), **extra)
        resource = render(framework, options, request(options, "kubernetes", framework.kind))
        schema.validate(resource)
        for spec in resource["spec"][framework.replica_spec_field].values():
            pod = spec["template"]["spec"]
            assert [c["name"] for c in pod["initContainers"]] == ["trainctl-code"]
            assert {"trainctl-code-chunks", "trainctl-workspace"} <= {v["name"] for v in pod["volumes"]}
