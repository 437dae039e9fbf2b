"""Developer commands for the test API server.

    python -m tests.cluster build    # build/cache kube-apiserver (scripts/build-apiserver.sh)
    python -m tests.cluster up       # start etcd + kube-apiserver, print the KUBECONFIG line
    python -m tests.cluster status
    python -m tests.cluster down     # stop what `up` started (from any shell)

    python -m tests.cluster build --real  # node binaries (scripts/build-node.sh) and the three images
    python -m tests.cluster up --real     # as root: a real node (tests/cluster/realnode.py); prints
    python -m tests.cluster down --real   # KUBECONFIG=, NETNS=, CONTAINERD=; run clients in its network
                                          # namespace: nsenter --net=/run/netns/NETNS kubectl get pods -A
The node's containerd root (its imported images, nothing else) stays in ~/.cache/trainctl/node/containerd/
after `down --real` (tests/cluster/containerd_cache.py); remove that directory to start the next node cold.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.cluster.server import TestCluster, cached_apiserver

STATE = Path(tempfile.gettempdir()) / "trainctl-test-cluster.json"
REPO = Path(__file__).resolve().parents[2]


def up() -> int:
    if STATE.exists():
        print(f"already up: export KUBECONFIG={json.loads(STATE.read_text())['kubeconfig']}")
        return 0
    binary = cached_apiserver()
    if binary is None:
        print("no cached kube-apiserver: run python -m tests.cluster build", file=sys.stderr)
        return 2
    cluster = TestCluster(Path(tempfile.mkdtemp(prefix="trainctl-cluster-")), binary).start(detached=True)
    STATE.write_text(json.dumps({"pids": [p.pid for p in cluster.processes], "workdir": str(cluster.workdir),
                                 "kubeconfig": str(cluster.kubeconfig("admin")), "url": cluster.url}))
    print(f"kube-apiserver at {cluster.url}\nexport KUBECONFIG={cluster.kubeconfig('admin')}")
    return 0


def down() -> int:
    if not STATE.exists():
        print("not up")
        return 0
    for pid in json.loads(STATE.read_text())["pids"]:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    STATE.unlink()
    print("stopped")
    return 0


def status() -> int:
    print(STATE.read_text() if STATE.exists() else "not up")
    return 0


def build() -> int:
    return subprocess.run(["bash", str(REPO / "scripts" / "build-apiserver.sh")]).returncode


def build_real() -> int:
    from tests.cluster import images

    built = subprocess.run(["bash", str(REPO / "scripts" / "build-node.sh")]).returncode
    return built or images.main([])


def up_real() -> int:
    from tests.cluster import images, realnode

    try:
        node = realnode.up(detached=True)
    except (images.SetupStepError, RuntimeError) as error:
        print(f"real node: {error}", file=sys.stderr)
        return 2
    print(f"KUBECONFIG={node.kubeconfig}\nNETNS={realnode.NETNS}\nCONTAINERD={node.containerd_socket}")
    print(f"# e.g. nsenter --net=/run/netns/{realnode.NETNS} env KUBECONFIG={node.kubeconfig} trainctl list -A",
          file=sys.stderr)
    return 0


def down_real() -> int:
    from tests.cluster import realnode

    realnode.down()
    print("stopped")
    return 0


def main() -> int:
    commands = {("up",): up, ("down",): down, ("status",): status, ("build",): build,
                ("build", "--real"): build_real, ("up", "--real"): up_real, ("down", "--real"): down_real}
    command = commands.get(tuple(sys.argv[1:]))
    if command is None:
        print(__doc__, file=sys.stderr)
        return 2
    return command()


if __name__ == "__main__":
    sys.exit(main())
