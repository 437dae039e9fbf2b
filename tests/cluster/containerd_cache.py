"""The real node's containerd root kept between test sessions (issue 39): what importing the node's images
produces (the content store and the unpacked overlayfs snapshots) is made once, not on every node start.

The root lives in ``~/.cache/trainctl/node/containerd/<key>/root``; the key is containerd's version and this
module's LAYOUT_VERSION, so another containerd (or another way of keeping the root) starts from an empty one,
and the other keys' directories are removed. Only the images stay: nothing of a session's pods may reach the
next one. containerd itself does the cleaning (``clean``): a second containerd on the same root, with the CRI
plugin off (the CRI plugin would load the old sandboxes into its memory and hand them to the kubelet) and a
fresh state directory (so no task of an earlier one exists), deletes every container (with its snapshot),
every snapshot that is not a committed image layer, every lease and every image not in ``keep`` (the names
of the image archives cached now: a rebuilt image's older version goes), collects the garbage synchronously,
and checks that nothing of the kind is left. That runs at teardown (``close``, every process of the node gone)
and again at the next start (``open``, before the node's containerd opens the root).

A root is trusted only if it is sealed: ``close`` writes SEAL after a clean that succeeded, in a session in
which no import failed or was interrupted (IMPORTING is written before an import and removed after it
succeeded). ``open`` removes the seal before any containerd opens the root, and discards a root without one:
a session whose teardown never ran (killed with SIGKILL, and no ``down --real`` since: a ``down`` closes the
root too), an import killed half-way or ended by a full disk, a clean that failed. The next start is then a
cold one, paying the imports again, never a broken one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.cluster import images

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainctl" / "node" / "containerd"
# Bump when what is kept in the root, or how it is cleaned, changes: every kept root is then started afresh.
LAYOUT_VERSION = 1
SEAL = "sealed"
IMPORTING = "importing"
READY_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
# The CRI plugin's own directories (each sandbox's and container's hostname, resolv.conf, ...): removed
# with the containers they belong to.
CRI_DIRECTORIES = ("io.containerd.grpc.v1.cri/sandboxes", "io.containerd.grpc.v1.cri/containers")


def _containerd_version() -> str:
    return images.run_step("containerd --version", ["containerd", "--version"]).stdout.strip()


def current(node: str = "") -> ContainerdCache:
    """The kept root for this machine's containerd, for the first node or another ``node`` of the cluster
    (``<key>-<node>``: each containerd needs a root of its own); the roots of other keys are removed."""
    key = hashlib.sha256(json.dumps([LAYOUT_VERSION, _containerd_version()]).encode()).hexdigest()[:16]
    if CACHE.exists():
        for other in CACHE.iterdir():
            if other.name.split("-", 1)[0] != key:
                ContainerdCache(other).discard()
    return ContainerdCache(CACHE / "-".join(filter(None, [key, node])))


class ContainerdCache:
    """One kept containerd root. ``launch`` wraps every command line (the real node runs containerd and ctr
    inside its network namespace, so that a teardown's sweep of it ends a cleaning containerd left behind)."""

    def __init__(self, directory: Path, launch: Callable[[list[str]], list[str]] = list) -> None:
        self.directory = directory
        self.launch = launch

    @property
    def root(self) -> Path:
        return self.directory / "root"

    def sealed(self) -> bool:
        return (self.directory / SEAL).exists()

    def open(self, scratch: Path, keep: set[str]) -> bool:
        """Make the root ready for a node's containerd; True if it holds the images of an earlier session.
        A sealed root is unsealed and cleaned again; any other is discarded, as is one whose clean fails."""
        if not self.sealed() or (self.directory / IMPORTING).exists():
            self.discard()
            return False
        (self.directory / SEAL).unlink()
        try:
            self.clean(scratch, keep)
        except (images.SetupStepError, OSError):
            self.discard()
            return False
        return True

    def close(self, scratch: Path, keep: set[str]) -> None:
        """At teardown, no process of the node left: clean the root, and seal it unless an import failed or
        was interrupted. A root that is sealed already (the node never opened it) is left as it is."""
        if self.sealed() or not self.root.exists():
            return
        unmount_under(self.root)  # an unpack's temporary mounts, if one was killed
        self.clean(scratch, keep)
        ingests = self.root / "io.containerd.content.v1.content" / "ingest"
        if not (self.directory / IMPORTING).exists() and not any(ingests.glob("*")):
            (self.directory / SEAL).write_text(f"{_containerd_version()}\n")

    @contextlib.contextmanager
    def importing(self) -> Iterator[None]:
        """Around an import: the marker stays if the import raises or the process dies in it."""
        marker = self.directory / IMPORTING
        self.directory.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"{os.getpid()}\n")
        yield
        marker.unlink()

    def discard(self) -> None:
        unmount_under(self.directory)
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.directory.exists():
            raise images.SetupStepError(f"could not remove {self.directory}: remove it by hand (as root)")

    def clean(self, scratch: Path, keep: set[str]) -> None:
        """Everything but the images in ``keep`` removed from the root, by a containerd of its own."""
        with self.serving(scratch) as ctr:
            for namespace in ctr("namespaces", "ls", "-q").split():
                _clean_namespace(lambda *args, ns=namespace: ctr("-n", ns, *args), keep)
            lease = ctr("leases", "create").split()[0]  # its synchronous removal collects the garbage
            ctr("leases", "rm", "--sync", lease)
            for namespace in ctr("namespaces", "ls", "-q").split():
                _check_clean(namespace, lambda *args, ns=namespace: ctr("-n", ns, *args))
        for directory in CRI_DIRECTORIES:
            shutil.rmtree(self.root / directory, ignore_errors=True)

    @contextlib.contextmanager
    def serving(self, scratch: Path) -> Iterator[Callable[..., str]]:
        """A containerd on the root without the CRI plugin, with a fresh state directory under ``scratch``;
        yields ``ctr(*args)`` (its stdout), and stops it afterwards (an error if it does not stop cleanly)."""
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        socket = scratch / "containerd.sock"
        (scratch / "config.toml").write_text("\n".join([
            "version = 2", f"root = {json.dumps(str(self.root))}", f"state = {json.dumps(str(scratch / 'state'))}",
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]', "[grpc]", f"address = {json.dumps(str(socket))}", ""]))
        self.root.mkdir(parents=True, exist_ok=True)
        with open(scratch / "containerd.log", "wb") as log:
            daemon = subprocess.Popen(self.launch(["containerd", "--config", str(scratch / "config.toml")]),
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def ctr(*args: str) -> str:
            return images.run_step(f"ctr {' '.join(args[:3])}",
                                   self.launch(["ctr", "-a", str(socket), *args])).stdout

        try:
            self._wait_ready(daemon, socket, scratch / "containerd.log")
            yield ctr
        finally:
            _stop(daemon)
        shutil.rmtree(scratch, ignore_errors=True)

    def _wait_ready(self, daemon: subprocess.Popen, socket: Path, log: Path) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        probe = self.launch(["ctr", "-a", str(socket), "version"])
        while subprocess.run(probe, capture_output=True).returncode != 0:
            if daemon.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-1500:]
                raise images.SetupStepError(f"containerd on the kept root {self.root} did not start: {tail}")
            time.sleep(0.2)


def _stop(daemon: subprocess.Popen) -> None:
    """SIGTERM (containerd closes its databases), SIGKILL after STOP_TIMEOUT_S; only a clean exit is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(daemon.pid, signal.SIGTERM)
    try:
        code = daemon.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait()
        raise images.SetupStepError(f"containerd on a kept root did not stop in {STOP_TIMEOUT_S} s") from None
    if code not in (0, -signal.SIGTERM):
        raise images.SetupStepError(f"containerd on a kept root exited {code}")


def _snapshots(ctr: Callable[..., str]) -> list[tuple[str, str]]:
    """(key, kind) of every snapshot: ``ctr snapshots ls`` prints KEY PARENT KIND (PARENT may be empty)."""
    return [(line.split()[0], line.split()[-1]) for line in ctr("snapshots", "ls").splitlines()[1:] if line.strip()]


def _broken_images(ctr: Callable[..., str]) -> list[str]:
    """Images whose content is not all there or not unpacked (``ctr images check``: ... STATUS ... UNPACKED)."""
    return [line.split()[0] for line in ctr("images", "check").splitlines()[1:]
            if line.strip() and ("complete" not in line.split() or line.split()[-1] != "true")]


def _clean_namespace(ctr: Callable[..., str], keep: set[str]) -> None:
    containers = ctr("containers", "ls", "-q").split()
    if containers:
        ctr("containers", "rm", *containers)  # with their snapshots
    leftovers = [key for key, kind in _snapshots(ctr) if kind != "Committed"]
    if leftovers:
        ctr("snapshots", "rm", *leftovers)
    leases = ctr("leases", "ls", "-q").split()
    if leases:
        ctr("leases", "rm", *leases)
    unwanted = set(_broken_images(ctr)) | (set(ctr("images", "ls", "-q").split()) - keep)
    if unwanted:
        ctr("images", "rm", *sorted(unwanted))


def _check_clean(namespace: str, ctr: Callable[..., str]) -> None:
    left = {"containers": ctr("containers", "ls", "-q").split(), "leases": ctr("leases", "ls", "-q").split(),
            "snapshots": [key for key, kind in _snapshots(ctr) if kind != "Committed"]}
    if any(left.values()):
        raise images.SetupStepError(f"containerd namespace {namespace} not clean after cleaning: {left}")


def mount_points() -> list[str]:
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]


def unmount_under(directory: Path) -> None:
    """Unmount everything mounted below ``directory`` (containerd's snapshots), deepest first."""
    for mount_point in sorted((m for m in mount_points() if m.startswith(f"{directory}/")), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", mount_point], check=True)
