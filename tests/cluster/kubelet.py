"""A node that plays kubelet for tests: binds pods, writes their status, serves their logs.

There is no kubelet, scheduler or controller-manager in the test cluster, so pods stay
Pending until something binds them and writes their status. ``FakeNode`` does what a
kubelet would: it registers a Node whose kubelet endpoint is an HTTPS server on
127.0.0.1, so ``GET pods/<pod>/log`` goes through the real API server to it.

    node.bind("ns", "job-worker-0")
    node.set_phase("ns", "job-worker-0", "Running")
    node.write_log("ns", "job-worker-0", "pytorch", "epoch 1\\n")
    node.restart("ns", "job-worker-0", exit_code=137, reason="OOMKilled")
    node.set_phase("ns", "job-worker-0", "Succeeded", exit_code=0)

For a controller under test, ``node.manage("ns")`` does this for every pod of a
namespace as it appears: binds it (a new pod starts with an empty log, as a new container
does), marks it Running, and completes deletions (a pod on a node stays Terminating until
its kubelet confirms; its containers stop first, which ends the log streams that follow it; a pod bound to another
node is that node's to confirm, so one bound to a node with no kubelet stays Terminating unless deleted with no grace
period, as on a lost node).
"""

from __future__ import annotations

import datetime
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

TERMINATED_PHASES = ("Succeeded", "Failed")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def namespace_terminating(error) -> bool:
    """The API server refuses new content (a binding) in a namespace being deleted: for a kubelet or scheduler,
    the end of that pod's work (the namespace's deletion removes the pod), not an error."""
    causes = (error.body.get("details") or {}).get("causes") or []
    return error.status == 403 and any(cause.get("reason") == "NamespaceTerminating" for cause in causes)


class FakeNode:
    def __init__(self, cluster, workdir: Path, name: str = "trainctl-test-node") -> None:
        self.cluster, self.workdir, self.name = cluster, workdir, name
        self.logs: dict[tuple[str, str, str], str] = {}  # (ns, pod, container) -> text
        self.previous: dict[tuple[str, str, str], str] = {}
        # the same logs with kubelet's timestamp in front of each line, served for timestamps=true
        self.stamped: dict[tuple[str, str, str], str] = {}
        self.previous_stamped: dict[tuple[str, str, str], str] = {}
        self.finished: set[tuple[str, str]] = set()
        self.unreachable: set[tuple[str, str]] = set()  # (namespace, pod) whose logs nothing serves (a lost node)
        self.lock = threading.Condition()
        self.server: ThreadingHTTPServer | None = None
        self.managed: dict[str, bool] = {}  # namespace -> start pods (Running) or only bind them
        self.pod_watch = None

    # ---- lifecycle ------------------------------------------------------------
    def start(self) -> FakeNode:
        from kubernetes import client

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.socket = self._tls().wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.core = client.CoreV1Api(self.cluster.api_client())
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name}}
        self.core.create_node(node)
        status = {"status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.server.server_address[1]}},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test node",
                            "lastHeartbeatTime": now(), "lastTransitionTime": now()}]}}
        self.core.patch_node_status(self.name, status)
        return self

    def manage(self, namespace: str, run: bool = True) -> None:
        """Play kubelet for every pod in ``namespace`` from now on (see the module docstring)."""
        from trainctl.controller.informer import Informer
        from trainctl.kube.client import PODS, connect

        self.managed[namespace] = run
        if self.pod_watch is None:
            self.rest = connect(kubeconfig=str(self.cluster.kubeconfig("admin")))
            self.pod_watch = Informer(self.rest, PODS)
            self.pod_watch.handlers.append(self._on_pod)
            self.pod_watch.start()
        self.pod_watch.synced.wait(30)
        for pod in self.pod_watch.items():
            if pod["metadata"]["namespace"] == namespace:  # another namespace's pods are its own manage()'s
                self._on_pod("ADDED", pod)

    def release(self, namespace: str) -> None:
        """Stop playing kubelet for ``namespace`` (before it is deleted: nothing of it outlives its test)."""
        self.managed.pop(namespace, None)

    def _on_pod(self, event: str, pod: dict) -> None:
        from trainctl.kube.client import PODS, ApiError

        metadata, spec = pod["metadata"], pod["spec"]
        namespace, name = metadata["namespace"], metadata["name"]
        # read once: a test's teardown releases its namespace from another thread meanwhile, and a KeyError here
        # ended the informer's thread, so that no later test's pod ever ran
        runs = self.managed.get(namespace)
        if event == "DELETED" or runs is None:
            return
        try:
            if metadata.get("deletionTimestamp"):
                if spec.get("nodeName") != self.name:
                    return  # another node's pod: only its kubelet confirms its deletion (a lost node's never does)
                self.stop_containers(namespace, name)
                self.rest.delete(PODS, name, namespace, grace_period=0, uid=metadata["uid"])
            elif not spec.get("nodeName"):
                self.forget_logs(namespace, name)
                binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                           "target": {"apiVersion": "v1", "kind": "Node", "name": self.name}}
                self.rest.request(
                    "POST", PODS.path(namespace, name, "binding"), binding)
                if runs:
                    self.rest.patch(PODS, name, {"status": self._status(pod, "Running")}, namespace, "status")
        except ApiError as error:
            if error.status not in (404, 409) and not namespace_terminating(error):
                raise

    def stop_containers(self, namespace: str, pod: str) -> None:
        """The pod's containers stop: the streams following its logs end (their last lines sent)."""
        with self.lock:
            self.finished.add((namespace, pod))
            self.lock.notify_all()

    def forget_logs(self, namespace: str, pod: str) -> None:
        """A new pod of that name: no log of an earlier one is its log."""
        with self.lock:
            self.finished.discard((namespace, pod))
            for logs in (self.logs, self.previous, self.stamped, self.previous_stamped):
                for key in [key for key in logs if key[:2] == (namespace, pod)]:
                    del logs[key]

    def _status(self, pod: dict, phase: str) -> dict:
        statuses = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "restartCount": 0,
                     "state": self._state(phase, None, "", "")} for c in pod["spec"]["containers"]]
        return {"phase": phase, "containerStatuses": statuses, "podIP": "127.0.0.1", "hostIP": "127.0.0.1",
                "startTime": now()}

    def stop(self) -> None:
        if self.pod_watch is not None:
            self.pod_watch.stop()
        if self.server:
            with self.lock:
                self.finished.add(("*", "*"))
                self.lock.notify_all()
            self.server.shutdown()

    def _tls(self) -> ssl.SSLContext:
        key, cert = self.workdir / "kubelet.key", self.workdir / "kubelet.crt"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                        "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        return context

    # ---- what kubelet does to pods ------------------------------------------------
    def bind(self, namespace: str, pod: str) -> None:
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": self.name}}
        self.core.create_namespaced_binding(namespace, binding, _preload_content=False)

    def set_phase(self, namespace: str, pod: str, phase: str, exit_code: int | None = None, reason: str = "",
                  waiting_reason: str = "", message: str = "") -> None:
        """Write pod status as kubelet would: phase plus one container status per container (``message``: the
        terminated containers' termination message, what they wrote to /dev/termination-log)."""
        obj = self.core.read_namespaced_pod(pod, namespace)
        previous = {s.name: s for s in (obj.status.container_statuses or [])}
        statuses = []
        for container in obj.spec.containers:
            old = previous.get(container.name)
            status = {"name": container.name, "image": container.image, "imageID": "", "ready": phase == "Running",
                      "restartCount": old.restart_count if old else 0, "state": self._state(phase, exit_code, reason,
                                                                                               waiting_reason, message)}
            if old and old.last_state and old.last_state.terminated:
                status["lastState"] = {"terminated": {"exitCode": old.last_state.terminated.exit_code,
                                                      "reason": old.last_state.terminated.reason or "",
                                                      "startedAt": now(), "finishedAt": now()}}
            statuses.append(status)
        body = {"status": {"phase": phase, "containerStatuses": statuses, "podIP": "127.0.0.1",
                           "hostIP": "127.0.0.1", "startTime": now()}}
        self.core.patch_namespaced_pod_status(pod, namespace, body)
        if phase in TERMINATED_PHASES:
            with self.lock:
                self.finished.add((namespace, pod))
                self.lock.notify_all()

    @staticmethod
    def _state(phase: str, exit_code: int | None, reason: str, waiting_reason: str, message: str = "") -> dict:
        if phase == "Running":
            return {"running": {"startedAt": now()}}
        if phase in TERMINATED_PHASES:
            code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
            return {"terminated": {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                                   "startedAt": now(), "finishedAt": now(), **({"message": message} if message else {})}}
        return {"waiting": {"reason": waiting_reason or "ContainerCreating"}}

    def restart(self, namespace: str, pod: str, exit_code: int, reason: str = "Error", message: str = "") -> None:
        """The container died and kubelet restarted it in place: restartCount+1, lastState (``message``: the run's
        termination message), fresh log."""
        obj = self.core.read_namespaced_pod(pod, namespace)
        statuses = []
        for container in obj.spec.containers:
            old = next((s for s in obj.status.container_statuses or [] if s.name == container.name), None)
            statuses.append({"name": container.name, "image": container.image, "imageID": "", "ready": True,
                             "restartCount": (old.restart_count if old else 0) + 1,
                             "state": {"running": {"startedAt": now()}},
                             "lastState": {"terminated": {"exitCode": exit_code, "reason": reason,
                                                          "startedAt": now(), "finishedAt": now(),
                                                          **({"message": message} if message else {})}}})
            key = (namespace, pod, container.name)
            with self.lock:
                self.previous[key] = self.logs.pop(key, "")
                self.previous_stamped[key] = self.stamped.pop(key, "")
        self.core.patch_namespaced_pod_status(pod, namespace, {"status": {"phase": "Running",
                                                                          "containerStatuses": statuses}})

    def write_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        """Append to a container's log; every line begun by this write is stamped with its time."""
        key = (namespace, pod, container)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f000Z ")  # kubelet's width
        with self.lock:
            stamped = self.stamped.get(key, "")
            starts_line = not stamped or stamped.endswith("\n")
            self.stamped[key] = (stamped + (stamp if starts_line else "")
                                 + text[:-1].replace("\n", "\n" + stamp) + text[-1:])
            self.logs[key] = self.logs.get(key, "") + text
            self.lock.notify_all()

    # ---- the kubelet's log endpoint ---------------------------------------------------
    def _handler(self):
        node = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                parts = url.path.strip("/").split("/")
                if len(parts) != 4 or parts[0] != "containerLogs":
                    self.send_error(404)
                    return
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                key = (parts[1], parts[2], parts[3])
                if key[:2] in node.unreachable:  # its node is lost: nothing answers for it
                    self.send_error(503, "node unreachable")
                    return
                if query.get("previous") == "true" and key not in node.previous:  # as kubelet answers
                    self.send_error(400, f'previous terminated container "{key[2]}" in pod "{key[1]}" not found')
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                node._serve_log(self.wfile, key, query)

        return Handler

    def _serve_log(self, out, key: tuple[str, str, str], query: dict) -> None:
        current_logs = self.stamped if query.get("timestamps") == "true" else self.logs
        previous_logs = self.previous_stamped if query.get("timestamps") == "true" else self.previous
        source = previous_logs if query.get("previous") == "true" else current_logs
        with self.lock:
            text = source.get(key, "")
        shown = text
        if "tailLines" in query:
            lines = text.splitlines(keepends=True)
            shown = "".join(lines[-int(query["tailLines"]):] if int(query["tailLines"]) else [])
        out.write(shown.encode())
        out.flush()
        if query.get("follow") != "true" or source is previous_logs:
            return
        sent = len(text)
        while True:
            with self.lock:
                self.lock.wait_for(lambda: len(current_logs.get(key, "")) != sent
                                   or key[:2] in self.finished or ("*", "*") in self.finished, timeout=30)
                current = current_logs.get(key, "")
                done = key[:2] in self.finished or ("*", "*") in self.finished
            if len(current) < sent:  # rotated by a restart: start over from the new log
                sent = 0
            try:
                out.write(current[sent:].encode())
                out.flush()
            except OSError:
                return
            sent = len(current)
            if done:
                return
            time.sleep(0.01)
