"""Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does.

Only the holder of the Lease acts. The holder renews it every ``RETRY_S``; a holder
that cannot renew for ``RENEW_DEADLINE_S`` stops acting (the process exits) before the
lease expires for the others (``LEASE_DURATION_S``), so two controllers never act at
once. Updates carry the resourceVersion they read, so two candidates cannot both win.
The three are ``trainctl controller run``'s ``--leader-elect-retry-period``, ``--leader-elect-renew-deadline``
and ``--leader-elect-lease-duration`` (kube-controller-manager's names and defaults).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone

from trainctl.kube.client import LEASES, ApiError, Client

log = logging.getLogger("trainctl.controller")

LEASE_DURATION_S = 15
RENEW_DEADLINE_S = 10
RETRY_S = 2
JITTER_FACTOR = 1.2  # client-go's: the renew deadline must leave room for this many retry periods


def check_timing(lease_duration_s: int, renew_deadline_s: int, retry_s: int) -> None:
    """client-go's rules: the lease outlasts the renew deadline, which outlasts a retry period with its jitter."""
    from trainctl.errors import UserError

    if retry_s < 1:
        raise UserError(f"--leader-elect-retry-period {retry_s}s: give 1s or more (default {RETRY_S}s)")
    if renew_deadline_s <= JITTER_FACTOR * retry_s:
        raise UserError(f"--leader-elect-renew-deadline {renew_deadline_s}s: give more than {JITTER_FACTOR:g} times "
                        f"--leader-elect-retry-period ({retry_s}s)")
    if lease_duration_s <= renew_deadline_s:
        raise UserError(f"--leader-elect-lease-duration {lease_duration_s}s: give more than "
                        f"--leader-elect-renew-deadline ({renew_deadline_s}s)")


def micro_time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str | None) -> datetime | None:
    if not text:
        return None
    text = text.replace("Z", "+00:00")
    return datetime.fromisoformat(text)


class LeaderElector:
    def __init__(self, client: Client, namespace: str, name: str, identity: str,
                 timing: tuple[int, int, int] | None = None) -> None:
        """``timing``: the lease's duration, the renew deadline and the retry period, in seconds (None: 15, 10, 2)."""
        self.client, self.namespace, self.name, self.identity = client, namespace, name, identity
        self.lease_duration_s, self.renew_deadline_s, self.retry_s = timing or (LEASE_DURATION_S, RENEW_DEADLINE_S,
                                                                                RETRY_S)
        self.leading = threading.Event()
        self.lost = threading.Event()
        self.last_renewed = 0.0

    def run(self, stopping: threading.Event) -> None:
        """Acquire, then renew until stopped or lost; sets ``leading`` and, on loss, ``lost``."""
        while not stopping.is_set():
            acquired = self.try_acquire_or_renew()
            now = time.monotonic()
            if acquired:
                self.last_renewed = now
                if not self.leading.is_set():
                    log.info("became leader (lease %s/%s, identity %s)", self.namespace, self.name, self.identity)
                    self.leading.set()
            elif self.leading.is_set() and now - self.last_renewed > self.renew_deadline_s:
                log.error("lost the lease %s/%s: could not renew for %ss", self.namespace, self.name,
                          self.renew_deadline_s)
                self.leading.clear()
                self.lost.set()
                return
            stopping.wait(self.retry_s)

    def try_acquire_or_renew(self) -> bool:
        now = datetime.now(timezone.utc)
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_duration_s,
                "renewTime": micro_time(now)}
        try:
            lease = self.client.get(LEASES, self.name, self.namespace)
        except ApiError as error:
            if error.status != 404:
                log.warning("reading lease %s/%s: %s", self.namespace, self.name, error)
                return False
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {**spec, "acquireTime": micro_time(now), "leaseTransitions": 0}}
            return self.write(lambda: self.client.create(LEASES, body, self.namespace))
        except OSError as error:
            log.warning("reading lease %s/%s: %s", self.namespace, self.name, error)
            return False
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity") or ""
        if holder and holder != self.identity and not self.expired(current, now):
            return False
        if holder != self.identity:
            spec["acquireTime"] = micro_time(now)
            spec["leaseTransitions"] = current.get("leaseTransitions", 0) + 1
        else:
            spec["acquireTime"] = current.get("acquireTime") or micro_time(now)
            spec["leaseTransitions"] = current.get("leaseTransitions", 0)
        lease["spec"] = spec  # metadata.resourceVersion makes this a compare-and-swap
        return self.write(lambda: self.client.replace(LEASES, lease, self.namespace))

    @staticmethod
    def expired(spec: dict, now: datetime) -> bool:
        renewed = parse_micro_time(spec.get("renewTime"))
        duration = spec.get("leaseDurationSeconds") or LEASE_DURATION_S
        return renewed is None or (now - renewed).total_seconds() > duration

    def write(self, attempt) -> bool:
        try:
            attempt()
            return True
        except ApiError as error:
            if error.status != 409:  # 409: another candidate wrote first
                log.warning("writing lease %s/%s: %s", self.namespace, self.name, error)
            return False
        except OSError as error:
            log.warning("writing lease %s/%s: %s", self.namespace, self.name, error)
            return False

    def release(self) -> None:
        """Give the lease up at once (graceful shutdown), so a standby takes over without waiting."""
        if not self.leading.is_set():
            return
        self.leading.clear()
        try:
            lease = self.client.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"].update({"holderIdentity": "", "leaseDurationSeconds": 1,
                                  "renewTime": micro_time(datetime.now(timezone.utc))})
            self.client.replace(LEASES, lease, self.namespace)
            log.info("released the lease %s/%s", self.namespace, self.name)
        except (ApiError, OSError) as error:
            log.warning("releasing lease %s/%s: %s", self.namespace, self.name, error)
