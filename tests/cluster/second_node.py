"""A second real node joined to the first one's cluster (issue 42): the ``second_node`` fixture of
tests/realnode, for the tests of jobs across nodes and of a node lost mid-run.

``join`` starts, beside a running first node (tests/cluster/realnode.py), a second kubelet with its own
containerd and kube-proxy, all in a network namespace of their own, ``trainctl-node-2``: loopback, the pod
bridge ``trainctl1`` (10.88.1.1/24, the node's InternalIP) and one end of a veth pair whose other end is in
the first node's namespace (10.89.0.1/30 there, 10.89.0.2/30 here). The first node's namespace routes
10.88.1.0/24 to it; this one routes the first node's pod subnet and the service range back (DNS and the API
server are on 10.88.0.1); both forward. The kubelet and kube-proxy reach the API server at
https://10.88.0.1:6443 (a name the server's certificate has); the kubelet's certificates come from the first
node's CA (CN system:node:trainctl-node-2).

Two kubelets on one machine share what a kubelet takes for its own, so the second node is kept apart:

* its kubelet's cgroups: ``cgroupRoot: /trainctl-node-2``, so its kubepods tree is not the first one's (a
  kubelet kills the processes of pod cgroups it does not know);
* the paths the kubelet and containerd hard-code (PRIVATE_PATHS: the pod logs a kubelet's container GC
  removes for pods it does not know, the device-plugin directory its device manager empties at start,
  /run/containerd, CNI's cache, the pods' network namespace files): containerd and the kubelet, and the shims
  containerd starts, run in one mount namespace of their own (a holder process made by ``unshare --mount
  --propagation private`` bind-mounts directories of the node's own over those paths), entered with
  ``nsenter --mount=/proc/<holder>/ns/mnt --net=/run/netns/trainctl-node-2`` (never ``ip netns exec``: see
  ``realnode.in_netns``);
* containerd's root: a kept root of its own (``containerd_cache.current(NODE_NAME)``), sealed and cleaned as
  the first node's is, holding only the images this node's tests run (IMAGE_KINDS).

``freeze`` stops its kubelet (SIGSTOP) and ``thaw`` lets it go on: a kubelet that merely stopped talking to the
API server while its pods run. ``lose`` makes the node die as a machine does: SIGKILL to its kubelet and containerd, then to every process of
its namespace and of its cgroups (the pods' processes). ``stop`` cordons the node, deletes its pods through
the API while its kubelet runs (force-deletes them when it is gone), deletes the Node, kills what is left,
closes the kept root and deletes the namespace (the veth pair and the first node's route to it go with it)
and the cgroups; the mount namespace ends with its last process. A state file lets ``down`` (and the first
node's ``down``) clean up after a join killed half-way.
"""

from __future__ import annotations

import json
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster import containerd_cache, images, realnode
from tests.cluster.realnode import API_PORT, REPO, READY_TIMEOUT_S
from trainctl.frameworks.base import LABEL_JOB_NAME, LABEL_REPLICA_TYPE

NETNS = "trainctl-node-2"
NODE_NAME = "trainctl-node-2"
BRIDGE = "trainctl1"
BRIDGE_ADDRESS = "10.88.1.1"
POD_SUBNET = "10.88.1.0/24"
# the veth pair between the two nodes' namespaces: (name, address) at the first node's end, then at this one's
FIRST_END = ("to-node-2", "10.89.0.1")
SECOND_END = ("to-node-1", "10.89.0.2")
CGROUP_ROOT = NODE_NAME
PRIVATE_PATHS = ("/var/lib/kubelet", "/var/lib/cni", "/var/log/pods", "/var/log/containers", "/run/containerd",
                 "/run/netns")
IMAGE_KINDS = ("pause", "busybox", "kubectl-delivery", "python")
API_SERVER = f"https://{realnode.BRIDGE_ADDRESS}:{API_PORT}"
STATE = Path(tempfile.gettempdir()) / "trainctl-real-node-2.json"
DRAIN_TIMEOUT_S = 60


def in_netns(argv: list[str]) -> list[str]:
    return ["nsenter", f"--net=/run/netns/{NETNS}", "--", *argv]


@dataclass
class SecondNode:
    workdir: Path
    first: Path  # the first node's directory: its CA and admin kubeconfig
    daemons: dict[str, int] = field(default_factory=dict)  # name: pid; "mounts" is the mount namespace's holder
    containerd_cache: str = ""
    images: dict[str, str] = field(default_factory=dict)
    joined_s: float = 0.0

    def state(self) -> dict:
        return {"workdir": str(self.workdir), "first": str(self.first), "daemons": self.daemons,
                "containerd_cache": self.containerd_cache, "images": self.images, "joined_s": self.joined_s}

    @classmethod
    def from_state(cls, state: dict) -> SecondNode:
        return cls(**{**state, "workdir": Path(state["workdir"]), "first": Path(state["first"])})

    def _save(self) -> None:
        STATE.write_text(json.dumps(self.state()))

    @property
    def containerd_socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    @property
    def pki(self) -> Path:
        return self.first / "pki"

    def kubectl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """kubectl as the cluster's admin, from the first node's namespace (where the API server is)."""
        return subprocess.run(realnode.in_netns(["kubectl", "--kubeconfig", str(self.first / "kubeconfig"), *args]),
                              capture_output=True, text=True, timeout=timeout)

    def join(self) -> SecondNode:
        started = time.monotonic()
        self._save()
        try:
            self._network()
            self._mount_namespace()
            self._containerd()
            self._kubelet()
            for kind in IMAGE_KINDS:
                self.image(kind)
        except BaseException:
            self.stop()
            STATE.unlink(missing_ok=True)
            raise
        self.joined_s = time.monotonic() - started
        self._save()
        return self

    def _network(self) -> None:
        first = realnode.NETNS
        run = realnode._run
        drop_link_to_the_second_node()  # a node lost just before: its namespace is destroyed in the background
        run(["ip", "netns", "add", NETNS])
        run(["ip", "-n", NETNS, "link", "set", "lo", "up"])
        run(["ip", "-n", NETNS, "link", "add", BRIDGE, "type", "bridge"])
        run(["ip", "-n", NETNS, "addr", "add", f"{BRIDGE_ADDRESS}/24", "dev", BRIDGE])
        run(["ip", "-n", NETNS, "link", "set", BRIDGE, "up"])
        run(["ip", "-n", first, "link", "add", FIRST_END[0], "type", "veth", "peer", "name", SECOND_END[0],
             "netns", NETNS])
        for netns, (link, address) in ((first, FIRST_END), (NETNS, SECOND_END)):
            run(["ip", "-n", netns, "addr", "add", f"{address}/30", "dev", link])
            run(["ip", "-n", netns, "link", "set", link, "up"])
        run(["ip", "-n", first, "route", "add", POD_SUBNET, "via", SECOND_END[1]])
        for destination in (realnode.POD_SUBNET, realnode.SERVICE_RANGE):
            run(["ip", "-n", NETNS, "route", "add", destination, "via", FIRST_END[1]])
        run(in_netns(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]))

    def _mount_namespace(self) -> None:
        """The holder of the mount namespace containerd and the kubelet share: the node's own directories over
        PRIVATE_PATHS (made on the machine first if missing: the first node's teardown removes those it made)."""
        ready = self.workdir / "mounts-ready"
        steps = []
        for path in PRIVATE_PATHS:
            source = self.workdir / "machine" / path.strip("/").replace("/", "-")
            source.mkdir(parents=True)
            steps.append(f"mkdir -p {path} && mount --bind {source} {path}")
        script = "set -e; " + " && ".join(steps) + f" && touch {ready} && exec sleep infinity"
        self._daemon("mounts", in_netns(["unshare", "--mount", "--propagation", "private", "sh", "-c", script]))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.exists():
            if time.monotonic() > deadline or not Path(f"/proc/{self.daemons['mounts']}").exists():
                raise RuntimeError(f"the second node's mount namespace did not start:\n{self._log_tail('mounts')}")
            time.sleep(0.1)

    def _in_node(self, argv: list[str]) -> list[str]:
        return ["nsenter", f"--mount=/proc/{self.daemons['mounts']}/ns/mnt", f"--net=/run/netns/{NETNS}", "--",
                *argv]

    def _containerd(self) -> None:
        directory = self.workdir / "containerd"
        cni = self.workdir / "cni"
        realnode.write_cni_config(cni, BRIDGE, POD_SUBNET)
        cache = containerd_cache.current(NODE_NAME)
        self.containerd_cache = str(cache.directory)
        self._save()  # before the root is opened: a join killed from here on closes it at its teardown
        self._kept_root().open(directory / "clean", realnode.current_images())
        directory.mkdir(parents=True, exist_ok=True)
        with realnode.outside():
            self.images["pause"] = realnode.archive_image_name(images.ALL_BUILDERS["pause"]())
        (directory / "config.toml").write_text(
            realnode.containerd_config(self.images["pause"], cni, cache.root, directory))
        self._daemon("containerd", self._in_node(["containerd", "--config", str(directory / "config.toml")]))
        realnode.wait_cri_ready(self.containerd_socket, self.workdir / "containerd.log")

    def _kubelet(self) -> None:
        """Certificates from the first node's CA; the kubelet (its own cgroup root) and kube-proxy."""
        client, serving = f"{NODE_NAME}-client", f"{NODE_NAME}-serving"
        realnode.issue_certificate(self.pki, client, f"/O=system:nodes/CN=system:node:{NODE_NAME}",
                                   "extendedKeyUsage=clientAuth")
        realnode.issue_certificate(self.pki, serving, f"/CN={NODE_NAME}",
                                   f"subjectAltName=IP:{BRIDGE_ADDRESS}\nextendedKeyUsage=serverAuth")
        for hierarchy in realnode.cgroup_hierarchies():
            (hierarchy / CGROUP_ROOT).mkdir(exist_ok=True)
        kubelet_dir = self.workdir / "kubelet"
        kubelet_dir.mkdir()
        realnode.write_kubeconfig(kubelet_dir / "kubeconfig", self.pki, client, API_SERVER)
        realnode.write_kubelet_config(kubelet_dir, self.pki, serving, BRIDGE_ADDRESS, cgroupRoot=f"/{CGROUP_ROOT}")
        realnode.write_kubeconfig(self.workdir / "kubeconfig", self.pki, "admin", API_SERVER)
        self._daemon("kube-proxy", in_netns(realnode.kube_proxy_argv(self.workdir / "kubeconfig", NODE_NAME)))
        self._daemon("kubelet", self._in_node(realnode.kubelet_argv(kubelet_dir, self.containerd_socket, NODE_NAME,
                                                                    BRIDGE_ADDRESS)))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.kubectl("wait", "--for=condition=Ready", f"node/{NODE_NAME}", "--timeout=5s").returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the second node did not become Ready:\n{self._log_tail('kubelet')}")
            time.sleep(0.5)

    def image(self, kind: str) -> str:
        """``kind``'s current image in this node's containerd, imported if its kept root lacks it."""
        with realnode.outside():
            archive = images.ALL_BUILDERS[kind]()
        name = realnode.archive_image_name(archive)
        ctr = in_netns(["ctr", "-a", str(self.containerd_socket), "-n", "k8s.io", "images"])
        if name not in realnode._run([*ctr, "ls", "-q"]).split():
            with self._kept_root().importing():
                realnode._run([*ctr, "import", str(archive)])
        self.images[kind] = name
        self._save()
        return name

    def _daemon(self, name: str, argv: list[str]) -> int:
        with open(self.workdir / f"{name}.log", "wb") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)
        self.daemons[name] = process.pid
        self._save()
        return process.pid

    def _log_tail(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]

    def _kept_root(self) -> containerd_cache.ContainerdCache:
        return containerd_cache.ContainerdCache(Path(self.containerd_cache), launch=in_netns)

    @property
    def cgroups(self) -> list[Path]:
        return [hierarchy / CGROUP_ROOT for hierarchy in realnode.cgroup_hierarchies()]

    def lose(self) -> float:
        """The node dies as a machine would: SIGKILL to its kubelet and containerd, then to every process of its
        namespace (kube-proxy, the shims, the mount namespace's holder) and of its cgroups (its pods' processes).
        Its link to the first node goes down first: a dead machine sends nothing, while a killed process's sockets
        would tell its peers at once (a reset), which is a failure, not a lost node. Returns the moment (time.time())
        it was lost."""
        realnode._run(["ip", "-n", NETNS, "link", "set", SECOND_END[0], "down"])
        for name in ("kubelet", "containerd"):
            realnode._signal_group(self.daemons[name], signal.SIGKILL)
        lost = time.time()
        realnode.kill_namespace_processes(NETNS, (signal.SIGKILL,))
        realnode.kill_cgroup_processes(self.cgroups)
        return lost

    def freeze(self) -> None:
        """The kubelet stops (SIGSTOP), as one hung or cut off from the API server does: it renews no Lease and reports
        nothing, while containerd and the pods run on."""
        realnode._signal_group(self.daemons["kubelet"], signal.SIGSTOP)

    def thaw(self) -> None:
        if "kubelet" in self.daemons:  # a join that failed before its kubelet started has none
            realnode._signal_group(self.daemons["kubelet"], signal.SIGCONT)

    def alive(self) -> bool:
        return realnode.alive(self.daemons.get("kubelet", 0))

    def stop(self) -> None:
        self.thaw()  # a test that froze the kubelet and failed: it drains its pods
        realnode.every_step(self._drain_pods, self._stop_processes, self._close_kept_root, self._restore_machine)

    def _drain_pods(self) -> None:
        """Cordoned (no pod lands on it meanwhile), its pods deleted while its kubelet runs (or force-deleted
        when it is gone: nothing would ever confirm their end), then the Node itself."""
        if realnode.attached() is None:
            return  # the first node is gone, and its API server with it
        self.kubectl("cordon", NODE_NAME)
        on_node = ("get", "pods", "-A", "--field-selector", f"spec.nodeName={NODE_NAME}", "-o", "name")
        force = () if self.alive() else ("--force", "--grace-period=0")
        for line in self.kubectl(*on_node[:-2], "-o", "jsonpath={range .items[*]}{.metadata.namespace} "
                                 "{.metadata.name}{\"\\n\"}{end}").stdout.splitlines():
            namespace, name = line.split()
            self.kubectl("delete", "pod", name, "-n", namespace, "--grace-period=1", "--wait=false", *force)
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while time.monotonic() < deadline and self.kubectl(*on_node).stdout.strip():
            time.sleep(0.5)
        self.kubectl("delete", "node", NODE_NAME, "--wait=false")
        if self.alive():
            realnode._run(in_netns([str(realnode.NODE_BINARIES / "kube-proxy"), "--cleanup"]))

    def _stop_processes(self) -> None:
        for pid in self.daemons.values():
            realnode._signal_group(pid, signal.SIGTERM)
        realnode.kill_namespace_processes(NETNS)
        realnode.kill_cgroup_processes(self.cgroups)

    def _close_kept_root(self) -> None:
        if self.containerd_cache and NETNS in realnode._run(["ip", "netns", "list"]).split():
            self._kept_root().close(self.workdir / "containerd-close", realnode.current_images())

    def _restore_machine(self) -> None:
        drop_link_to_the_second_node()
        if NETNS in realnode._run(["ip", "netns", "list"]).split():
            realnode._run(["ip", "netns", "delete", NETNS])  # the veth pair, and the first node's route, with it
        for cgroup in self.cgroups:  # empty once every container has exited
            if cgroup.exists():
                subprocess.run(["find", str(cgroup), "-depth", "-type", "d", "-delete"], check=True)
        subprocess.run(["rm", "-rf", str(self.workdir)], check=True)


def drop_link_to_the_second_node() -> None:
    """The veth pair's end in the first node's namespace, deleted (its peer with it) when it is there: deleting the
    second node's namespace takes it too, but only once the kernel has destroyed that namespace, which it does in
    the background, so a join right after a loss found it still there ("File exists")."""
    subprocess.run(["ip", "-n", realnode.NETNS, "link", "delete", FIRST_END[0]], capture_output=True)


def spread(job: str, replica_types: dict[str, str], when_unsatisfiable: str) -> list[str]:
    """``submit --set`` options: the pods of ``replica_types`` ({spec key: replica-type label, in lower case as the
    controller writes it}) spread evenly over the nodes (maxSkew 1 per kubernetes.io/hostname), with
    ``when_unsatisfiable`` DoNotSchedule or ScheduleAnyway."""
    rule = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": when_unsatisfiable,
            "labelSelector": {"matchLabels": {LABEL_JOB_NAME: job},
                              "matchExpressions": [{"key": LABEL_REPLICA_TYPE, "operator": "In",
                                                    "values": sorted(replica_types.values())}]}}
    specs = "pytorchReplicaSpecs" if "Master" in replica_types else "mpiReplicaSpecs"
    return [option for key in replica_types
            for option in ("--set", f"spec.{specs}.{key}.template.spec.topologySpreadConstraints={json.dumps([rule])}")]


def join(first: realnode.RealNode) -> SecondNode:
    if STATE.exists():
        down()  # left behind by a process that died
    return SecondNode(Path(tempfile.mkdtemp(prefix="trainctl-real-node-2-")), first.workdir).join()


def down() -> None:
    if not STATE.exists():
        return
    SecondNode.from_state(json.loads(STATE.read_text())).stop()
    STATE.unlink()
