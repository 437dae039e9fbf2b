"""Start etcd and kube-apiserver on free loopback ports; stop them cleanly.

The binary comes from scripts/build-apiserver.sh (cached). Users are static tokens:
``admin`` is in system:masters, ``alice`` and ``bob`` have no rights until a test binds
them, which is how RBAC is tested.

The servers run in sessions of their own (a terminal's Ctrl-C reaches only the process that
started them), so that process stops them however it ends: by its own ``finally`` or fixture
teardown, at exit, and on SIGINT, SIGTERM or SIGHUP, which :func:`stop_when_interrupted` turns into
KeyboardInterrupt; killed, or its teardown cut short, its reaper stops them (tests/cluster/reaper.py).
Only ``python -m tests.cluster up`` leaves them running (``start(detached=True)``), for ``down`` to stop.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.reaper import Reaper

SOURCE_VERSION = "1.20.5+really1.20.2-1.1+deb12u1"
USERS = {"admin": "system:masters", "alice": "", "bob": ""}
READY_TIMEOUT_S = 60
# What stop_when_interrupted turns into KeyboardInterrupt; the first that came ends the process, later ones are
# ignored (they would cut short the teardown the first one started: pytest-xdist's worker sends itself a SIGINT
# 5 s into a teardown after Ctrl-C)
ENDINGS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
REDELIVERY_S = 0.2
_ended = threading.Event()
_redelivering = False


def cached_apiserver() -> Path | None:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    binary = Path(os.environ.get("TRAINCTL_APISERVER_CACHE") or cache / "trainctl" / "apiserver" / SOURCE_VERSION)
    binary = binary / "kube-apiserver"
    return binary if binary.is_file() and shutil.which("etcd") else None


def stop_when_interrupted() -> None:
    """SIGINT, SIGTERM and SIGHUP end this process as Ctrl-C does, with KeyboardInterrupt in the main thread, so
    that every ``finally``, pytest teardown and atexit hook runs (Python's default ends it on the spot for the
    last two); only the first of them (ENDINGS). A handler someone else installed is left alone; so is a process
    whose main thread is not this one.

    Python runs a signal's handler in the main thread, between two bytecodes. A signal that lands after the last
    of them and before a blocking call starts (``time.sleep``, a read), or on another thread, leaves the main
    thread blocked with the handler pending: ``time.sleep(600)`` slept on with the cluster up (the SIGHUP and
    SIGINT cases of tests/k8s/test_cluster_cleanup.py, 4 times in 1,500 tries). So the signal also wakes a thread
    (``signal.set_wakeup_fd``) that sends it to the main thread again until its handler has run."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in ENDINGS:
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(signum, _interrupt)
    _redeliver_to_main_thread()


def _interrupt(signum: int, frame) -> None:
    if not _ended.is_set():
        _ended.set()
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _redeliver_to_main_thread() -> None:
    global _redelivering
    if _redelivering:
        return
    wakeups, write = os.pipe()
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    if previous != -1:  # someone else's (an asyncio loop's): theirs stays
        signal.set_wakeup_fd(previous)
        os.close(wakeups)
        os.close(write)
        return
    _redelivering = True
    threading.Thread(target=_redeliver, args=(wakeups, threading.main_thread().ident), daemon=True,
                     name="signal redelivery").start()


def _redeliver(wakeups: int, main_thread: int) -> None:
    """Each ending's number, written by Python's C-level handler wherever it ran, is sent to the main thread until
    the Python-level one ran: a blocking call there fails with EINTR and runs it."""
    while True:
        for signum in set(os.read(wakeups, 64)) & set(ENDINGS):
            # a signal whose handler is another's (pytest's, execnet's) is theirs to act on, not ours to repeat
            while signal.getsignal(signum) is _interrupt and not _ended.wait(REDELIVERY_S):
                signal.pthread_kill(main_thread, signum)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class TestCluster:
    workdir: Path
    apiserver: Path
    tokens: dict[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen] = field(default_factory=list)
    url: str = ""
    reaper: Reaper | None = None  # kills the servers if this process ends without stop()

    def start(self, detached: bool = False) -> TestCluster:
        """Start etcd and kube-apiserver; unless ``detached``, they stop with this process however it ends."""
        if not detached:
            stop_when_interrupted()
            atexit.register(self.stop)
            self.reaper = Reaper()
        self.workdir.mkdir(parents=True, exist_ok=True)
        etcd_port, peer_port, secure_port = free_port(), free_port(), free_port()
        self._start("etcd", ["etcd", "--data-dir", str(self.workdir / "etcd"),
                             "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-cluster", f"default=http://127.0.0.1:{peer_port}"])
        self._keys()
        self._start("kube-apiserver", [
            str(self.apiserver), f"--etcd-servers=http://127.0.0.1:{etcd_port}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", f"--secure-port={secure_port}", "--insecure-port=0",
            f"--cert-dir={self.workdir / 'certs'}", "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.workdir / 'sa.pub'}",
            f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.96.0.0/16", "--disable-admission-plugins=ServiceAccount",
            # as OpenShift and hardened clusters run: blockOwnerDeletion needs update on <owner>/finalizers
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement"])
        self.url = f"https://127.0.0.1:{secure_port}"
        self._wait_ready()
        for user in self.tokens:
            self.write_kubeconfig(user)
        return self

    def _start(self, name: str, argv: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")
        self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        if self.reaper:
            self.reaper.add(["kill", "-s", "KILL", "--", f"-{self.processes[-1].pid}"])  # its session's group

    def _keys(self) -> None:
        key, pub = self.workdir / "sa.key", self.workdir / "sa.pub"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
        self.tokens = {user: os.urandom(16).hex() for user in USERS}
        lines = [f'{token},{user},{user},"{USERS[user]}"' if USERS[user] else f"{token},{user},{user}"
                 for user, token in self.tokens.items()]
        (self.workdir / "tokens.csv").write_text("\n".join(lines) + "\n")

    def _wait_ready(self) -> None:
        context = ssl._create_unverified_context()  # the server's own self-signed serving cert, loopback only
        deadline = time.monotonic() + READY_TIMEOUT_S
        request = urllib.request.Request(f"{self.url}/readyz", headers={"Authorization": f"Bearer {self.tokens['admin']}"})
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.processes):
                break
            try:
                if urllib.request.urlopen(request, context=context, timeout=2).read() == b"ok":
                    return
            except OSError:
                time.sleep(0.3)
        self.stop()
        log = (self.workdir / "kube-apiserver.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"kube-apiserver did not become ready:\n{log}")

    def kubeconfig(self, user: str = "admin") -> Path:
        return self.workdir / f"kubeconfig-{user}"

    def write_kubeconfig(self, user: str) -> Path:
        import yaml

        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "insecure-skip-tls-verify": True}}],
            "users": [{"name": user, "user": {"token": self.tokens[user]}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": user, "namespace": "default"}}],
        }
        path = self.kubeconfig(user)
        path.write_text(yaml.safe_dump(config))
        return path

    def api_client(self, user: str = "admin"):
        from kubernetes import config

        return config.new_client_from_config(str(self.kubeconfig(user)))

    def stop(self) -> None:
        """Every process is killed: nothing of a test cluster is kept. kube-apiserver's graceful shutdown waits for
        every open watch to reach its timeout (57 s measured with one informer's watch open); etcd's syncs its
        write-ahead log, which waits as long as the disk is busy (the real node's image writes beside it: the
        suspected cause of a starter that took over 60 s to exit, docs/test-cluster.md, run 30). An idle etcd,
        killed after its API server, ends at once."""
        for process in reversed(self.processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
        if self.reaper:
            self.reaper.release()
            self.reaper = None
