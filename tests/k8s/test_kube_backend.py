"""Every CLI command against the real API server, with pods driven by the node fixture.

No operator runs here (that is the controller's issue), so a test plays it: it creates the
pods the reconcile core asks for and writes job status, and the node fixture plays kubelet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone

import pytest
import yaml

from tests.conftest import REPO
from trainctl.core.actions import CreateReplica
from trainctl.core.network import ClusterNetwork
from trainctl.core.reconcile import reconcile
from trainctl.frameworks import ALL

pytestmark = pytest.mark.k8s


class KubeCLI:
    def __init__(self, kubeconfig, namespace):
        self.namespace = namespace
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "COLUMNS": "200", "PYTHONPATH": str(REPO)}
        self.env.pop("TRAINCTL_BACKEND", None)

    def __call__(self, *args, input=None, timeout=60):
        return subprocess.run([sys.executable, "-m", "trainctl", *args], env=self.env, capture_output=True,
                              text=True, input=input, timeout=timeout, cwd=REPO)

    def popen(self, *args):
        return subprocess.Popen([sys.executable, "-m", "trainctl", *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO)


@pytest.fixture
def kube(k8s_cluster, kubeflow_crds, namespace):
    return KubeCLI(k8s_cluster.kubeconfig("admin"), namespace)


def dry_run(kube, kind, name, *args):
    # --no-workdir: the job alone (with a snapshot of the repository, which others edit meanwhile, it would
    # come after ConfigMaps in a List; tests/k8s/test_code_shipping.py covers that)
    result = kube("submit", kind, "--name", name, "-n", kube.namespace, *args, "--no-workdir", "--dry-run", "-o",
                  "json", "--", "python", "train.py")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def play_operator(k8s_cluster, kube, name, kind_plural):
    """Create the pods the core asks for, as the operator would; returns their names."""
    from kubernetes import client

    custom = client.CustomObjectsApi(k8s_cluster.api_client())
    core = client.CoreV1Api(k8s_cluster.api_client())
    job = custom.get_namespaced_custom_object("kubeflow.org", "v1", kube.namespace, kind_plural, name)
    plan = reconcile(job, [], datetime.now(timezone.utc), ClusterNetwork())
    pods = []
    for action in plan.actions:
        if isinstance(action, CreateReplica):
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {**action.pod.get("metadata", {}), "name": action.name},
                   "spec": {**action.pod["spec"], "automountServiceAccountToken": False}}
            core.create_namespaced_pod(kube.namespace, pod)
            pods.append(action.name)
    return pods


def set_job_condition(k8s_cluster, kube, name, plural, ctype):
    from kubernetes import client

    custom = client.CustomObjectsApi(k8s_cluster.api_client())
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": ctype, "status": "True", "reason": f"Job{ctype}", "message": f"job is {ctype.lower()}",
                 "lastUpdateTime": stamp, "lastTransitionTime": stamp}
    custom.patch_namespaced_custom_object_status("kubeflow.org", "v1", kube.namespace, plural, name,
                                                  {"status": {"conditions": [condition]}})


@pytest.mark.parametrize("framework", ALL, ids=[f.kind for f in ALL])
def test_submit_stores_exactly_what_dry_run_prints(kube, framework):
    name = f"{framework.name}-stored"
    expected = dry_run(kube, framework.name, name, "--workers", "2")
    result = kube("submit", framework.name, "--name", name, "-n", kube.namespace, "--workers", "2", "--no-workdir",
                  "--", "python", "train.py")
    assert result.returncode == 0, result.stderr
    assert "kubernetes (context test)" in result.stdout
    stored = json.loads(kube("status", name, "-n", kube.namespace, "-o", "json").stdout)
    assert stored["spec"] == with_crd_defaults(expected["spec"])
    assert stored["metadata"]["name"] == name


def with_crd_defaults(spec: dict) -> dict:
    """What the API server stores for ``spec``: the CRD defaults runPolicy.suspend to false (as upstream's
    does) once runPolicy is there, and submit always writes runPolicy.backoffLimit."""
    if "runPolicy" in spec:
        spec = {**spec, "runPolicy": {"suspend": False, **spec["runPolicy"]}}
    return spec


def test_apply_of_every_kind_stores_each_document(kube):
    documents = [dry_run(kube, framework.name, f"every-{framework.name}", "--workers", "2") for framework in ALL]
    result = kube("apply", "-f", "-", input="---\n".join(yaml.safe_dump(d) for d in documents))
    assert result.returncode == 0, result.stderr
    for document in documents:
        name = document["metadata"]["name"]
        stored = json.loads(kube("status", name, "-n", kube.namespace, "-o", "json").stdout)
        assert stored["kind"] == document["kind"] and stored["spec"] == with_crd_defaults(document["spec"])


def test_delete_all_with_a_selector(kube):
    for name, team in (("da-1", "a"), ("da-2", "a"), ("da-3", "b")):
        assert kube("submit", "jax", "--name", name, "-n", kube.namespace, "--label", f"team={team}", "--",
                    "python", "t.py").returncode == 0
    assert kube("delete", "--all", "-l", "team=a", "-n", kube.namespace).returncode == 0
    remaining = kube("list", "-n", kube.namespace).stdout
    assert "da-3" in remaining and "da-1" not in remaining and "da-2" not in remaining


def test_deleting_several_names_reports_each_failure_and_deletes_the_rest(kube):
    for name in ("dn-1", "dn-2"):
        assert kube("submit", "xgboost", "--name", name, "-n", kube.namespace, "--", "python", "t.py").returncode == 0
    result = kube("delete", "dn-1", "missing", "dn-2", "-n", kube.namespace)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f'error: job "missing" not found in namespace "{kube.namespace}" (kubernetes): see trainctl list']
    assert "deleted dn-1" in result.stdout and "deleted dn-2" in result.stdout
    assert kube("list", "-n", kube.namespace).stdout.startswith("no jobs")


def test_missing_crd_names_crds_install(k8s_cluster, kube):
    from kubernetes import client

    extensions = client.ApiextensionsV1Api(k8s_cluster.api_client())
    extensions.delete_custom_resource_definition("xgboostjobs.kubeflow.org")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            extensions.read_custom_resource_definition("xgboostjobs.kubeflow.org")
            time.sleep(0.3)
        except client.ApiException:
            break
    result = kube("submit", "xgboost", "--name", "nocrd", "-n", kube.namespace, "--", "python", "t.py")
    assert result.returncode == 2 and "trainctl crds install" in result.stderr
    listed = kube("list", "-n", kube.namespace, "-o", "name")  # the six lists go in one round trip: one 404
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    assert kube("crds", "install").returncode == 0
    deadline = time.monotonic() + 30
    while kube("submit", "xgboost", "--name", "nocrd", "-n", kube.namespace, "--", "python", "t.py").returncode:
        assert time.monotonic() < deadline
        time.sleep(0.5)


def test_preflight_checks_a_volcano_queue_when_volcano_is_installed(k8s_cluster, kube):
    from kubernetes import client

    api = k8s_cluster.api_client()
    queue_crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                 "metadata": {"name": "queues.scheduling.volcano.sh"},
                 "spec": {"group": "scheduling.volcano.sh", "scope": "Cluster",
                          "names": {"kind": "Queue", "plural": "queues", "singular": "queue", "listKind": "QueueList"},
                          "versions": [{"name": "v1beta1", "served": True, "storage": True, "schema": {
                              "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    client.ApiextensionsV1Api(api).create_custom_resource_definition(queue_crd)
    try:
        missing = kube("submit", "jax", "--name", "vq", "-n", kube.namespace, "--queue", "research", "--", "python",
                       "t.py")
        assert missing.returncode == 2 and 'Volcano queue "research" does not exist' in missing.stderr
        custom = client.CustomObjectsApi(api)
        deadline = time.monotonic() + 30
        while True:
            try:
                custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"}})
                break
            except client.ApiException:
                assert time.monotonic() < deadline
                time.sleep(0.3)
        ok = kube("submit", "jax", "--name", "vq", "-n", kube.namespace, "--queue", "research", "--", "python", "t.py")
        assert ok.returncode == 0, ok.stderr
    finally:
        client.ApiextensionsV1Api(api).delete_custom_resource_definition("queues.scheduling.volcano.sh")


def test_apply_multi_document_and_replace(kube):
    documents = [dry_run(kube, "jax", "applied-a"), dry_run(kube, "xgboost", "applied-b")]
    text = "---\n".join(yaml.safe_dump(d) for d in documents)
    assert kube("apply", "-f", "-", input=text).returncode == 0
    again = kube("apply", "-f", "-", input=text)
    assert again.returncode == 2 and "already exists" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    assert kube("apply", "-f", "-", "--replace", input=text).returncode == 0
    listing = kube("list", "-n", kube.namespace)
    assert "applied-a" in listing.stdout and "JAXJob" in listing.stdout and "XGBoostJob" in listing.stdout


def test_status_shows_pods_phases_restarts_and_reasons(k8s_cluster, kube_node, kube):
    assert kube("submit", "pytorch", "--name", "st", "-n", kube.namespace, "--workers", "3", "--", "python",
                "t.py").returncode == 0
    pods = play_operator(k8s_cluster, kube, "st", "pytorchjobs")
    assert pods == ["st-master-0", "st-worker-0", "st-worker-1"]
    for pod in pods:
        kube_node.bind(kube.namespace, pod)
    kube_node.set_phase(kube.namespace, "st-master-0", "Running")
    kube_node.restart(kube.namespace, "st-worker-0", exit_code=137, reason="OOMKilled")
    kube_node.set_phase(kube.namespace, "st-worker-1", "Pending", waiting_reason="ImagePullBackOff")
    output = kube("status", "st", "-n", kube.namespace).stdout
    lines = {line.split()[0]: line for line in output.splitlines() if line.strip().startswith("st-")}
    assert "Running" in lines["st-master-0"] and kube_node.name in lines["st-master-0"]
    assert "OOMKilled" in lines["st-worker-0"] and " 1 " in lines["st-worker-0"]
    assert "ImagePullBackOff" in lines["st-worker-1"]
    kube_node.set_phase(kube.namespace, "st-master-0", "Failed", exit_code=3)
    output = kube("status", "st", "-n", kube.namespace).stdout
    master = next(line for line in output.splitlines() if line.strip().startswith("st-master-0"))
    assert "Failed" in master and " 3 " in master


def test_status_reads_the_job_its_pods_events_and_records_once_each(k8s_cluster, kube_node, kube):
    """What status shows (details, then progress from the pods' logs) costs one GET of the job, one round trip for
    its pods and events, and, a replica's pod being gone, one metadata list of the kept records: no second read of
    any, and no GET of a record the list did not name (issue 28: it was 14 requests for a job of 4 pods)."""
    from trainctl.sdk.client import Client

    assert kube("submit", "pytorch", "--name", "once", "-n", kube.namespace, "--workers", "3", "--", "python",
                "t.py").returncode == 0
    pods = play_operator(k8s_cluster, kube, "once", "pytorchjobs")
    set_job_condition(k8s_cluster, kube, "once", "pytorchjobs", "Running")
    kube_node.bind(kube.namespace, pods[0])
    kube_node.set_phase(kube.namespace, pods[0], "Running")
    kube_node.write_log(kube.namespace, pods[0], "pytorch", "step 1\n")
    from kubernetes import client

    client.CoreV1Api(k8s_cluster.api_client()).delete_namespaced_pod(pods[-1], kube.namespace, grace_period_seconds=0)
    sdk = Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))
    details = sdk.get("once", kube.namespace)
    assert [row.name for row in details.replicas if row.state == "Running"] == [pods[0]]
    sdk.progress("once", kube.namespace, details=details)
    sent = dict(sdk.backend.client.requests)
    live_logs = len(pods) - 1  # every pod still there: its log is where its reports are
    assert sent == {"get": 1, "list": 3, "stream": live_logs}, sent


def test_a_clients_later_connections_resume_its_tls_session(k8s_cluster, rest):
    """A pod log is read on a connection of its own: it resumes the session of the client's first connection (a
    third of a full handshake's time) instead of a new certificate exchange; another client's first does not."""
    from trainctl.kube.client import connect

    rest.request("GET", "/version")
    later = rest._connect(10)
    first_of_another = connect(kubeconfig=str(k8s_cluster.kubeconfig("admin")))._connect(10)
    try:
        later.connect()
        first_of_another.connect()
        assert later.sock.session_reused and not first_of_another.sock.session_reused
        response = later.request("GET", rest.prefix + "/version", None, rest._headers())
        assert response.status == 200 and b"gitVersion" in response.read()
    finally:
        later.close()
        first_of_another.close()


def test_logs_follow_waits_for_pods_that_start_later_and_previous(k8s_cluster, kube_node, kube):
    assert kube("submit", "jax", "--name", "lg", "-n", kube.namespace, "--workers", "2", "--", "python",
                "t.py").returncode == 0
    follower = kube.popen("logs", "-f", "lg", "-n", kube.namespace)
    time.sleep(2)  # the follower is waiting: no pod exists yet
    pods = play_operator(k8s_cluster, kube, "lg", "jaxjobs")
    for pod in pods:
        kube_node.bind(kube.namespace, pod)
        kube_node.write_log(kube.namespace, pod, "jax", f"hello from {pod}\n")
        kube_node.set_phase(kube.namespace, pod, "Running")
    time.sleep(2)
    kube_node.restart(kube.namespace, "lg-worker-0", exit_code=1)  # the follower must pick up the new run
    kube_node.write_log(kube.namespace, "lg-worker-0", "jax", "second run\n")
    time.sleep(2)
    previous = kube("logs", "lg", "-n", kube.namespace, "--replica", "worker-0", "--previous")
    assert "hello from lg-worker-0" in previous.stdout and "second run" not in previous.stdout
    for pod in pods:
        kube_node.write_log(kube.namespace, pod, "jax", f"bye from {pod}\n")
        kube_node.set_phase(kube.namespace, pod, "Succeeded", exit_code=0)
    set_job_condition(k8s_cluster, kube, "lg", "jaxjobs", "Succeeded")
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    for pod in pods:
        replica = pod.removeprefix("lg-")
        assert f"{replica} | hello from {pod}" in " ".join(out.split())
        assert f"bye from {pod}" in out
    assert "worker-0 | second run" in " ".join(out.split())


def test_wait_suspend_resume_delete(k8s_cluster, kube):
    assert kube("submit", "tf", "--name", "wt", "-n", kube.namespace, "--", "python", "t.py").returncode == 0
    set_job_condition(k8s_cluster, kube, "wt", "tfjobs", "Failed")
    assert kube("wait", "wt", "-n", kube.namespace, "--timeout", "20s").returncode == 1
    assert kube("wait", "wt", "-n", kube.namespace, "--for", "Failed", "--timeout", "20s").returncode == 0
    assert kube("submit", "paddle", "--name", "sp", "-n", kube.namespace, "--", "python", "t.py").returncode == 0
    assert kube("suspend", "sp", "-n", kube.namespace).returncode == 0
    stored = json.loads(kube("status", "sp", "-n", kube.namespace, "-o", "json").stdout)
    assert stored["spec"]["runPolicy"]["suspend"] is True
    assert kube("resume", "sp", "-n", kube.namespace).returncode == 0
    stored = json.loads(kube("status", "sp", "-n", kube.namespace, "-o", "json").stdout)
    assert stored["spec"]["runPolicy"]["suspend"] is False
    assert kube("delete", "sp", "wt", "-n", kube.namespace).returncode == 0
    gone = kube("status", "sp", "-n", kube.namespace)
    assert gone.returncode == 2 and 'job "sp" not found' in gone.stderr


def test_list_all_namespaces_and_selector(kube):
    assert kube("submit", "mpi", "--name", "ls", "-n", kube.namespace, "--label", "team=nlp", "--", "python",
                "t.py").returncode == 0
    everywhere = kube("list", "-A", "-l", "team=nlp")
    assert "ls" in everywhere.stdout and kube.namespace in everywhere.stdout
    assert "ls" not in kube("list", "-A", "-l", "team=other").stdout


def test_list_of_a_namespace_without_jobs_says_which_namespaces_have_them(kube):
    import uuid

    marker = f"hint={uuid.uuid4().hex[:8]}"  # other tests' jobs live in this cluster too
    assert kube("submit", "jax", "--name", "hint", "-n", kube.namespace, "--label", marker, "--no-workdir", "--",
                "python", "t.py").returncode == 0
    listed = kube("list", "-n", "default", "-l", marker)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == (f"no jobs in namespace default (kubernetes (context test)); 1 in "
                                     f"{kube.namespace}: use -n {kube.namespace} or -A")


def test_preflight_names_the_fix(kube):
    missing_ns = kube("submit", "jax", "--name", "pf", "-n", "no-such-namespace", "--", "python", "t.py")
    assert missing_ns.returncode == 2 and "namespace \"no-such-namespace\" does not exist" in missing_ns.stderr
    # a dry run makes the same checks on the same backend, in the same words (issue 32)
    dry = kube("submit", "jax", "--name", "pf", "-n", "no-such-namespace", "--dry-run", "--", "python", "t.py")
    assert (dry.returncode, dry.stderr) == (2, missing_ns.stderr), dry.stdout + dry.stderr
    missing_pc = kube("submit", "jax", "--name", "pf", "-n", kube.namespace, "--priority-class", "gold", "--",
                      "python", "t.py")
    assert missing_pc.returncode == 2 and 'PriorityClass "gold" does not exist' in missing_pc.stderr
    # --no-preflight skips those checks (the API server itself accepts the job); local files are never
    # checked on a cluster, where the command runs in the image (t.py exists nowhere here)
    skipped = kube("submit", "jax", "--name", "pf", "-n", kube.namespace, "--priority-class", "gold",
                   "--no-preflight", "--", "python", "t.py")
    assert skipped.returncode == 0, skipped.stderr


def test_the_cli_role_is_enough_and_no_rights_is_one_line(k8s_cluster, kube):
    from kubernetes import client, utils

    api = k8s_cluster.api_client()
    utils.create_from_yaml(api, str(REPO / "controller" / "rbac" / "cli-role.yaml"), namespace=kube.namespace)
    client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(kube.namespace, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "alice"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "trainctl-user"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    alice = KubeCLI(k8s_cluster.kubeconfig("alice"), kube.namespace)
    submitted = alice("submit", "jax", "--name", "rb", "-n", kube.namespace, "--", "python", "t.py")
    assert submitted.returncode == 0, submitted.stderr
    for args in (["status", "rb"], ["list"], ["logs", "rb"], ["suspend", "rb"], ["resume", "rb"], ["delete", "rb"]):
        result = alice(*args, "-n", kube.namespace)
        assert result.returncode == 0, (args, result.stderr)
    bob = KubeCLI(k8s_cluster.kubeconfig("bob"), kube.namespace)
    denied = bob("submit", "jax", "--name", "rb2", "-n", kube.namespace, "--", "python", "t.py")
    assert denied.returncode == 2
    assert len(denied.stderr.strip().splitlines()) == 1 and "forbidden" in denied.stderr
    assert "Traceback" not in denied.stderr
    assert bob("list", "-n", kube.namespace).returncode == 2
    # alice may not list jobs across namespaces: no hint, and no error for it
    none = alice("list", "-n", kube.namespace, "-l", "no-such-label")
    assert none.returncode == 0 and none.stdout.strip() == f"no jobs in namespace {kube.namespace} " \
        "(kubernetes (context test))", none.stdout + none.stderr


def test_unreachable_cluster_is_one_line(tmp_path):
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "gone",
              "clusters": [{"name": "gone", "cluster": {"server": "https://127.0.0.1:1"}}],
              "users": [{"name": "u", "user": {"token": "x"}}],
              "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    result = KubeCLI(path, "default")("list")
    assert result.returncode == 2 and "cannot reach" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


MODULES_PROBE = """
import json, sys
from trainctl.cli.app import main
try:
    main()
except SystemExit as done:
    code = done.code
print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)
"""


def test_list_and_status_speak_rest_without_the_kubernetes_client(kube):
    """The official client costs ~1.7 s to import; the CLI's cluster commands must not pay it."""
    assert kube("submit", "jax", "--name", "fast", "-n", kube.namespace, "--", "python", "t.py").returncode == 0
    for args in (["list", "-n", kube.namespace], ["status", "fast", "-n", kube.namespace]):
        result = subprocess.run([sys.executable, "-c", MODULES_PROBE, *args], env=kube.env, capture_output=True,
                                text=True, timeout=60, cwd=REPO)
        code, modules = json.loads(result.stderr.strip().splitlines()[-1])
        assert code in (0, None) and "fast" in result.stdout, (args, result.stdout, result.stderr)
        assert [m for m in modules if m == "kubernetes" or m.startswith(("kubernetes.", "urllib3"))] == [], args


def test_cluster_reads_into_a_pipe_load_no_typer_rich_yaml_or_http_client_and_print_what_typer_prints(kube, rest):
    """trainctl/cli/fast.py's path against a cluster: the same output as the Typer app's, with none of the modules
    that made a read cost three times kubectl get (the kubeconfig's YAML is read by the first run only)."""
    import re

    from tests.unit.test_fast_cli import PROBE as FAST_PROBE
    from tests.unit.test_fast_cli import TYPER as TYPER_PROBE
    from trainctl.kube.client import PODS, ApiError

    assert kube("submit", "pytorch", "--name", "quick", "-n", kube.namespace, "--workers", "2", "--", "python",
                "t.py").returncode == 0
    lines = [["list", "-n", kube.namespace], ["status", "quick", "-n", kube.namespace],
             ["get", "pytorchjob/quick", "-n", kube.namespace, "-o", "name"], ["logs", "quick", "-n", kube.namespace],
             ["wait", "quick", "-n", kube.namespace, "--for", "suspended", "--timeout", "1s"]]
    for args in lines:
        runs = [subprocess.run([sys.executable, "-c", program, *args], env=kube.env, capture_output=True, text=True,
                               timeout=60, cwd=REPO) for program in (FAST_PROBE, FAST_PROBE, TYPER_PROBE)]
        *stderr, modules = runs[1].stderr.splitlines()
        loaded = set(json.loads(modules))
        assert not loaded & {"typer", "rich", "yaml", "http.client", "email"}, (args, sorted(loaded))

        def shown(result, text):
            return result.returncode, re.sub(r"\b\d+[smhd]\b", "<age>", text)

        assert shown(runs[1], runs[1].stdout) == shown(runs[2], runs[2].stdout), args
        assert shown(runs[1], "".join(line + "\n" for line in stderr)) == shown(runs[2], runs[2].stderr), args
    logs = kube("logs", "quick", "-n", kube.namespace).stdout
    with pytest.raises(ApiError) as asked:  # what the API server says of a pod that does not exist
        list(rest.stream(PODS.path(kube.namespace, "quick-master-0", "log"), {"container": "pytorch"}, timeout=10))
    assert f"master-0 | (no logs: {asked.value.message})" in logs.splitlines()
