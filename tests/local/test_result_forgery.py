"""What job.result() trusts, on the local backend: every forging route of issue 22 ends without running code.

Each route plants a pickle whose loading would create a marker file (``os.system('touch ...')``): a job
applied with its own result annotations, a worker printing rank 0's line, and a finished job's job.json
and log rewritten by someone running as the same user. ``result()`` must refuse in one line (or return
rank 0's own data), and the marker must never appear. Only ``allow_pickle=True`` loads a pickle.
"""

from __future__ import annotations

import base64
import importlib
import io
import json
import os
import pickle
import re
import secrets
import tarfile

import pytest

from tests.local import function_jobs
from trainctl.errors import UserError
from trainctl.functions.runner import MARKER, PICKLE_MARKER

pytestmark = pytest.mark.timeout(120)


class Planted:
    """Unpickling this runs ``touch <marker>``: what a forged result would do to the caller."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def planted_lines(marker) -> list[str]:
    payload = pickle.dumps(Planted(str(marker)), protocol=4)
    encoded = base64.b64encode(payload).decode()
    return [f"trainctl-result:v1 {'0' * 64} {encoded}",  # the old signed format: never read again
            f"{PICKLE_MARKER} {encoded}",
            f'{MARKER} {{"$pickle": "{encoded}"}}']


def printing(lines: list[str]) -> list[str]:
    return ["python3", "-c", "import sys; print(sys.argv[1], flush=True)", "\n".join(lines)]


def applied_job(name: str, command: list[str]) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "annotations": {"trainctl.io/function": "x:train",
                                                       "trainctl.io/result-key": "11" * 32}},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "Never", "template": {
                "spec": {"containers": [{"name": "pytorch", "image": "python", "command": command}]}}}}}}


def test_a_job_applied_with_its_own_result_key_never_runs_its_line(client, tmp_path):
    marker = tmp_path / "ran"
    for index, line in enumerate(planted_lines(marker)):
        client.submit(applied_job(f"forged-{index}", printing([line])))
        job = client.job(f"forged-{index}")
        with pytest.raises(UserError) as refused:
            job.result(timeout=60)
        assert "\n" not in refused.value.message
        assert not marker.exists(), line[:40]


def test_a_pickled_line_loads_only_with_allow_pickle(client, tmp_path):
    marker = tmp_path / "ran"
    client.submit(applied_job("opted-in", printing([planted_lines(marker)[1]])))
    with pytest.raises(UserError, match=r"allow_pickle=True"):
        client.job("opted-in").result(timeout=60)
    assert not marker.exists()
    client.job("opted-in").result(allow_pickle=True)  # the documented trust: the caller's own choice
    assert marker.exists()


def test_a_worker_printing_rank_zeros_line_never_runs_code(client, tmp_path):
    marker = tmp_path / "ran"
    job = client.run(function_jobs.forging_worker, args={"lines": planted_lines(marker)}, workers=2,
                     name="worker-forges", backoff_limit=0)
    try:
        value = job.result(timeout=90)
    except UserError as refused:  # the worker's line came first: refused, in one line
        assert "\n" not in refused.message
    else:
        assert value == {"rank": 0}
    assert not marker.exists()


def test_a_rewritten_job_json_and_log_line_never_run_code(client, cli, tmp_path):
    marker = tmp_path / "ran"
    job = client.run(function_jobs.forging_worker, args={"lines": []}, name="rewritten", backoff_limit=0)
    assert job.result(timeout=90) == {"rank": 0}
    [stored] = [path for path in cli.home.rglob("job.json") if path.parent.name == "rewritten"]
    text = stored.read_text().replace('"trainctl.io/function"', '"trainctl.io/result-key": "' + "22" * 32
                                      + '", "trainctl.io/function"')
    stored.write_text(text)
    log = stored.parent / "logs" / "master-0.log"
    for line in planted_lines(marker):
        log.write_text(line + "\n")
        with pytest.raises(UserError, match="pickle|does not decode|no replica's log") as refused:
            job.result(timeout=30)
        assert "\n" not in refused.value.message
        assert not marker.exists(), line[:40]


SHIPPED_MODULE = '''\
def train(lr, steps):
    return {"lr": lr, "steps": steps}
'''
# What key material looks like in a file: a name that says so, 128 bits or more in hex, or 30 bytes or more in
# base64 (the old result key was 64 hex digits in call.json and in the job's trainctl.io/result-key annotation)
KEY_LIKE = re.compile(rb"(?i)result[-_]?key|hmac|private[ _]key|\b[0-9a-f]{32,}\b|[A-Za-z0-9+/_-]{40,}={0,2}")


def key_like(data: bytes) -> set[bytes]:
    """What :data:`KEY_LIKE` finds, less long words and paths: random base64 mixes digits, upper and lower case."""
    found = set()
    for match in KEY_LIKE.finditer(data):
        text = match.group(0)
        if len(text) < 40 or all(re.search(letters, text) for letters in (rb"[0-9]", rb"[A-Z]", rb"[a-z]")):
            found.add(text[:80])
    return found


@pytest.mark.parametrize("pickle_result", [False, True], ids=["data result", "pickled result"])
def test_a_function_jobs_snapshot_and_job_hold_no_key_material(tmp_path, monkeypatch, pickle_result):
    """Every file a function job ships to a cluster, as the dry run renders it (its ConfigMaps, unpacked: call.json,
    the runner, the pickles, the stand-in package, the project's files) and the job itself: nothing in them could
    sign or check a result, so whoever may read ConfigMaps or jobs in the namespace learns no key."""
    from trainctl.cli.submit import dry_run_documents
    from trainctl.sdk import running
    from trainctl.sdk.client import Client

    assert key_like(json.dumps({"result_key": secrets.token_hex(32)}).encode())  # it finds the old leak
    assert key_like(json.dumps({"k": base64.b64encode(bytes(range(32))).decode()}).encode())
    project = tmp_path / "project"
    project.mkdir()
    (project / "shipped_module.py").write_text(SHIPPED_MODULE)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    train = importlib.import_module("shipped_module").train
    client = Client("kubernetes", kubeconfig=str(tmp_path / "no-such-kubeconfig"))
    # run(dry_run=True) returns planned()'s resource; the ConfigMaps come with the code it plans
    resource, code, _ = running.planned(client, train, "pytorch", {"lr": 0.1, "steps": 3},
                                        {"workers": 2, "name": "fn"}, pickle_result=pickle_result)
    *maps, job = dry_run_documents(resource, code)
    archive = b"".join(base64.b64decode(config_map["binaryData"]["chunk"]) for config_map in maps)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        shipped = {member.name: tar.extractfile(member).read() for member in tar.getmembers()}
    function = ".trainctl/function/"
    assert set(shipped) == {"shipped_module.py", *(function + name for name in (
        "trainctl_function.py", "call.json", "globals.pickle", "args.pickle")),
        ".trainctl/lib/trainctl/__init__.py", ".trainctl/lib/trainctl/reporting.py",
        ".trainctl/lib/trainctl/checkpoints.py"}
    call = json.loads(shipped[function + "call.json"])
    assert set(call) == {"kind", "launch", "module", "qualname", "filename", "source", "imports", "pickle_result",
                         "submission", "package"}
    assert call["pickle_result"] is pickle_result and re.fullmatch("[0-9a-f]{16}", call["submission"])
    public = {code.snapshot.hex.encode()}  # the archive's sha256 names its content: no secret
    for name, data in [*shipped.items(), ("the job", json.dumps(job).encode())]:
        found = key_like(data) - public
        assert not found, (name, found)
