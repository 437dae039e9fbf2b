"""``trainctl convert | trainctl apply -f -`` runs locally what the v1 original runs (docs/trainer-v2.md, "Converting
between v1 and v2"): the usual MPIJob, its Workers naming no command (their image serves sshd), becomes a TrainJob
whose one launcher runs the mpirun once, over nodes that idle here as the v1 Workers do."""

from __future__ import annotations

import shutil

import pytest
import yaml

# every rank appends one line to the file: a second mpirun (a second launcher) would append them all again
RANK = '''
import os
with open("ranks.txt", "a") as ranks:
    ranks.write(f"{os.environ['OMPI_COMM_WORLD_RANK']} of {os.environ['OMPI_COMM_WORLD_SIZE']}\\n")
'''


def usual_mpijob(workers: int) -> dict:
    """An MPIJob as upstream's examples write them: MPI's defaults (restartPolicy Never), Workers with no command."""
    def template(name: str, **container) -> dict:
        return {"spec": {"containers": [{"name": name, "image": "mpioperator/openmpi:0.6.0", **container}]}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {"name": "pi"},
            "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template(
                    "launcher", command=["mpirun", "-n", str(workers), "python", "rank.py"])},
                "Worker": {"replicas": workers, "template": template("worker")}}}}


@pytest.mark.timeout(150)
@pytest.mark.parametrize("workers", [2, 4])
def test_a_converted_mpijob_of_n_workers_runs_its_mpirun_once(cli, workers):
    if shutil.which("mpirun", path=cli.env["PATH"]) is None:
        pytest.skip("no mpirun here (pip install -r requirements/frameworks.txt)")
    (cli.cwd / "rank.py").write_text(RANK)
    (cli.cwd / "mpijob.yaml").write_text(yaml.safe_dump(usual_mpijob(workers)))
    converted = cli("convert", "-f", "mpijob.yaml", "--to", "v2", "--allow-lossy")
    assert converted.returncode == 0, converted.stderr
    applied = cli("apply", "-f", "-", input=converted.stdout)
    assert applied.returncode == 0 and "applied trainjob/pi" in applied.stdout, applied.stderr
    waited = cli("wait", "pi", "--timeout", "120", timeout=140)
    assert waited.returncode == 0, waited.stdout + waited.stderr + cli("logs", "pi").stdout
    assert sorted((cli.cwd / "ranks.txt").read_text().splitlines()) == [f"{rank} of {workers}"
                                                                       for rank in range(workers)]
    status = cli("status", "pi").stdout
    assert status.count("pi-launcher-") == 1 and "pi-launcher-0-0   Succeeded" in status, status
    assert all(f"pi-node-0-{index}" in status for index in range(workers)), status
