"""The reconcile core: (job, observed replicas, now) -> actions and the new status.

One pure, level-triggered function (no I/O, no clock reads) implements the Kubeflow
operator's behaviour (contract sections 1.3-1.9 and 2) for every kind. The local
runtime and the in-cluster controller call it whenever something changed, execute the
actions, write the status when it differs, and call again after ``requeue_after``.

Deviations from upstream (docs/compatibility.md) are deliberate fixes:
* ``replicas: 0`` means no replicas, not a create/delete loop;
* restarts by recreation (ExitCode, and every restart of a local process) count towards
  ``backoffLimit``, and the limit means "this many restarts are allowed", like a Kubernetes Job;
  disruptions (a signal, OOM, eviction, a deleted pod) restart without spending it, up to their own
  limit; exit codes a job lists are retried whatever its policy; a job may ask that any failure restart
  every replica together as its next attempt; all of it kept in the job's annotation
  ``trainctl.io/restarts`` (trainctl/core/restarts.py, docs/fault-tolerance.md);
* ``activeDeadlineSeconds`` is enforced on time through ``requeue_after``;
* trainctl's own ``trainctl.io/stall-timeout`` annotation fails a running job that the runtime heard
  nothing from (no output, no report) for that long, on time too (``last_activity``, docs/progress.md);
* backoff/deadline failures stop running replicas but keep finished ones unless
  cleanPodPolicy is All (upstream deletes everything, ignoring cleanPodPolicy);
* the ExitCode permanent-failure path sets ``completionTime``; MPIJob fails with reason
  ``MPIJobFailed``; idle MPI workers are stopped when the launcher has finished;
* a Failed condition caused by replicas ends with the replica that caused it, told from those that
  failed because of it by evidence (trainctl/core/attribution.py).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from datetime import datetime
from typing import TYPE_CHECKING

from trainctl.core import checkpoint_volume
from trainctl.core import conditions as cond
from trainctl.core.actions import (
    CreateReplica,
    CreateService,
    DeleteJob,
    DeleteReplica,
    DeleteService,
    Plan,
    RecordEvent,
)
from trainctl.core.attribution import Judged, Run, attribute, failed_runs_of
from trainctl.core.job import Job
from trainctl.core.nodes import Evidence, Verdict, avoid_node, judge, lost_cause, survivor_grace
from trainctl.core.observed import ObservedReplica
from trainctl.core.restarts import (ATTEMPT_ENV, ATTEMPT_LABEL, COUNTED, DISRUPTION, MISSING_EXIT_CODE, PERMANENT,
                                    RECORD_ANNOTATION, RETRYABLE_FROM, USAGE_EXIT_CODE, Record, Rules, annotations_of,
                                    cause_text, failure_class)
from trainctl.core.times import parse_time, rfc3339  # noqa: F401 - rfc3339 is also imported from here
from trainctl.frameworks.base import LABEL_JOB_NAME, LABEL_JOB_ROLE, LABEL_OPERATOR, LABEL_REPLICA_TYPE
from trainctl.kube.envvars import resolved

if TYPE_CHECKING:
    from trainctl.frameworks.base import Network

#: in job scope, how long a failure that only followed another's (a rank that lost its peer) waits for the failure
#: it followed to be seen, while other replicas still run: that one's class decides the restart
CAUSE_WAIT_S = 5.0
STOP_REQUEUE_S = 1.0  # a job whose replicas it stopped before failing it looks again this soon
#: the longest ``requeue_after``: a deadline or TTL years away is looked at again daily, which costs
#: nothing and keeps every runtime's timer (time.sleep, Condition.wait) inside its range
MAX_REQUEUE_S = 24 * 3600.0


def seconds_left(since: datetime, seconds: int, now: datetime) -> float:
    """Time left of a ``seconds``-long period that began at ``since``.

    Never ``since + timedelta(seconds)``: that overflows past year 9999 (activeDeadlineSeconds
    is an int64, so 300000000000 is a valid value) and would kill the runtime evaluating it.
    """
    return seconds - (now - since).total_seconds()


def reconcile(resource: dict, observed: list[ObservedReplica], now: datetime, network: Network,
              services: set[str] | None = None, unobserved_failures: tuple[Run, ...] = (),
              last_activity: datetime | None = None, evidence: Evidence | None = None) -> Plan:
    """Everything the runtime should do now for this job, and its new status.

    ``services``: names of the job's Services that exist (cluster runtimes); with it, a
    missing Service is created even when its pod exists (a controller killed between
    the two creates), and one left from a scale-down is deleted.
    ``unobserved_failures``: failed runs of replicas that are not observed now (a local replica
    waiting out its restart back-off, or one stopped before the job failed): evidence for the Failed
    condition's message, nothing more.
    ``last_activity``: when a replica last wrote output or a report, or started (None: not known), for the
    job's stall timeout.
    ``evidence``: what the runtime read of the job's output while one of its nodes is suspect (trainctl/core/nodes.py).
    """
    job = Job(resource)
    if job.managed_externally:
        return Plan(status=copy.deepcopy(job.status))
    return Reconciler(job, observed, now, network, services, unobserved_failures, last_activity, evidence).run()


def fails_for_good(policy: str, code: int) -> bool:
    """A failed run no restart is made for, though its policy restarts others: under ExitCode a code below 128; under
    any policy but Never (whose failures all end the job as upstream's do) the usage error, exit 2."""
    return (policy == "ExitCode" and code < RETRYABLE_FROM) or (policy != "Never" and code == USAGE_EXIT_CODE)


class Reconciler:
    def __init__(self, job: Job, observed: list[ObservedReplica], now: datetime, network: Network,
                 services: set[str] | None = None, unobserved_failures: tuple[Run, ...] = (),
                 last_activity: datetime | None = None, evidence: Evidence | None = None) -> None:
        self.job, self.network, self.services = job, network, services
        self.last_activity = last_activity
        self.unobserved_failures = unobserved_failures
        self.observed = sorted(observed, key=self._order)
        self.now, self.stamp = now, rfc3339(now)
        self.status = copy.deepcopy(job.status)
        self.conditions: list[dict] = self.status.get("conditions") or []
        self.actions: list = []
        self.requeue_after: float | None = None
        self.restarting: set[str] = set()  # names of replicas restarted in this pass
        self.rules, self.record = Rules.of(job.resource), Record.of(job.resource)
        # what the annotation holds: a job without one has the empty record (nothing to write until something
        # happens), but one whose counts are still in status (before the record existed) moves them into it
        self.recorded = annotations_of(job.resource).get(RECORD_ANNOTATION) or Record().text()
        self.old_attempt_left = False  # job scope: replicas of an earlier attempt are still there
        # the job's suspect nodes, judged (trainctl/core/nodes.py); replicas on a lost one: their pods are deleted with
        # no grace period
        self.verdicts: dict[str, Verdict] = judge(self.observed, self.rules, now, evidence,
                                                  job.framework.lockstep(job.replica_types),
                                                  lambda replica: job.replica_id(replica.rtype, replica.index))
        self.on_lost_node = {r.name for r in self.observed if r.node in self.verdicts and self.verdicts[r.node].lost}
        self.lost: dict[str, str] = {}  # replicas of this pass lost with their node: what befell the node

    def _order(self, replica: ObservedReplica) -> tuple:
        types = self.job.replica_types
        return (types.index(replica.rtype) if replica.rtype in types else len(types), replica.index, replica.name)

    # ---- the loop, in the operator's order (contract 1.6) ------------------------------
    def run(self) -> Plan:
        kind, name = self.job.framework.kind, self.job.name
        if not self.conditions:
            self.set_condition("Created", "True", "Created", f"{kind} {name} is created.")
        if cond.finished(self.conditions):
            self.cleanup()
        elif self.job.suspended:
            self.suspend()
        else:
            if cond.is_true(self.conditions, "Suspended"):
                self.resume()
            self.status.setdefault("startTime", self.stamp)
            self.take_lost_replicas()
            handled = self.handle_job_failures() if self.rules.job_scope else self.handle_failed_replicas()
            if not handled and not self.enforce_deadline() and not self.enforce_stall_timeout():
                self.create_and_scale()
                self.update_conditions()
        return self.plan()

    def plan(self) -> Plan:
        self.status["conditions"] = self.conditions
        self.status["replicaStatuses"] = self.replica_statuses()
        if cond.finished(self.conditions):
            self.schedule_ttl()
        requeue_after = None if self.requeue_after is None else min(self.requeue_after, MAX_REQUEUE_S)
        record = self.record.text()
        return Plan(actions=self.actions, status=self.status, requeue_after=requeue_after,
                    annotations={RECORD_ANNOTATION: record} if record != self.recorded else None)

    def requeue(self, seconds: float) -> None:
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    # ---- lost nodes (trainctl/core/nodes.py) ------------------------------------------------------
    def take_lost_replicas(self) -> None:
        """A replica starting or running on a lost node is a run lost to a disruption: seen as failed (its pod, being
        deleted or not, is deleted again with no grace period). A suspect node not lost: the job is looked at again
        when its verdict may change, and the record says while the job, still progressing, is held."""
        for verdict in self.verdicts.values():
            if verdict.recheck is not None:
                self.requeue(verdict.recheck)
        for position, replica in enumerate(self.observed):
            if replica.name in self.on_lost_node and not replica.finished:
                self.lost[replica.name] = self.verdicts[replica.node].why
                self.observed[position] = dataclasses.replace(replica, phase="Failed", deleting=False, exit_code=None,
                                                              reason="", disruption=self.lost[replica.name])
        held = next((verdict.held for verdict in self.verdicts.values() if verdict.held), None)
        if self.record.hold(held, self.stamp) and held:
            self.event("Normal", "NodeSuspectJobProgressing", self.record.held_line())

    def node_loss_decision(self) -> tuple[str, str, str] | None:
        """Job scope: replicas of this attempt lost with their node restart the job; the cause names the node and
        every replica of this attempt lost with it (``node n2 became NotReady at 14:02: master-0, worker-1 lost``)."""
        lost = self.lost_now()
        if not lost:
            return None
        what = self.lost[lost[0].name]
        cause = lost_cause(what, [self.job.replica_id(r.rtype, r.index) for r in lost if self.lost[r.name] == what])
        self.event("Warning", "NodeLost", cause)
        return (failure_class(None, "", what, self.job.restart_policy(lost[0].rtype), self.rules), cause,
                lost[0].rtype)

    def lost_now(self) -> list[ObservedReplica]:
        """The replicas of this attempt lost with their node in this pass."""
        return [r for r in self.observed if r.name in self.lost]

    def stop_grace(self, replica: ObservedReplica) -> int | None:
        """The grace period a job-scope restart stops ``replica`` with: short when the restart that ended its attempt
        was a node's loss (a survivor, stuck in a collective: trainctl/core/nodes.py), else None (the pod's own)."""
        if not self.record.node_lost_before(replica.attempt + 1):
            return None
        spec = self.job.template(replica.rtype)["spec"] if replica.rtype in self.job.replica_types else {}
        return survivor_grace(spec.get("terminationGracePeriodSeconds"))

    def node_loss_of(self, replica: ObservedReplica) -> str:
        """Replica scope: ``node n2 became NotReady at 14:02: worker-1 lost`` for a replica lost with its node; ''
        for any other."""
        what = self.lost.get(replica.name)
        return lost_cause(what, [self.job.replica_id(replica.rtype, replica.index)]) if what else ""

    # ---- restarts and backoff, one replica at a time (1.3, 1.6) --------------------------------
    def handle_failed_replicas(self) -> bool:
        """Restart what the policy says; returns True when the job failed here."""
        if self.classify_in_place_restarts() or self.over_budget():
            return True
        for replica in self.observed:
            if replica.deleting or not replica.finished:
                continue
            policy = self.job.restart_policy(replica.rtype)
            code = replica.exit_code if replica.exit_code is not None else MISSING_EXIT_CODE
            listed = replica.exit_code in self.rules.retry_codes
            if replica.phase == "Failed" and not listed and fails_for_good(policy, code):
                self.fail_on_exit_code(replica, code)
                return True
            if self.should_restart(replica, policy, code) or (replica.phase == "Failed" and listed):
                kind = DISRUPTION if replica.phase == "Failed" and failure_class(
                    replica.exit_code, replica.reason, replica.disruption, policy, self.rules) == DISRUPTION else COUNTED
                if self.budget_spent(kind, self.node_loss_of(replica)):
                    return True
                self.restart(replica, kind)
        return False

    def should_restart(self, replica: ObservedReplica, policy: str, code: int) -> bool:
        if replica.phase == "Succeeded":
            return policy == "Always"  # kubelet semantics: Always restarts even after exit 0
        return policy in ("OnFailure", "Always") or (policy == "ExitCode" and code >= RETRYABLE_FROM)

    def fail_on_exit_code(self, replica: ObservedReplica, code: int) -> None:
        self.event("Warning", "ExitedWithCode", f"Pod: {self.job.namespace}.{replica.name} exited with code {code}")
        self.fail(f'job "{self.job.name}" is failing because "{replica.rtype}" replica(s) failed.')

    def classify_in_place_restarts(self) -> bool:
        """Count kubelet's in-place restarts (OnFailure, Always) not counted yet, each of the class of the run it
        followed (its lastState): the record remembers how many of each pod's it has counted. A restart that
        followed a run that failed for good (exit 2: the kubelet restarts it all the same) fails the job: True."""
        counted, permanent = {}, None
        for replica in self.observed:
            seen = self.record.in_place.get(replica.name, 0)
            seen = 0 if replica.restart_count < seen else seen  # a new pod of that name
            new = replica.restart_count - seen
            if new > 0:
                kind = failure_class(replica.last_exit_code, replica.last_reason, "",
                                     self.job.restart_policy(replica.rtype), self.rules)
                if kind == PERMANENT:
                    permanent = permanent or replica
                elif kind == DISRUPTION:
                    self.record.disruptions += new
                else:
                    self.record.counted += new
            if replica.restart_count:
                counted[replica.name] = replica.restart_count
        self.record.in_place = counted
        if permanent is not None:
            self.fail_on_exit_code(permanent, permanent.last_exit_code)
        return permanent is not None

    def over_budget(self) -> bool:
        """Fail the job whose replicas kubelet restarted in place more often than its limits allow."""
        limit = self.job.run_policy.get("backoffLimit")
        if limit is not None and self.record.counted > limit:
            self.fail(f"Job {self.job.name} has failed because it has reached the specified backoff limit")
            return True
        if self.record.disruptions > self.rules.max_disruptions:
            self.fail(self.disruption_limit_message())
            return True
        return False

    def budget_spent(self, kind: str, node_loss: str = "") -> bool:
        """Fail the job when a restart of class ``kind`` would pass its limit; True when it did. ``node_loss``: the
        cause, when replicas were lost with their node (which the message names: they have no exit code to tell)."""
        limit = self.job.run_policy.get("backoffLimit")
        if kind == COUNTED and limit is not None and self.record.counted >= limit:
            self.fail(f"Job {self.job.name} has failed because it has reached the specified backoff limit")
            return True
        if kind == DISRUPTION and self.record.disruptions >= self.rules.max_disruptions:
            message = self.disruption_limit_message()
            self.fail(f"{message}: {node_loss}." if node_loss else message, replicas_caused_it=not node_loss)
            return True
        return False

    def disruption_limit_message(self) -> str:
        times = self.record.disruptions
        return (f"Job {self.job.name} has failed because it was disrupted {times} time{'' if times == 1 else 's'}, "
                f"as many as trainctl.io/max-disruptions allows ({self.rules.max_disruptions})")

    def restart(self, replica: ObservedReplica, kind: str) -> None:
        self.restarting.add(replica.name)
        self.record.spend(kind)
        self.delete_replica(replica, "Restart")
        message = f"job {self.job.name} is restarting because {replica.rtype} replica(s) failed."
        if replica.name in self.lost:
            cause = self.node_loss_of(replica)
            self.record.replaced_after(cause, self.stamp)
            self.event("Warning", "NodeLost", cause)
            message = (f"job {self.job.name} is restarting because {cause}; the other replicas may be stuck in a "
                       "collective (--restart-scope job restarts every replica together).")
        self.set_condition("Restarting", "True", "Restarting", message)
        self.event("Warning", self.reason("Restarting"), message)

    # ---- restarts of the whole job (restart scope job: trainctl/core/restarts.py) -----------------
    def handle_job_failures(self) -> bool:
        """Stop what is left of earlier attempts; when a replica of this one failed, restart every replica as the
        next attempt or fail the job, by the class of the failure that started it. True when the job failed."""
        self.stop_old_attempts()
        self.note_all_started()
        failed = [r for r in self.observed if r.phase == "Failed" and not r.deleting]
        decision = self.node_loss_decision() or self.infrastructure_decision() or \
            (self.failure_decision(failed) if failed else None)
        if decision is None:
            return False  # nothing failed, or waiting for the cause to show
        kind, cause, rtype = decision
        if kind == PERMANENT:
            self.fail(f"{self.job.framework.kind} {self.job.name} is failed because {len(failed) or 1} {rtype} "
                      "replica(s) failed.")
            return True
        if self.budget_spent(kind, cause if self.lost else ""):
            return True
        lost = self.lost_now()
        self.restart_job(kind, cause, lost[0].node if lost else "")
        return False

    def disrupted(self, replica: ObservedReplica) -> bool:
        """A replica of this attempt that the infrastructure took: its pod deleted by someone else while the job
        runs (none of the core's own deletes leaves one of this attempt, in range, behind), or failed with a
        disruption (an eviction, a lost node)."""
        if replica.deleting:
            return replica.phase != "Succeeded" and replica.index < self.job.replicas(replica.rtype)
        return bool(replica.disruption) and replica.phase == "Failed"

    def stop_old_attempts(self) -> None:
        """Replicas of an earlier attempt are stopped, and are no replicas of this one: none of this attempt
        starts while one is left (old replicas stop before new ones start)."""
        old = [r for r in self.observed if r.attempt != self.record.attempt]
        for replica in old:
            if not replica.deleting:
                self.delete_replica(replica, "Restart", self.stop_grace(replica))
            elif self.leftover_of_node_loss(replica):
                self.delete_replica(replica, "Restart", 0)
        self.old_attempt_left = bool(old)
        self.observed = [r for r in self.observed if r.attempt == self.record.attempt]

    def leftover_of_node_loss(self, replica: ObservedReplica) -> bool:
        """A survivor of a node loss whose containers have ended, its pod still there: only the kubelet's cleanup
        is left, which kept the object (and its name, the next attempt's) up to 10 s, once 57 s, after the
        processes were gone. Removed at once (its volumes are still unmounted by the kubelet, and no attach
        controller detaches a volume its node reports in use)."""
        return self.network.cluster and replica.finished and replica.name not in self.on_lost_node and \
            bool(self.record.node_lost_before(replica.attempt + 1))

    def note_all_started(self) -> None:
        """Once every replica of this attempt is there together, remember how many of each type there are."""
        present = {(r.rtype, r.index) for r in self.observed if not r.deleting}
        wanted = {rtype: self.job.replicas(rtype) for rtype in self.job.replica_types}
        if self.record.seen != wanted and all((rtype, index) in present for rtype, count in wanted.items()
                                              for index in range(count)):
            self.record.seen = wanted

    def infrastructure_decision(self) -> tuple[str, str, str] | None:
        """A replica of this attempt the infrastructure took (deleted, evicted, gone): a disruption."""
        disrupted = [r for r in self.observed if self.disrupted(r)]
        if disrupted:
            replica = disrupted[0]
            what = replica.disruption or "its pod was deleted"
            return (failure_class(replica.exit_code, replica.reason, what, self.job.restart_policy(replica.rtype),
                                  self.rules),
                    cause_text(self.job.replica_id(replica.rtype, replica.index), replica.exit_code, replica.reason,
                               what), replica.rtype)
        present = {(r.rtype, r.index) for r in self.observed}
        gone = [(rtype, index) for rtype, count in self.record.seen.items() if rtype in self.job.replica_types
                for index in range(min(count, self.job.replicas(rtype))) if (rtype, index) not in present]
        if gone:
            rtype, index = gone[0]
            what = "its pod is gone"
            return (failure_class(None, "", what, self.job.restart_policy(rtype), self.rules),
                    cause_text(self.job.replica_id(rtype, index), None, "", what), rtype)
        return None

    def failure_decision(self, failed: list[ObservedReplica]) -> tuple[str, str, str] | None:
        """The class and cause of the failure that brought this attempt down, by attribution; None while only
        failures that followed another's are seen and other replicas still run (the cause may show yet)."""
        by_id = {self.job.replica_id(r.rtype, r.index): r for r in failed}
        runs = [Run(replica_id, r.exit_code, r.reason, r.finished_at, exit_window=r.exit_window, message=r.message)
                for replica_id, r in by_id.items()]
        culprit: Judged | None = attribute(runs, self.job.framework.kind).culprit
        replica = by_id[culprit.run.replica]
        policy = self.job.restart_policy(replica.rtype)
        if culprit.is_cause:
            return (failure_class(replica.exit_code, replica.reason, "", policy, self.rules,
                                  raised=culprit.exception is not None),
                    cause_text(culprit.run.replica, replica.exit_code, replica.reason), replica.rtype)
        waited = self.seconds_since(replica.finished_at)
        if waited < CAUSE_WAIT_S and any(r.active for r in self.observed if r.name not in {f.name for f in failed}):
            self.requeue(CAUSE_WAIT_S - waited)
            return None
        lost = f"lost its peer ({culprit.peer_loss})" if culprit.peer_loss else "stopped"
        return (failure_class(replica.exit_code, replica.reason, lost, policy, self.rules),
                cause_text(culprit.run.replica, None, "", lost), replica.rtype)

    def seconds_since(self, stamp: str | None) -> float:
        moment = parse_time(stamp) if stamp else None
        return (self.now - moment).total_seconds() if moment else 0.0

    def restart_job(self, kind: str, cause: str, node: str) -> None:
        """Every replica of this attempt is stopped; the next attempt starts once none is left. ``node``: the node
        whose loss caused the restart ('' for another cause)."""
        self.record.restarted(kind, cause, self.stamp, node)
        for replica in self.observed:
            self.restarting.add(replica.name)
            if not replica.deleting:
                self.delete_replica(replica, "Restart", self.stop_grace(replica))
        self.old_attempt_left = bool(self.observed)
        message = (f"{self.job.framework.kind} {self.job.name} is restarting: attempt {self.record.attempt + 1} "
                   f"(restarted after {cause})")
        self.set_condition("Restarting", "True", "Restarting", message)
        self.event("Warning", self.reason("Restarting"), message)

    # ---- deadline ---------------------------------------------------------------------
    def enforce_deadline(self) -> bool:
        deadline = self.job.run_policy.get("activeDeadlineSeconds")
        start = parse_time(self.status.get("startTime"))
        if deadline is None or start is None:
            return False
        remaining = seconds_left(start, deadline, self.now)
        if remaining > 0:
            self.requeue(remaining)
            return False
        self.fail(f"Job {self.job.name} has failed because it was active longer than specified deadline",
                  replicas_caused_it=False)
        return True

    def enforce_stall_timeout(self) -> bool:
        """Fail a running job none of whose replicas wrote output or a report for its stall timeout (a hung
        all-reduce writes nothing for ever); otherwise come back when it would run out."""
        timeout = self.job.stall_timeout
        if timeout is None or self.last_activity is None or not cond.is_true(self.conditions, "Running"):
            return False
        remaining = seconds_left(self.last_activity, timeout, self.now)
        if remaining > 0:
            self.requeue_after = remaining if self.requeue_after is None else min(self.requeue_after, remaining)
            return False
        silent = int((self.now - self.last_activity).total_seconds())
        self.fail(f"Job {self.job.name} has failed because it stalled: no replica wrote output or progress for "
                  f"{silent}s (stall timeout {timeout}s)", replicas_caused_it=False)
        return True

    def fail(self, message: str, replicas_caused_it: bool = True) -> None:
        """Backoff, deadline or a permanent exit code: stop what runs, keep the rest for inspection."""
        if replicas_caused_it and self.cause_pending():
            return
        if replicas_caused_it:
            message = self.with_cause(message)
        self.status.setdefault("completionTime", self.stamp)
        self.set_condition("Failed", "True", "Failed", message)
        self.event("Warning", self.reason("Failed"), message)
        everything = self.job.run_policy["cleanPodPolicy"] == "All"
        for replica in self.observed:
            if not replica.deleting and replica.name not in self.restarting and (everything or not replica.finished
                                                                                 or replica.name in self.lost):
                self.delete_replica(replica, "Cleanup")

    def cause_pending(self) -> bool:
        """Hold the Failed condition back while all the failed runs seen show a failure that followed another's
        (a rank that lost its peer) and replicas still run: the peer that caused it may not have been seen to
        exit yet (its pod's status comes a moment later), or may not have exited (a rank that raised can hang in
        its process group's shutdown until it is stopped). Wait up to CAUSE_WAIT_S after the failure seen, as
        failure_decision does in job scope; then stop the replicas still running, whose stopped runs are evidence
        on the next pass. A condition is written once; it must not name the consequence. True when held back."""
        if self.rules.job_scope:  # there failure_decision waits for the cause, and a replica the core deleted
            return False          # would read as one the infrastructure took
        running = [r for r in self.observed if r.active and r.name not in self.restarting]
        if not running or self.cause_known():
            return False
        # since the first failure seen; a run without an end time (none is known) waits no longer
        waited = max((self.seconds_since(r.finished_at) for r in self.observed if r.phase == "Failed" and r.finished_at),
                     default=CAUSE_WAIT_S)
        if waited < CAUSE_WAIT_S:
            self.requeue(CAUSE_WAIT_S - waited)
            return True
        for replica in running:
            self.delete_replica(replica, "Cleanup")
        self.requeue(STOP_REQUEUE_S)
        return True

    def cause_known(self) -> bool:
        culprit = attribute(self.all_failed_runs(), self.job.framework.kind).culprit
        return culprit is None or culprit.is_cause

    def all_failed_runs(self) -> list[Run]:
        return [run for replica in self.observed for run in self.failed_runs(replica)] + [*self.unobserved_failures]

    def with_cause(self, message: str) -> str:
        """The message of a failure that replicas caused, naming the one whose failure brought the others down
        ([deviation] upstream names only the replica type)."""
        cause = attribute(self.all_failed_runs(), self.job.framework.kind).sentence()
        return f"{message.rstrip('.')}: {cause}." if cause else message

    def failed_runs(self, replica: ObservedReplica) -> list[Run]:
        replica_id = self.job.replica_id(replica.rtype, replica.index)
        current = Run(replica_id, replica.exit_code, replica.reason, replica.finished_at,
                      exit_window=replica.exit_window, message=replica.message)
        # in job scope the run before was the previous attempt's, whose failure was settled by its restart
        last = Run(replica_id, None) if self.rules.job_scope else \
            Run(replica_id, replica.last_exit_code, replica.last_reason, replica.last_finished_at, previous=True,
                exit_window=replica.last_exit_window, message=replica.last_message)
        return failed_runs_of(current, last, failed=replica.phase == "Failed", succeeded=replica.phase == "Succeeded")

    # ---- creation and scaling (1.4) -----------------------------------------------------
    def create_and_scale(self) -> None:
        # a local process is gone once killed, so it is recreated at once; a pod takes time to
        # terminate and its name stays taken, so the controller recreates it on a later pass
        recreate_now = set() if self.network.cluster else self.restarting
        present = {(r.rtype, r.index) for r in self.observed if r.name not in recreate_now}
        # in job scope a new attempt starts whole, once the last replica of the old one is gone (a pod takes
        # time to stop; a local process is stopped before the pass goes on)
        waiting = self.old_attempt_left and self.network.cluster
        # a job with a failed replica that will not restart fails in this pass: nothing new starts (a replica it
        # stopped before failing, cause_pending, stays stopped)
        waiting = waiting or self.permanently_failed() is not None
        for rtype in self.job.replica_types:
            if self.dependency_unmet(rtype):
                continue
            for index in range(self.job.replicas(rtype)):
                if (rtype, index) not in present and not waiting:
                    self.create_replica(rtype, index)
        for replica in self.observed:
            if replica.index >= self.job.replicas(replica.rtype) and not replica.deleting \
                    and replica.name not in self.restarting:
                self.delete_replica(replica, "ScaleDown")
        if self.services is not None and self.job.framework.services:
            self.reconcile_services()

    def dependency_unmet(self, rtype: str) -> bool:
        """Whether the replicas of ``rtype`` are not created yet because what they depend on (a TrainJob runtime's
        ``dependsOn``) is not reached; once one of them exists, the others and its restarts are made as a Job's pods
        are, whatever became of its dependencies since."""
        if any(replica.rtype == rtype for replica in self.observed):
            return False
        return self.job.framework.unmet_dependency(self.job, rtype, self.observed) is not None

    def reconcile_services(self) -> None:
        """Services are reconciled on their own: a pod can exist without its Service, and the reverse."""
        job = self.job
        wanted = {job.pod_name(t, i): (t, i) for t in job.replica_types for i in range(job.replicas(t))}
        touched = {a.name for a in self.actions if isinstance(a, (CreateService, DeleteService))}
        for name, (rtype, index) in wanted.items():
            if name not in self.services and name not in touched:
                self.create_service(rtype, index)
        for name in sorted(self.services - set(wanted) - touched):
            self.actions.append(DeleteService(name))

    def create_replica(self, rtype: str, index: int) -> None:
        job = self.job
        name = job.pod_name(rtype, index)
        pod, env = self.pod_template(rtype, index)
        labels = pod["metadata"]["labels"]
        self.actions.append(CreateReplica(rtype, index, name, labels, pod, env))
        if self.network.cluster and job.framework.services:
            self.create_service(rtype, index)

    def create_service(self, rtype: str, index: int) -> None:
        """Headless, named like the pod; labels and selector are the operator's alone (no job-role)."""
        job = self.job
        container = job.main_container(job.template(rtype)["spec"]["containers"]) or {}
        ports = [{"name": p.get("name"), "port": p["containerPort"]} for p in container.get("ports", [])]
        labels = {k: v for k, v in job.labels(rtype, index).items() if k != LABEL_JOB_ROLE}
        self.actions.append(CreateService(job.pod_name(rtype, index), rtype, index, labels, ports))

    def pod_template(self, rtype: str, index: int) -> tuple[dict, dict]:
        """The pod the operator would create, and the main container's env flattened."""
        job, framework = self.job, self.job.framework
        pod = job.template(rtype)
        metadata = pod.setdefault("metadata", {})
        metadata["labels"] = {**(metadata.get("labels") or {}), **job.labels(rtype, index), **self.attempt_label()}
        if job.annotations(rtype, index):
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **job.annotations(rtype, index)}
        spec = pod["spec"]
        policy = job.restart_policy(rtype)
        if spec.get("restartPolicy"):
            self.event("Warning", "SetPodTemplateRestartPolicy",
                       "Restart policy in pod template will be overwritten by restart policy in replica spec")
        # ExitCode, and any policy in job scope: the core decides each restart, kubelet restarts nothing in place
        spec["restartPolicy"] = "Never" if policy == "ExitCode" or self.rules.job_scope else policy
        self.wire_env(rtype, index, spec)
        if self.network.cluster and (main := job.main_container(spec["containers"])) is not None:
            checkpoint_volume.wire_pod(job.resource, spec, main)
        idle = framework.idle_command(rtype)
        if idle and not spec["containers"][0].get("command"):
            spec["containers"][0].update(copy.deepcopy(idle))
        framework.prepare_pod(job, rtype, index, spec, self.network)
        if self.network.cluster and (lost := self.record.node_lost_before(self.record.attempt)):
            avoid_node(spec, lost)  # the node whose loss ended the last attempt may still look Ready to the scheduler
        main = job.main_container(spec["containers"]) or {}
        return pod, resolved(main.get("env") or [], metadata, self.network.pod_ip())

    def wire_env(self, rtype: str, index: int, spec: dict) -> None:
        """Append the operator's env to each wired container (after the user's own, which a kind may let win)."""
        job, framework = self.job, self.job.framework
        operator_env = framework.env(job, rtype, index, self.network) + self.attempt_env()
        for container in framework.wired_containers(job, rtype, spec["containers"]):
            user_env = container.get("env") or []
            user_names = {entry.get("name") for entry in user_env}
            extra = [e for e in operator_env if not (framework.user_env_wins(e["name"]) and e["name"] in user_names)]
            container["env"] = user_env + copy.deepcopy(extra) + (cpu_threads_env(container) if self.network.cluster
                                                                 else [])

    def tells_attempts(self) -> bool:
        """Whether pods carry the attempt: in job scope, and in any job once it restarted or resumed (a job that
        never did keeps the operator's env and labels exactly)."""
        return self.rules.job_scope or self.record.attempt > 0

    def attempt_label(self) -> dict[str, str]:
        return {ATTEMPT_LABEL: str(self.record.attempt)} if self.tells_attempts() else {}

    def attempt_env(self) -> list[dict]:
        if not self.tells_attempts():
            return []
        return [{"name": ATTEMPT_ENV, "value": str(self.record.attempt)},
                *self.job.framework.restart_env(self.record.attempt)]

    def delete_replica(self, replica: ObservedReplica, reason: str, grace_period: int | None = None) -> None:
        """Stop it with ``grace_period`` (None: the pod's own); with none on a lost node."""
        self.actions.append(DeleteReplica(replica.name, replica.rtype, replica.index, reason,
                                          0 if replica.name in self.on_lost_node else grace_period))
        if self.network.cluster and self.job.framework.services:
            self.actions.append(DeleteService(replica.name))

    # ---- conditions (1.7) -------------------------------------------------------------------
    def update_conditions(self) -> None:
        job, framework = self.job, self.job.framework
        counts = self.counts()
        role = framework.status_role(job.replica_types)
        # [deviation] a failure for good is looked at before success: upstream looks at the replica types in its
        # map's (random) order, so a worker failed under Never beside a master that succeeded gave either answer;
        # here the job is Failed, whatever the order its pods' statuses came in, also while the Failed condition
        # waits for its cause (cause_pending): a master that ends meanwhile must not turn it into a success
        failed = self.permanently_failed()
        if failed:
            rtype, number = failed
            self.fail(f"{job.framework.kind} {job.name} is failed because {number} {rtype} replica(s) failed.")
            return
        if role in job.replica_types and framework.succeeded(job, role, counts.get(role, {}), self.observed):
            if not self.success_held(role):
                self.succeed()
            return
        if not self.restarting and counts.get(role, {}).get("active", 0) > 0:
            message = f"{framework.kind} {job.name} is running."
            if not cond.is_true(self.conditions, "Running"):
                self.event("Normal", self.reason("Running"), message)
            self.set_condition("Running", "True", "Running", message)

    def success_held(self, role: str) -> bool:
        """Hold the Succeeded condition back while a replica the kind's success waits for still runs or starts,
        up to the job's trainctl.io/success-wait (60 s) after the status role's last run ended: in a cluster a worker's pod may start only
        after the master's Service resolved, so a master that ends quickly can succeed before a worker has even
        run, and that worker's failure must still fail the job, as it does locally where both start at once
        (issue 40). Past the bound the job succeeds and what still runs is left to cleanPodPolicy. True when held."""
        awaited = self.job.framework.awaited_at_success(self.job, role)
        if not any(r.rtype in awaited and r.active and not r.deleting for r in self.observed):
            return False
        bound = self.rules.success_wait
        ended = max((self.seconds_since(r.finished_at) for r in self.observed
                     if r.rtype == role and r.finished_at), default=bound)
        if ended >= bound:
            return False
        self.requeue(bound - ended)
        return True

    def succeed(self) -> None:
        message = f"{self.job.framework.kind} {self.job.name} is successfully completed."
        self.status.setdefault("completionTime", self.stamp)
        self.set_condition("Succeeded", "True", "Succeeded", message)
        self.event("Normal", self.reason("Succeeded"), message)
        self.cleanup()

    def permanently_failed(self) -> tuple[str, int] | None:
        """The first replica type (in evaluation order) with failed replicas that will not restart (in job scope
        none: every failure there is decided by :meth:`handle_job_failures`)."""
        if self.rules.job_scope:
            return None
        for rtype in self.job.replica_types:
            if not self.job.framework.failure_ends_job(self.job, rtype):
                continue
            failed = [r for r in self.observed if r.rtype == rtype and r.phase == "Failed"
                      and not r.deleting and r.name not in self.restarting]
            if failed:
                return rtype, len(failed)
        return None

    # ---- finished jobs, suspend, resume, TTL (1.8, 1.9) ----------------------------------------
    def cleanup(self) -> None:
        policy = self.job.run_policy["cleanPodPolicy"]
        for replica in self.observed:
            if self.stopping(replica) or replica.name in self.restarting:
                continue
            # a replica that only hosts what another started has nothing left to host
            idle = self.job.framework.idle_command(replica.rtype) is not None and not replica.finished
            if policy == "All" or (policy == "Running" and not replica.finished) or idle:
                self.delete_replica(replica, "Cleanup")

    def suspend(self) -> None:
        kind, name = self.job.framework.kind, self.job.name
        for replica in self.observed:
            if not self.stopping(replica):
                self.delete_replica(replica, "Suspend")
        message = f"{kind} {name} is suspended."
        if cond.is_true(self.conditions, "Running"):
            self.set_condition("Running", "False", "Suspended", message)
        if not cond.is_true(self.conditions, "Suspended"):
            self.set_condition("Suspended", "True", "Suspended", message)
            self.event("Normal", self.reason("Suspended"), message)
        self.observed = []  # nothing stays active while suspended

    def resume(self) -> None:
        """[deviation] A job that had run before its suspend (trainctl suspend, Kueue's preemption) resumes as its
        next attempt, recorded with when it was suspended; one created suspended just starts."""
        if "startTime" in self.status:
            suspended = cond.find(self.conditions, "Suspended") or {}
            self.record.preempted(suspended.get("lastTransitionTime") or self.stamp, self.stamp)
        message = f"{self.job.framework.kind} {self.job.name} is resumed."
        self.set_condition("Suspended", "False", "Resumed", message)
        self.event("Normal", self.reason("Resumed"), message)
        self.status["startTime"] = self.stamp

    def schedule_ttl(self) -> None:
        ttl = self.job.run_policy.get("ttlSecondsAfterFinished")
        finished_at = parse_time(self.status.get("completionTime"))
        if ttl is None or finished_at is None:
            return
        remaining = seconds_left(finished_at, ttl, self.now)
        if remaining <= 0:
            self.actions.append(DeleteJob("TTLExpired"))
        else:
            self.requeue_after = remaining if self.requeue_after is None else min(self.requeue_after, remaining)

    # ---- status ------------------------------------------------------------------------------
    def counts(self) -> dict[str, dict[str, int]]:
        counts = {rtype: {"active": 0, "succeeded": 0, "failed": 0} for rtype in self.job.replica_types}
        for replica in self.observed:
            bucket = counts.setdefault(replica.rtype, {"active": 0, "succeeded": 0, "failed": 0})
            if replica.phase == "Running":
                bucket["failed" if replica.deleting else "active"] += 1
            elif replica.phase == "Succeeded":
                bucket["succeeded"] += 1
            elif replica.phase == "Failed":
                bucket["failed"] += 1
        return counts

    def replica_statuses(self) -> dict:
        statuses = {}
        succeeded = cond.is_true(self.conditions, "Succeeded")
        for rtype, counts in self.counts().items():
            entry = dict(counts)
            if succeeded:
                entry["succeeded"] += entry["active"]
                entry["active"] = 0
            if self.job.framework.scalable:
                entry["selector"] = ",".join(f"{k}={v}" for k, v in self.selector(rtype).items())
            statuses[rtype] = entry
        return statuses

    def selector(self, rtype: str) -> dict:
        return {LABEL_JOB_NAME: self.job.name, LABEL_OPERATOR: self.job.framework.operator_name,
                LABEL_REPLICA_TYPE: rtype.lower()}

    # ---- helpers ---------------------------------------------------------------------------
    def stopping(self, replica: ObservedReplica) -> bool:
        """Whether the replica's pod is on its way out: being deleted, and not on a lost node (where a graceful
        delete never completes: it is deleted again, with no grace period)."""
        return replica.deleting and replica.name not in self.on_lost_node

    def reason(self, suffix: str) -> str:
        return f"{self.job.framework.kind}{suffix}"

    def set_condition(self, ctype: str, status: str, suffix: str, message: str) -> None:
        self.conditions = cond.set_condition(self.conditions, ctype, status, self.reason(suffix), message, self.stamp)

    def event(self, etype: str, reason: str, message: str) -> None:
        self.actions.append(RecordEvent(etype, reason, message))


def cpu_threads_env(container: dict) -> list[dict]:
    """``OMP_NUM_THREADS`` from the container's CPU limit (its request if no limit), rounded up, unless
    the container sets it. [deviation] Upstream sets nothing, and torch, NumPy and TensorFlow then
    start a thread per core of the node whatever the pod may use: replicas sharing a node spin
    against each other (measured: 0.08x the steps/s of the same replicas as local processes, which
    get cores / replicas) and a CPU-limited pod is throttled. torchrun sets 1 for the same reason."""
    if any(entry.get("name") == "OMP_NUM_THREADS" for entry in container.get("env") or []):
        return []
    resources = container.get("resources") or {}
    cpu = (resources.get("limits") or {}).get("cpu") or (resources.get("requests") or {}).get("cpu")
    cores = cpu_cores(str(cpu)) if cpu is not None else None
    return [] if cores is None else [{"name": "OMP_NUM_THREADS", "value": str(max(1, math.ceil(cores)))}]


def cpu_cores(quantity: str) -> float | None:
    """A CPU quantity in cores (``500m`` -> 0.5, ``2`` -> 2.0); None for a form this does not read."""
    try:
        cores = float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    except ValueError:
        return None
    return cores if math.isfinite(cores) and cores > 0 else None
