"""A real Kubernetes node in a network namespace of its own (issue 14): the ``real_node`` fixture of
tests/realnode, and ``python -m tests.cluster up --real`` / ``down --real`` by hand (as root).

``start`` creates the network namespace ``trainctl-node`` (loopback up) and, inside it only, the pod
bridge with its address; records the host sysctls a kubelet changes; starts, all inside the
namespace: containerd with the CRI settings docs/real-node.md found necessary (its own
root/state/socket, the local pause image as sandbox image, ``restrict_oom_score_adj``, cgroupfs) and a
bridge + portmap CNI config with IP masquerading off; etcd (the namespace's loopback) and
kube-apiserver (port 6443 on the namespace's loopback for clients and on the bridge address for
pods; Node,RBAC authorization, NodeRestriction, client certificates from a CA made for the node);
dnsmasq on the bridge address with tests/cluster/dns.py keeping its records in step with Services
and Endpoints; kube-scheduler and kube-controller-manager (garbage collector included);
kube-proxy (iptables mode, ClusterIP Services); the kubelet (a node certificate; cgroupfs; Ready in
about a second). The locally built images (tests/cluster/images.py: pause, python, controller) are
imported into containerd, whose root is kept between sessions (tests/cluster/containerd_cache.py): a warm
start finds them imported and unpacked, and imports only those whose archive changed. Clients run inside the namespace: ``entered()`` moves the calling thread
there, or ``nsenter --net=/run/netns/trainctl-node ...`` from a shell.

``stop`` deletes every pod through the API while the kubelet still runs (so CNI tears each pod's
network down), runs ``kube-proxy --cleanup``, kills every process in the namespace and in the
cgroups the node made, deletes leftover CNI namespaces, unmounts what containerd mounted under the
node's directory, cleans the kept containerd root of everything but its images (containerd_cache.py), deletes the node's namespace (taking the bridge, routes, iptables rules and net
sysctls with it), restores the recorded host sysctls and removes what the node made outside its
directory (MACHINE_PATHS, the cgroup parents). The state file lets ``down`` run from another shell
and clean up after a start that was killed half-way, and a reaper (tests/cluster/reaper.py) run it when the
process that started the node ends without stopping it: killed (pytest-xdist kills a worker still tearing
down 10 s after Ctrl-C), or its teardown cut short.

Rules it keeps (docs/real-node.md, "Limits and rules"): every non-loopback address lives in the
namespace this module creates; no route leaves it; the machine's own network namespace is never
changed (all ``ip`` commands name the node's namespace with ``-n``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster import containerd_cache, images
from tests.cluster.containerd_cache import mount_points, unmount_under
from tests.cluster.reaper import Reaper
from tests.cluster.server import SOURCE_VERSION, cached_apiserver, stop_when_interrupted

NETNS = "trainctl-node"
BRIDGE = "trainctl0"
BRIDGE_ADDRESS = "10.88.0.1"
POD_SUBNET = "10.88.0.0/24"
# Every node's pod subnet is in it (a second node has 10.88.1.0/24: tests/cluster/second_node.py)
CLUSTER_CIDR = "10.88.0.0/16"
# When the node controller calls a node that stopped reporting NotReady (upstream's default 40 s): the kubelets
# report every second, so 20 s is still 20 missed reports; the node-loss tests wait for it (tests/realnode)
NODE_MONITOR_GRACE_PERIOD = "20s"
# Host-wide (not per-namespace) sysctls the kubelet sets: recorded before, restored after.
HOST_SYSCTLS = ("vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops",
                "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes")
STATE = Path(tempfile.gettempdir()) / "trainctl-real-node.json"
# Held by the test session whose node is up (the namespace's name, /var/lib/kubelet and the host's cgroups are
# the machine's, so one node at a time): another session on the machine waits for its turn instead of using, or
# tearing down, a node whose tests are running. Released when the session's process ends.
TURN_LOCK = Path(os.environ.get("TRAINCTL_REAL_NODE_LOCK") or Path(tempfile.gettempdir()) / "trainctl-real-node.lock")
TURN_WAIT_S = 45 * 60
_turn = None
_reaper: Reaper | None = None  # runs ``down --real`` if this process ends before its own down() did
# Where containerd's shims, the kubelet and CNI write whatever their settings say (shim sockets,
# device-plugin socket, CNI results, pod logs): those the node made are removed at teardown.
# /run/netns too: iproute2's first `ip netns add` makes it and bind-mounts it onto itself.
MACHINE_PATHS = ("/run/containerd", "/var/lib/kubelet", "/var/lib/cni", "/var/log/pods", "/var/log/containers",
                 "/run/netns")
# cgroup v1 parents that containers of the k8s.io containerd namespace (and later the kubelet's pods) live in
CGROUP_PARENTS = ("k8s.io", "kubepods")
READY_TIMEOUT_S = 60
SERVICE_RANGE = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
API_PORT = 6443  # fixed: the namespace is the node's own, nothing else listens in it
NODE_NAME = "trainctl-node"
REPO = Path(__file__).resolve().parents[2]
CLONE_NEWNET = 0x40000000
# The machine's own network namespace, held open from import (before any test enters the node's):
# a /proc path to a thread's namespace would follow the thread into the node's.
MACHINE_NETNS = f"/proc/self/fd/{os.open('/proc/thread-self/ns/net', os.O_RDONLY)}"
DRAIN_TIMEOUT_S = 60
EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
NODE_BINARIES = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainctl" / "node" / SOURCE_VERSION


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def _run(argv: list[str]) -> str:
    return images.run_step(" ".join(argv[:4]), argv).stdout


def in_netns(argv: list[str]) -> list[str]:
    """``argv`` run inside the node's network namespace. nsenter, not ``ip netns exec``: that one also
    makes a new mount namespace with a fresh /sys, which hides /sys/fs/cgroup, and runc then fails
    every container with "no cgroup mount found in mountinfo"."""
    return ["nsenter", f"--net=/run/netns/{NETNS}", "--", *argv]


def toml(table: dict, path: tuple[str, ...] = ()) -> str:
    """containerd's config as TOML from nested dicts (keys first, then sub-tables, as TOML requires).
    Values are str, bool, int or lists of str; strings are written as JSON strings, valid TOML."""
    def value(item) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        return json.dumps(item)

    scalars = [f"{key} = {value(item)}" for key, item in table.items() if not isinstance(item, dict)]
    lines = ([f"[{'.'.join(json.dumps(part) if '.' in part else part for part in path)}]"] if path else []) + scalars
    tables = [toml(item, (*path, key)) for key, item in table.items() if isinstance(item, dict)]
    return "\n".join(part.rstrip("\n") for part in ["\n".join(lines), *tables]) + "\n"


@dataclass
class RealNode:
    """The node's namespace, directory and daemons; ``state()`` lets ``down`` run from another shell."""

    workdir: Path
    sysctls: dict[str, str] = field(default_factory=dict)
    daemons: dict[str, int] = field(default_factory=dict)  # name: pid (a process group leader)
    images: dict[str, str] = field(default_factory=dict)
    made_paths: list[str] = field(default_factory=list)
    made_cgroups: list[str] = field(default_factory=list)
    netns_before: list[str] = field(default_factory=list)
    containerd_cache: str = ""  # the kept containerd root's directory (tests/cluster/containerd_cache.py)

    @classmethod
    def from_state(cls, state: dict) -> RealNode:
        return cls(**{**state, "workdir": Path(state["workdir"])})

    @property
    def containerd_socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    def state(self) -> dict:
        return {"workdir": str(self.workdir), "sysctls": self.sysctls, "daemons": self.daemons, "images": self.images,
                "made_paths": self.made_paths, "made_cgroups": self.made_cgroups, "netns_before": self.netns_before,
                "containerd_cache": self.containerd_cache}

    def start(self) -> RealNode:
        self.sysctls = {name: _sysctl_path(name).read_text().strip() for name in HOST_SYSCTLS}
        self.made_paths = [path for path in MACHINE_PATHS if not Path(path).exists()]
        self.netns_before = [line.split()[0] for line in _run(["ip", "netns", "list"]).splitlines() if line]
        self.made_cgroups = [str(path) for path in _cgroup_parents() if not path.exists()]
        self._save()
        try:
            self._network()
            archives = {kind: build() for kind, build in images.BUILDERS.items()}
            self.images = {kind: archive_image_name(archive) for kind, archive in archives.items()}
            self._containerd()
            self._control_plane()
            self._dns()
            self._node_daemons()
            for kind in archives:
                self.image(kind)
        except BaseException:
            self.stop()
            STATE.unlink(missing_ok=True)
            raise
        return self

    def _network(self) -> None:
        _run(["ip", "netns", "add", NETNS])
        _run(["ip", "-n", NETNS, "link", "set", "lo", "up"])
        # made before anything starts: the API server will listen on this address for pods
        _run(["ip", "-n", NETNS, "link", "add", BRIDGE, "type", "bridge"])
        _run(["ip", "-n", NETNS, "addr", "add", f"{BRIDGE_ADDRESS}/24", "dev", BRIDGE])
        _run(["ip", "-n", NETNS, "link", "set", BRIDGE, "up"])
        # pod -> ClusterIP -> pod goes through the namespace's stack (per-namespace sysctl)
        _run(in_netns(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]))
        # Clients in the namespace itself reach cluster IPs too (kube-proxy's OUTPUT rules rewrite
        # them; the kernel first needs a route). It points at the bridge: nothing leaves the namespace.
        _run(["ip", "-n", NETNS, "route", "add", SERVICE_RANGE, "dev", BRIDGE])

    def _containerd(self) -> None:
        directory = self.workdir / "containerd"
        cni = self.workdir / "cni"
        write_cni_config(cni, BRIDGE, POD_SUBNET)
        cache = containerd_cache.current()
        self.containerd_cache = str(cache.directory)
        self._save()  # before the root is opened: a start killed from here on closes it at its teardown
        self._kept_root().open(directory / "clean", current_images())
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.toml").write_text(containerd_config(self.images["pause"], cni, cache.root, directory))
        self._daemon("containerd", ["containerd", "--config", str(directory / "config.toml")])
        self._wait_cri_ready()

    def _control_plane(self) -> None:
        """etcd on the namespace's loopback and kube-apiserver on all its addresses: 127.0.0.1 for
        clients run in the namespace, the bridge address for pods (and kubelet client certs)."""
        pki = self.workdir / "pki"
        _certificates(pki)
        apiserver = cached_apiserver()
        if apiserver is None:
            raise RuntimeError("no cached kube-apiserver/etcd: run bash scripts/build-apiserver.sh")
        self._daemon("etcd", ["etcd", "--data-dir", str(self.workdir / "etcd"),
                              "--listen-client-urls", "http://127.0.0.1:2379",
                              "--advertise-client-urls", "http://127.0.0.1:2379",
                              "--listen-peer-urls", "http://127.0.0.1:2380"])
        self._daemon("kube-apiserver", [
            str(apiserver), "--etcd-servers=http://127.0.0.1:2379", "--bind-address=0.0.0.0",
            f"--advertise-address={BRIDGE_ADDRESS}", f"--secure-port={API_PORT}", "--insecure-port=0",
            f"--client-ca-file={pki / 'ca.crt'}", f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",  # no DNS name for the node: its bridge address
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}"])
        self._write_kubeconfig(self.kubeconfig, "admin")
        self._wait_until(in_netns(["kubectl", "--kubeconfig", str(self.kubeconfig), "get", "--raw", "/readyz"]),
                         "kube-apiserver did not become ready", self.workdir / "kube-apiserver.log")

    def _dns(self) -> None:
        """dnsmasq on the bridge address (the kubelet's clusterDNS) serving one hosts file that
        tests/cluster/dns.py keeps in step with Services and Endpoints; nothing is forwarded
        outside (--no-resolv): names outside cluster.local simply do not resolve."""
        directory = self.workdir / "dns"
        directory.mkdir()
        hosts = directory / "hosts"
        hosts.write_text("")
        dnsmasq = self._daemon("dnsmasq", [
            "dnsmasq", "--keep-in-foreground", "--log-facility=-", "--pid-file=", "--user=root", "--group=root",
            "--no-resolv", "--no-hosts", "--bind-interfaces", f"--listen-address={BRIDGE_ADDRESS}",
            "--local=/cluster.local/", f"--addn-hosts={hosts}"])
        self._daemon("dns-poller", [sys.executable, "-m", "tests.cluster.dns", str(self.kubeconfig), str(hosts),
                                    str(dnsmasq)])
        deadline = time.monotonic() + READY_TIMEOUT_S
        while KUBERNETES_SERVICE_IP not in hosts.read_text():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no DNS record for the kubernetes Service:\n{self._log_tail('dns-poller')}")
            time.sleep(0.2)

    def _log_tail(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]

    def _write_kubeconfig(self, path: Path, certificate: str) -> None:
        write_kubeconfig(path, self.workdir / "pki", certificate, f"https://127.0.0.1:{API_PORT}")

    def _controller_manager_argv(self, grace_period: str) -> list[str]:
        pki = self.workdir / "pki"
        return [str(NODE_BINARIES / "kube-controller-manager"), f"--kubeconfig={self.kubeconfig}", "--leader-elect=false",
                "--use-service-account-credentials", f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}", "--port=0", f"--node-monitor-grace-period={grace_period}"]

    @contextlib.contextmanager
    def node_monitor_grace_period(self, grace_period: str) -> Iterator[None]:
        """kube-controller-manager restarted with another ``--node-monitor-grace-period`` (upstream's default is 40s;
        this node's NODE_MONITOR_GRACE_PERIOD), and again with the node's own afterwards; nothing when it is the
        same."""
        if grace_period == NODE_MONITOR_GRACE_PERIOD:
            yield
            return
        self._restart_controller_manager(grace_period)
        try:
            yield
        finally:
            self._restart_controller_manager(NODE_MONITOR_GRACE_PERIOD)

    def _restart_controller_manager(self, grace_period: str) -> None:
        pid = self.daemons["kube-controller-manager"]
        _signal_group(pid, signal.SIGKILL)  # it holds nothing: its state is the API server's
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:  # its port is free once it is gone (or a zombie)
            time.sleep(0.05)
        self._daemon("kube-controller-manager", self._controller_manager_argv(grace_period))

    def _node_daemons(self) -> None:
        """kube-scheduler and kube-controller-manager (admin credentials, no leader election) and the
        kubelet (its own node certificate, so the Node authorizer and NodeRestriction apply)."""
        pki = self.workdir / "pki"
        self._daemon("kube-scheduler", [str(NODE_BINARIES / "kube-scheduler"), f"--kubeconfig={self.kubeconfig}",
                                        "--leader-elect=false", "--port=0"])
        self._daemon("kube-controller-manager", self._controller_manager_argv(NODE_MONITOR_GRACE_PERIOD))
        kubelet_dir = self.workdir / "kubelet"
        kubelet_dir.mkdir()
        self._write_kubeconfig(kubelet_dir / "kubeconfig", "node")
        write_kubelet_config(kubelet_dir, pki, "kubelet", BRIDGE_ADDRESS)
        self._daemon("kube-proxy", kube_proxy_argv(self.kubeconfig, NODE_NAME))
        self._daemon("kubelet", kubelet_argv(kubelet_dir, self.containerd_socket, NODE_NAME, BRIDGE_ADDRESS))
        ready = ["kubectl", "--kubeconfig", str(self.kubeconfig), "wait", "--for=condition=Ready",
                 f"node/{NODE_NAME}", "--timeout=5s"]
        self._wait_until(in_netns(ready), "the kubelet's node did not become Ready", self.workdir / "kubelet.log")

    def image(self, kind: str) -> str:
        """The name of ``kind``'s current image (tests/cluster/images.py), imported into containerd if
        the node lacks it: the controller's changes with every edit of trainctl/, and a node started
        by hand may be older than the tree."""
        with outside():
            archive = images.ALL_BUILDERS[kind]()
        name = archive_image_name(archive)
        ctr = in_netns(["ctr", "-a", str(self.containerd_socket), "-n", "k8s.io", "images"])
        if name not in _run([*ctr, "ls", "-q"]).split():
            with self._kept_root().importing():
                _run([*ctr, "import", str(archive)])
        self.images[kind] = name
        return name

    @property
    def kubeconfig(self) -> Path:
        """Admin credentials; the server address is the namespace's loopback (clients run in it)."""
        return self.workdir / "kubeconfig"

    def _daemon(self, name: str, argv: list[str]) -> int:
        """Start ``argv`` in the node's namespace, in a session of its own, logging to NAME.log.
        nsenter without --fork execs the command, so the pid is the daemon's own."""
        with open(self.workdir / f"{name}.log", "wb") as log:
            process = subprocess.Popen(in_netns(argv), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                       cwd=REPO)
        self.daemons[name] = process.pid
        self._save()
        return process.pid

    def _save(self) -> None:
        """What ``down`` needs, kept current while starting: a start killed half-way is cleaned up too."""
        STATE.write_text(json.dumps(self.state()))

    def _wait_until(self, probe: list[str], failure: str, log: Path) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if subprocess.run(probe, capture_output=True).returncode == 0:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{failure}:\n{log.read_text(errors='replace')[-2000:]}")

    def _wait_cri_ready(self) -> None:
        wait_cri_ready(self.containerd_socket, self.workdir / "containerd.log")

    def alive(self) -> bool:
        return bool(self.daemons) and all(Path(f"/proc/{pid}").exists() for pid in self.daemons.values())

    def kubectl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(in_netns(["kubectl", "--kubeconfig", str(self.kubeconfig), *args]),
                              capture_output=True, text=True, timeout=timeout)

    def stop(self) -> None:
        every_step(self._drain_pods, self._stop_processes, self._close_kept_root, self._restore_machine)

    def _drain_pods(self) -> None:
        """Delete every pod through the API while the kubelet still runs: it stops the containers and
        CNI tears each pod's network down properly. The scheduler goes first, so that no controller's
        replacement pod lands on the node meanwhile; only pods bound to the node are waited for (a
        replacement the dying controller-manager made stays Pending, and nothing of it runs)."""
        if not all(Path(f"/proc/{self.daemons.get(name, 0)}").exists() for name in ("kube-apiserver", "kubelet")):
            return
        for name in ("kube-scheduler", "kube-controller-manager"):
            _signal_group(self.daemons[name], signal.SIGTERM)
        self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--wait=false")
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        on_node = ("get", "pods", "-A", "--field-selector", f"spec.nodeName={NODE_NAME}", "-o", "name")
        while time.monotonic() < deadline and self.kubectl(*on_node).stdout.strip():
            time.sleep(0.5)
        # its iptables rules go with the namespace anyway; --cleanup also empties the ipvs and ipset
        # state kube-proxy may have made (ipset comes from build-node.sh's packages)
        _run(in_netns([str(NODE_BINARIES / "kube-proxy"), "--cleanup"]))

    def _stop_processes(self) -> None:
        # Only containerd keeps something (its root, for the next start) and gets a graceful stop. The others hold
        # nothing a throwaway node needs (etcd's data goes with the node's directory, the pods are drained): KILL,
        # as kube-apiserver and etcd sometimes ignore TERM, which cost the teardown its 10 s wait.
        for name, pid in self.daemons.items():
            _signal_group(pid, signal.SIGTERM if name == "containerd" else signal.SIGKILL)
        kill_namespace_processes(NETNS)
        # Containers live in their pods' own namespaces, not the node's: kill them by cgroup, and
        # remove the pod network namespaces CNI made (no kubelet is left to tear them down).
        kill_cgroup_processes([Path(cgroup) for cgroup in self.made_cgroups])
        for name in set(_run(["ip", "netns", "list"]).split()) - set(self.netns_before):
            if name.startswith("cni-"):
                _run(["ip", "netns", "delete", name])

    def _kept_root(self) -> containerd_cache.ContainerdCache:
        return containerd_cache.ContainerdCache(Path(self.containerd_cache), launch=in_netns)

    def _close_kept_root(self) -> None:
        """Every container, task, lease and sandbox of this session out of the kept containerd root, which
        is sealed for the next start (tests/cluster/containerd_cache.py); the node's processes are gone."""
        if not self.containerd_cache or NETNS not in _run(["ip", "netns", "list"]).split():
            return  # not started so far (an unsealed root is discarded by the next start)
        unmount_under(self.workdir)  # the containers' root filesystems, on the kept root's snapshots
        self._kept_root().close(self.workdir / "containerd-close", current_images())

    def _restore_machine(self) -> None:
        unmount_under(self.workdir)
        if NETNS in _run(["ip", "netns", "list"]).split():
            _run(["ip", "netns", "delete", NETNS])
        for name, value in self.sysctls.items():
            if _sysctl_path(name).read_text().strip() != value:
                _sysctl_path(name).write_text(value)
        subprocess.run(["rm", "-rf", str(self.workdir)], check=True)
        for cgroup in map(Path, self.made_cgroups):  # empty once every container has exited
            if cgroup.exists():
                subprocess.run(["find", str(cgroup), "-depth", "-type", "d", "-delete"], check=True)
        for path in set(self.made_paths) & set(mount_points()):
            subprocess.run(["umount", path], check=True)
        subprocess.run(["rm", "-rf", *self.made_paths], check=True)


def cgroup_hierarchies() -> list[Path]:
    return [path for path in Path("/sys/fs/cgroup").iterdir() if path.is_dir() and not path.is_symlink()]


def every_step(*steps) -> None:
    """A node's teardown: every step runs even if one before it failed (a half-stopped node is the worst
    outcome); the first failure is raised at the end."""
    errors = []
    for step in steps:
        try:
            step()
        except (OSError, subprocess.SubprocessError, images.SetupStepError) as error:
            errors.append(error)
    if errors:
        raise errors[0]


def _cgroup_parents() -> list[Path]:
    return [hierarchy / parent for hierarchy in cgroup_hierarchies() for parent in CGROUP_PARENTS]


def wait_cri_ready(socket: Path, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    plugins = ["ctr", "-a", str(socket), "plugins", "ls"]
    while time.monotonic() < deadline:
        listing = subprocess.run(plugins, capture_output=True, text=True).stdout
        if any(line.split()[:2] == ["io.containerd.grpc.v1", "cri"] and line.split()[-1] == "ok"
               for line in listing.splitlines()):
            return
        time.sleep(0.5)
    raise RuntimeError(f"containerd's CRI plugin did not start:\n{log.read_text(errors='replace')[-2000:]}")


def _certificates(pki: Path) -> None:
    """A CA and the certificates the control plane needs, by openssl (EC keys: fast to make)."""
    pki.mkdir(parents=True)
    _run(["openssl", "req", "-x509", *EC_KEY, "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.crt"),
          "-days", "7", "-subj", "/CN=trainctl-real-node-ca"])
    service_names = ["kubernetes", "kubernetes.default", "kubernetes.default.svc",
                     "kubernetes.default.svc.cluster.local"]
    serving = ",".join([f"IP:{ip}" for ip in ("127.0.0.1", BRIDGE_ADDRESS, KUBERNETES_SERVICE_IP)]
                       + [f"DNS:{name}" for name in service_names])
    leaves = {  # name: (subject, extensions)
        "apiserver": ("/CN=kube-apiserver", f"subjectAltName={serving}\nextendedKeyUsage=serverAuth"),
        "kubelet-client": ("/O=system:masters/CN=kube-apiserver-kubelet-client", "extendedKeyUsage=clientAuth"),
        "admin": ("/O=system:masters/CN=trainctl-admin", "extendedKeyUsage=clientAuth"),
        "node": (f"/O=system:nodes/CN=system:node:{NODE_NAME}", "extendedKeyUsage=clientAuth"),
        "kubelet": (f"/CN={NODE_NAME}", f"subjectAltName=IP:{BRIDGE_ADDRESS}\nextendedKeyUsage=serverAuth"),
    }
    for name, (subject, extensions) in leaves.items():
        issue_certificate(pki, name, subject, extensions)
    # service account tokens: RSA, the algorithm every client library verifies
    _run(["openssl", "genrsa", "-out", str(pki / "sa.key"), "2048"])
    _run(["openssl", "rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub")])


def issue_certificate(pki: Path, name: str, subject: str, extensions: str) -> None:
    """``pki/NAME.crt`` and ``.key``, signed by the node's CA in ``pki`` (EC keys: fast to make)."""
    (pki / f"{name}.ext").write_text(extensions + "\n")
    _run(["openssl", "req", "-new", *EC_KEY, "-keyout", str(pki / f"{name}.key"), "-out", str(pki / f"{name}.csr"),
          "-subj", subject])
    _run(["openssl", "x509", "-req", "-in", str(pki / f"{name}.csr"), "-CA", str(pki / "ca.crt"),
          "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-days", "7", "-out", str(pki / f"{name}.crt"),
          "-extfile", str(pki / f"{name}.ext")])


def write_kubeconfig(path: Path, pki: Path, certificate: str, server: str) -> None:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "node",
        "clusters": [{"name": "node", "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": certificate, "user": {"client-certificate": str(pki / f"{certificate}.crt"),
                                                 "client-key": str(pki / f"{certificate}.key")}}],
        "contexts": [{"name": "node", "context": {"cluster": "node", "user": certificate}}],
    }, indent=2))


def write_cni_config(directory: Path, bridge: str, subnet: str) -> None:
    """A bridge + portmap CNI config in ``directory``, IP masquerading off, leases in ``directory/leases``."""
    directory.mkdir(parents=True)
    (directory / "10-trainctl.conflist").write_text(json.dumps({
        "cniVersion": "0.4.0", "name": "trainctl", "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": False,
             # leases in the node's directory, not the machine's /var/lib/cni
             "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]], "dataDir": str(directory / "leases"),
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ]}, indent=2))


def containerd_config(pause_image: str, cni: Path, root: Path, directory: Path) -> str:
    """containerd's config: ``root`` (a kept one), its state and socket in ``directory``, the CRI settings."""
    cri = {
        "sandbox_image": pause_image,
        # the VM lacks CAP_SYS_RESOURCE: a negative oom_score_adj would fail every sandbox
        "restrict_oom_score_adj": True,
        "cni": {"bin_dir": "/usr/lib/cni", "conf_dir": str(cni)},
        "containerd": {"runtimes": {"runc": {"runtime_type": "io.containerd.runc.v2",
                                             "options": {"SystemdCgroup": False}}}},
    }
    return toml({"version": 2, "root": str(root), "state": str(directory / "state"),
                 "grpc": {"address": str(directory / "containerd.sock")},
                 "plugins": {"io.containerd.grpc.v1.cri": cri}})


def write_kubelet_config(directory: Path, pki: Path, certificate: str, address: str, **more) -> None:
    """The kubelet's config.json and resolv.conf in ``directory``: serving on ``address`` with ``pki/CERTIFICATE``,
    the cluster's DNS on the first node's bridge address; ``more``: other fields (a second node's cgroupRoot)."""
    (directory / "resolv.conf").write_text(f"nameserver {BRIDGE_ADDRESS}\n")
    (directory / "config.json").write_text(json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs", "failSwapOn": False, "address": address,
        "tlsCertFile": str(pki / f"{certificate}.crt"), "tlsPrivateKeyFile": str(pki / f"{certificate}.key"),
        "authentication": {"x509": {"clientCAFile": str(pki / "ca.crt")}, "webhook": {"enabled": True},
                           "anonymous": {"enabled": False}},
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [BRIDGE_ADDRESS], "clusterDomain": "cluster.local",
        "resolvConf": str(directory / "resolv.conf"),
        # a test machine's disk is often fuller than the defaults allow; images are never pulled again
        "evictionHard": {"memory.available": "1%", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "1s",  # Ready in about a second instead of 10-23
        **more,
    }, indent=2))


def kubelet_argv(directory: Path, containerd_socket: Path, node_name: str, node_ip: str) -> list[str]:
    return [str(NODE_BINARIES / "kubelet"), f"--config={directory / 'config.json'}",
            f"--kubeconfig={directory / 'kubeconfig'}", f"--root-dir={directory / 'root'}",
            "--container-runtime=remote", f"--container-runtime-endpoint=unix://{containerd_socket}",
            f"--hostname-override={node_name}", f"--node-ip={node_ip}"]


def kube_proxy_argv(kubeconfig: Path, node_name: str) -> list[str]:
    """ClusterIP Services (the in-cluster controller reaches kubernetes.default.svc through one).
    --masquerade-all: without br_netfilter a reply between two pods on the bridge skips the
    namespace's conntrack; SNAT makes it come back through it. --cluster-cidr: every node's pod subnet.
    The conntrack values of 0 leave the machine-wide nf_conntrack sysctls as they are."""
    return [str(NODE_BINARIES / "kube-proxy"), f"--kubeconfig={kubeconfig}", f"--hostname-override={node_name}",
            "--proxy-mode=iptables", f"--cluster-cidr={CLUSTER_CIDR}", "--masquerade-all",
            "--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0",
            "--conntrack-tcp-timeout-close-wait=0", "--metrics-bind-address=127.0.0.1:10249",
            "--healthz-bind-address=127.0.0.1:10256"]


def archive_image_name(archive: Path) -> str:
    kind, key = archive.name.removesuffix(".oci.tar").rsplit("-", 1)
    return images.image_name(kind, key)


def current_images() -> set[str]:
    """The names of the image archives cached now (one per kind): the images a kept containerd root keeps."""
    return {archive_image_name(archive) for kind in images.ALL_BUILDERS for archive in images.archives_of(kind)}


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


def kill_namespace_processes(netns: str, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGKILL)) -> None:
    """TERM, then KILL, every process left in a node's namespace (containerd's shims included)."""
    listing = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout
    pids = [int(pid) for pid in listing.split()]
    for signum in signals:
        for pid in pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        # alive, not /proc/PID: a daemon this process started stays a zombie until reaped, and was waited for
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if alive(pid)]
            time.sleep(0.05)


def kill_cgroup_processes(cgroups: list[Path]) -> None:
    """SIGKILL every process in these cgroups (all controllers' copies) until none is left."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = {int(pid) for cgroup in cgroups if cgroup.exists()
                for procs in cgroup.rglob("cgroup.procs") for pid in procs.read_text().split()}
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)


@contextlib.contextmanager
def _switched(namespace_file: str) -> Iterator[None]:
    """The calling thread in another network namespace until the block ends (setns(2) on a network
    namespace is per thread): sockets it opens, threads and processes it starts meanwhile live there."""
    libc = ctypes.CDLL(None, use_errno=True)

    def enter(fd: int) -> None:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {namespace_file} (root needed)")

    with open("/proc/thread-self/ns/net") as home, open(namespace_file) as target:
        enter(target.fileno())
        try:
            yield
        finally:
            enter(home.fileno())


def entered() -> contextlib.AbstractContextManager[None]:
    """Inside the node's network namespace, as a client of the node: the API server listens on its
    127.0.0.1 and pods are reachable there."""
    return _switched(f"/run/netns/{NETNS}")


def outside() -> contextlib.AbstractContextManager[None]:
    """In the machine's own network namespace (the one this module was imported in), e.g. to build
    an image whose pip needs the package index while a test runs inside the node's namespace."""
    return _switched(MACHINE_NETNS)


def attached() -> RealNode | None:
    """The node ``up`` started (from this or another shell), if its daemons still run."""
    if not STATE.exists():
        return None
    state = json.loads(STATE.read_text())
    node = RealNode.from_state(state)
    return node if node.alive() else None


def wait_for_turn(timeout: float = TURN_WAIT_S) -> None:
    """Block until no other test session on this machine has a real node (bounded: a session stuck for longer
    fails with the lock's path); a node started by hand holds no turn and is used as it is."""
    global _turn
    if _turn is not None:
        return
    lock = TURN_LOCK.open("w")
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                raise RuntimeError(f"another test session kept its real node for {timeout:.0f} s ({TURN_LOCK})")
            time.sleep(1)
    _turn = lock


def up(detached: bool = False) -> RealNode:
    """Start the node; unless ``detached`` (``python -m tests.cluster up --real``) it goes down with this process
    however it ends: teardown, exit, SIGINT, SIGTERM or SIGHUP (tests.cluster.server.stop_when_interrupted), and
    killed or cut short, by its reaper, which holds this session's turn until it is done."""
    global _reaper
    if STATE.exists():
        if attached() is not None:
            raise RuntimeError(f"a real node is already up ({STATE}): run python -m tests.cluster down --real first")
        down()  # left behind by a process that died: clean up before starting again
    if not detached:
        stop_when_interrupted()
        atexit.register(down)
        _reaper = Reaper(*([_turn.fileno()] if _turn else []))
        _reaper.add([sys.executable, "-m", "tests.cluster", "down", "--real"])
    return RealNode(Path(tempfile.mkdtemp(prefix="trainctl-real-node-"))).start()


def down() -> None:
    """Stop the node (and a second node joined to it) from its state file; then this process's reaper has
    nothing left to do."""
    global _reaper
    from tests.cluster import second_node  # a second node joined to this one goes first

    second_node.down()
    if STATE.exists():
        RealNode.from_state(json.loads(STATE.read_text())).stop()
        STATE.unlink()
    if _reaper is not None:
        _reaper.release()
        _reaper = None
