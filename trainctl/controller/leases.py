"""When each node's kubelet was last heard: its Lease in ``kube-node-lease`` (trainctl/core/nodes.py judges by it).

A kubelet renews its node's Lease every quarter of the lease's duration (10 s of 40 by default); the node controller
calls the node NotReady only after its grace period (40 s upstream). The controller watches the Leases (a Role in
``kube-node-lease``: get, list, watch, nothing more) and keeps, per node, the moment it saw the renewal time change
(its own clock: a node's clock may be off), or the renewal time itself for a Lease first seen at start-up. A thread
looks every :data:`LOOK_S` seconds for nodes that went silent (two renewals missed) or spoke again, and reconciles
every job with a pod there: the core decides, from the job's own evidence, whether it lost that node.

Without the permission (an install made before it was granted) or without Leases (a cluster with no kubelets) nothing
is known of them, and a node's Ready condition alone decides, as before.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta, timezone

from trainctl.controller.informer import Informer
from trainctl.core.nodes import DEFAULT_LEASE_S, SILENT_LEASE_FRACTION
from trainctl.core.times import readable_time, rfc3339
from trainctl.kube.client import LEASES

log = logging.getLogger("trainctl.controller")

NODE_LEASE_NAMESPACE = "kube-node-lease"
LOOK_S = 2.0


def cached_lease(lease: dict) -> dict:
    """A node's Lease as the cache keeps it: its name, version, renewal time and duration."""
    metadata, spec = lease.get("metadata") or {}, lease.get("spec") or {}
    return {"metadata": {key: metadata[key] for key in ("name", "namespace", "resourceVersion") if key in metadata},
            "spec": {key: spec[key] for key in ("renewTime", "leaseDurationSeconds") if key in spec}}


def lease_seconds(lease: dict) -> int:
    value = (lease.get("spec") or {}).get("leaseDurationSeconds")
    return value if type(value) is int and value > 0 else DEFAULT_LEASE_S


class NodeLeases:
    def __init__(self, client, on_change) -> None:
        """``on_change(node)``: called (from this module's threads) when a node went silent or spoke again."""
        self.informer = Informer(client, LEASES, NODE_LEASE_NAMESPACE, transform=cached_lease)
        self.informer.handlers.append(self.on_lease)
        self.on_change = on_change
        self.lock = threading.Lock()
        # node -> (renewTime as written, when this controller saw it, the lease's duration in seconds)
        self.heard: dict[str, tuple[str, datetime, int]] = {}
        self.silent: set[str] = set()
        self.stopping = threading.Event()

    def start(self) -> None:
        self.informer.start()
        threading.Thread(target=self.run, name="node-leases", daemon=True).start()

    def stop(self) -> None:
        self.stopping.set()
        self.informer.stop()

    def on_lease(self, event: str, lease: dict) -> None:
        name = lease["metadata"]["name"]
        renewed = (lease.get("spec") or {}).get("renewTime")
        now = datetime.now(timezone.utc)
        with self.lock:
            if event == "DELETED" or not isinstance(renewed, str):
                self.heard.pop(name, None)
            elif name not in self.heard:
                self.heard[name] = (renewed, min(now, readable_time(renewed) or now), lease_seconds(lease))
            elif self.heard[name][0] != renewed:
                self.heard[name] = (renewed, now, lease_seconds(lease))
        self.look()

    def heard_at(self, node: str) -> tuple[str | None, int | None]:
        """(when the node's kubelet was last heard, RFC 3339; the lease's duration), or (None, None): not known."""
        with self.lock:
            heard = self.heard.get(node)
        return (None, None) if heard is None else (rfc3339(heard[1]), heard[2])

    def run(self) -> None:
        while not self.stopping.wait(LOOK_S):
            self.look()

    def look(self) -> None:
        """Tell of each node that went silent or spoke again since the last look."""
        now = datetime.now(timezone.utc)
        with self.lock:
            silent = {node for node, (_, seen, seconds) in self.heard.items()
                      if now - seen >= timedelta(seconds=seconds * SILENT_LEASE_FRACTION)}
            changed, self.silent = silent ^ self.silent, silent
        for node in sorted(changed):
            log.info("node %s %s", node, "went silent: its lease is not renewed" if node in silent else "is heard again")
            self.on_change(node)
