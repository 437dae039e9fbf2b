"""submit --dry-run renders the right resource for every kind."""

import json
import subprocess
import sys
import zipfile

import pytest
import yaml

from trainctl.frameworks import ALL, by_name
from trainctl.submit.options import SubmitOptions
from trainctl.submit.render import render
from tests.conftest import REPO


def dry_run(cli, *args):
    """The job as the local backend would create it here: a dry run makes the submit's checks, so the script
    exists and the machine offers the GPUs asked for."""
    (cli.cwd / "train.py").write_text("")
    cli.env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3,4,5,6,7"
    result = cli("submit", *args, "--dry-run", "-o", "json", "--name", "job", "--", "python", "train.py")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def containers(resource, field, rtype):
    return resource["spec"][field][rtype]["template"]["spec"]["containers"]


def test_pytorch_four_workers_one_gpu(cli):
    job = dry_run(cli, "pytorch", "--workers", "4", "--gpus", "1")
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert job["kind"] == "PyTorchJob" and job["apiVersion"] == "kubeflow.org/v1"
    assert {t: s["replicas"] for t, s in specs.items()} == {"Master": 1, "Worker": 3}
    for rtype in specs:
        (container,) = containers(job, "pytorchReplicaSpecs", rtype)
        assert container["name"] == "pytorch"
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
        assert container["command"] == ["python", "train.py"]


@pytest.mark.parametrize("kind, args, expected, container, port", [
    ("tf", ["--workers", "3", "--ps", "1", "--chief", "1"], {"Chief": 1, "PS": 1, "Worker": 3}, "tensorflow", ("tfjob-port", 2222)),
    ("xgboost", ["--workers", "3"], {"Master": 1, "Worker": 2}, "xgboost", ("xgboostjob-port", 9999)),
    ("mpi", ["--workers", "2", "--slots-per-worker", "2"], {"Launcher": 1, "Worker": 2}, "mpi", None),
    ("paddle", ["--workers", "3"], {"Worker": 3}, "paddle", ("master", 36543)),
    ("jax", ["--workers", "2"], {"Worker": 2}, "jax", ("jaxjob-port", 6666)),
])
def test_every_kind_topology_container_and_port(cli, kind, args, expected, container, port):
    framework = by_name(kind)
    job = dry_run(cli, kind, *args, "--gpus", "1")
    specs = job["spec"][framework.replica_spec_field]
    assert job["kind"] == framework.kind
    assert {t: s["replicas"] for t, s in specs.items()} == expected
    for rtype in specs:
        (rendered,) = containers(job, framework.replica_spec_field, rtype)
        assert rendered["name"] == container
        expected_ports = [{"name": port[0], "containerPort": port[1]}] if port else None
        assert rendered.get("ports") == expected_ports
        launcher = kind == "mpi" and rtype == "Launcher"
        assert rendered.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") == (None if launcher else 1)


def test_mpi_launcher_runs_mpirun_with_all_slots_and_workers_idle(cli):
    job = dry_run(cli, "mpi", "--workers", "2", "--slots-per-worker", "3")
    (launcher,) = containers(job, "mpiReplicaSpecs", "Launcher")
    (worker,) = containers(job, "mpiReplicaSpecs", "Worker")
    assert launcher["command"][:4] == ["mpirun", "--allow-run-as-root", "-np", "6"]
    assert launcher["command"][-2:] == ["python", "train.py"]
    assert "command" not in worker
    assert job["spec"]["slotsPerWorker"] == 3


def test_every_option_lands_where_documented(cli, tmp_path):
    job = dry_run(cli, "pytorch", "--no-preflight",  # a PVC exists only on a cluster
                  "--workers", "2", "-n", "team", "--image", "me/img:1", "--cpu", "2", "--memory", "4Gi",
                  "-e", "A=1", "--label", "team=nlp", "--annotation", "note=hi there", "--volume", "pvc:data:/data:ro",
                  "--volume", "host:/scratch:/scratch", "--shm-size", "1Gi", "--node-selector", "gpu=a100",
                  "--toleration", "dedicated=ml:NoSchedule", "--priority-class", "high", "--queue", "q1", "--gang",
                  "--restart-policy", "exitcode", "--backoff-limit", "3", "--active-deadline", "600",
                  "--ttl-after-finished", "60", "--clean-pod-policy", "running", "--suspend", "--nproc-per-node", "2",
                  "--set", "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image=other:2")
    assert job["metadata"] == {"name": "job", "namespace": "team", "labels": {"team": "nlp"},
                               "annotations": {"note": "hi there"}}
    assert job["spec"]["runPolicy"] == {
        "cleanPodPolicy": "Running", "backoffLimit": 3, "activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": 60,
        "suspend": True, "schedulingPolicy": {"queue": "q1", "priorityClass": "high", "minAvailable": 2}}
    assert job["spec"]["nprocPerNode"] == "2"
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]
    assert master["restartPolicy"] == "ExitCode"
    pod = master["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "me/img:1"
    assert container["env"] == [{"name": "A", "value": "1"}]
    assert container["resources"] == {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "2", "memory": "4Gi"}}
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/data", "/scratch", "/dev/shm"}
    assert {"name": "volume-0", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}} in pod["volumes"]
    assert pod["nodeSelector"] == {"gpu": "a100"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Equal", "effect": "NoSchedule", "value": "ml"}]
    assert pod["priorityClassName"] == "high"
    assert master["template"]["metadata"]["labels"] == {"team": "nlp"}
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["image"] == "other:2"


def test_values_file_fills_options_and_flags_win(cli, tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text("workers: 3\nenv: {A: from-file}\nimage: file/img\n")
    job = dry_run(cli, "xgboost", "-f", str(values), "--image", "flag/img")
    master = job["spec"]["xgbReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert job["spec"]["xgbReplicaSpecs"]["Worker"]["replicas"] == 2
    assert master["image"] == "flag/img" and master["env"] == [{"name": "A", "value": "from-file"}]


def test_generated_names_are_dns_1035_and_distinct():
    names = {render(by_name("tf"), SubmitOptions(command=["x"]))["metadata"]["name"] for _ in range(20)}
    assert len(names) == 20 and all(n.startswith("tensorflow-") and len(n) == 17 for n in names)


def test_project_template_overrides_builtin(cli):
    override = cli.cwd / ".trainctl" / "templates"
    override.mkdir(parents=True)
    builtin = (REPO / "templates" / "jaxjob.yaml.j2").read_text()
    (override / "jaxjob.yaml.j2").write_text(builtin.replace("{%- extends", "{#- team copy -#}\n{%- extends"))
    (override / "_job.yaml.j2").write_text((REPO / "templates" / "_job.yaml.j2").read_text().replace(
        "metadata:\n  name: {{ name }}", "metadata:\n  name: {{ name }}\n  labels: {\"owner\": \"platform\"}"))
    listing = cli("templates", "list")
    assert "project" in listing.stdout
    job = dry_run(cli, "jax")
    assert job["metadata"]["labels"] == {"owner": "platform"}


def test_templates_show_prints_the_winning_file(cli):
    result = cli("templates", "show", "pytorch")
    assert result.returncode == 0 and 'extends "_job.yaml.j2"' in result.stdout


def test_wheel_ships_templates_and_schemas_and_runs_from_a_plain_install(tmp_path):
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(wheel_dir), str(REPO)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheel_dir.glob("trainctl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "trainctl/_templates/pytorchjob.yaml.j2" in names
    assert "trainctl/schemas/podtemplatespec.json" in names
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    (tmp_path / "train.py").write_text("")  # what the dry run checks locally: the script, and 4 GPUs on offer
    result = subprocess.run([sys.executable, "-m", "trainctl", "submit", "pytorch", "--workers", "4", "--gpus", "1",
                             "--dry-run", "--", sys.executable, "train.py"], cwd=tmp_path, capture_output=True,
                            text=True, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                            "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert result.returncode == 0, result.stderr
    job = yaml.safe_load(result.stdout)
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3


def test_every_package_directory_is_listed_in_pyproject():
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "trainctl").rglob("__init__.py")}
    assert found <= listed, f"add to pyproject.toml packages: {sorted(found - listed)}"


def test_every_framework_has_a_template():
    for framework in ALL:
        assert (REPO / "templates" / f"{framework.singular}.yaml.j2").is_file()


def test_example_job_files_are_valid_and_run_their_script():
    from trainctl.core.validation import validate

    for path in sorted((REPO / "examples").glob("*/job.yaml")):
        job = validate(yaml.safe_load(path.read_text()), source=str(path))
        framework = by_name(job["kind"])
        commands = [spec["template"]["spec"]["containers"][0].get("command") or []
                    for spec in job["spec"][framework.replica_spec_field].values()]
        assert any(f"examples/{path.parent.name}/" in " ".join(c) for c in commands), path
