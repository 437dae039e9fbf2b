"""Restarts: their scope, the budget they spend, the class of each failure, and the record of every attempt.

Pure, like the rest of the core: the reconcile engine (trainctl/core/reconcile.py) reads the rules a job
asks for from its annotations, keeps what happened in :class:`Record`, and the runtimes write the record
back as the job's annotation :data:`RECORD_ANNOTATION` (docs/fault-tolerance.md has the whole story).

**Where things live.** Everything here is an annotation, never a field of ``spec`` or ``status``: the
resource stays valid ``kubeflow.org/v1`` (upstream's CRD prunes status fields it does not know, so a
count kept there would vanish on the first write under its schema), and the upstream operator ignores
annotations. The job asks with ``trainctl.io/restart-scope`` (``job`` or ``replica``),
``trainctl.io/retry-on-exit-codes`` (``3,42``), ``trainctl.io/max-disruptions`` and
``trainctl.io/node-lost-after`` (seconds, trainctl/core/nodes.py); the runtime keeps
:data:`RECORD_ANNOTATION`, a small JSON object. Pods carry the attempt they belong to in
:data:`ATTEMPT_LABEL`, so a pass that finds a pod of an older attempt knows it is to be stopped, whatever
pass decided the restart: the decision is written once, everything else follows from it.

**Failure classes.** A failed run is one of

* a *disruption* (:data:`DISRUPTION`): the infrastructure, not the program: killed by a signal (exit
  128+N), OOMKilled, evicted, its node lost or shut down, a ``DisruptionTarget`` pod condition, its pod
  deleted. Restarted without spending ``backoffLimit``, up to ``trainctl.io/max-disruptions``
  (default :data:`DEFAULT_MAX_DISRUPTIONS`), unless the restart policy is ``Never``;
* *counted* (:data:`COUNTED`): an exit code the job lists as retryable (retried whatever the policy),
  or any other failure the restart policy retries (OnFailure, Always; ExitCode's 128 and up that are no
  signal). Each spends one of ``backoffLimit``: ``backoffLimit: N`` allows N such restarts, of the whole
  job in job scope, of replicas in replica scope, whatever the policy (upstream never counts ExitCode's);
* *permanent* (:data:`PERMANENT`): what the policy does not retry; exit code 2 (:data:`USAGE_EXIT_CODE`: the
  arguments are wrong, said by argparse, the fine-tuning recipe's own checks, ``python missing.py``, a shell
  builtin) under any policy; in job scope also an exception raised by the program (a traceback, the function
  runner's record): running the same code with the same arguments again ends the same way. A code the job
  lists in ``trainctl.io/retry-on-exit-codes`` is retried all the same.

A suspend of a job that had started (``trainctl suspend``, Kueue's preemption) is a *preemption*
(:data:`PREEMPTION`): its resume starts the next attempt, and it is never limited here: how often a job
may be preempted is the queue's business (Kueue requeues for ever unless told otherwise).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone

from trainctl.core.job import RESTART_RECORD_ANNOTATION


RESTART_SCOPE_ANNOTATION = "trainctl.io/restart-scope"
RETRY_EXIT_CODES_ANNOTATION = "trainctl.io/retry-on-exit-codes"
MAX_DISRUPTIONS_ANNOTATION = "trainctl.io/max-disruptions"
#: how long (whole seconds) a finished master's success waits for workers still starting or running (reconcile.py)
SUCCESS_WAIT_ANNOTATION = "trainctl.io/success-wait"
DEFAULT_SUCCESS_WAIT_S = 60
MAX_SUCCESS_WAIT_S = 3600
RECORD_ANNOTATION = RESTART_RECORD_ANNOTATION
ATTEMPT_LABEL = "trainctl.io/restart-attempt"
#: every replica's attempt: 0 on the first run, 1 after the first restart or resume (JobSet's restart-attempt
#: and torchrun's TORCHELASTIC_RESTART_COUNT count the same way)
ATTEMPT_ENV = "TRAINCTL_RESTART_ATTEMPT"
SCOPES = ("replica", "job")
REPLICA_SCOPE, JOB_SCOPE = SCOPES
DEFAULT_MAX_DISRUPTIONS = 10
#: how long (whole seconds) a node's Ready condition may be other than True before its replicas count as lost
#: (trainctl/core/nodes.py)
NODE_LOST_AFTER_ANNOTATION = "trainctl.io/node-lost-after"
DEFAULT_NODE_LOST_AFTER_S = 60
#: "off": a suspect node is judged by ``node-lost-after`` alone, never by the job's own progress (trainctl/core/nodes.py)
NODE_LOSS_EVIDENCE_ANNOTATION = "trainctl.io/node-loss-evidence"
MAX_NODE_LOST_AFTER_S = 24 * 3600

COUNTED, DISRUPTION, PREEMPTION, PERMANENT = "counted", "disruption", "preemption", "permanent"
RETRYABLE_FROM = 128  # exit codes >= 128 (signals) are worth a retry under ExitCode
MISSING_EXIT_CODE = 0xBEEF  # upstream's sentinel when no exit code is known: retryable
#: [deviation] "the arguments are wrong" (argparse, the recipe's checks, a file python cannot open): permanent under
#: every policy, where upstream's OnFailure retries it up to backoffLimit, each run ending the same way
USAGE_EXIT_CODE = 2
#: the record keeps this many attempts' causes (the counts cover all of them)
HISTORY = 10
#: bounds on what is read back from the annotation, which anyone who may edit the job can write
MAX_COUNT = 2**31 - 1
MAX_TEXT = 300
MAX_PODS = 1000
EXIT_CODES = range(1, 256)
#: the texts an attempt's entry in the record may hold (:meth:`Record.restarted`, :meth:`Record.preempted`)
ENTRY_TEXTS = ("class", "cause", "at", "resumed", "node")
HELD_TEXTS = ("node", "since", "as", "until")  # what :meth:`Record.hold` keeps
NOT_READY_TEXT = "NotReady"


@dataclass(frozen=True)
class Rules:
    """What a job asks of restarts, from its annotations; an unreadable value is the default (a hand-edited
    annotation must not stop a job's reconcile: submit checks what it writes, docs name the forms)."""

    scope: str = REPLICA_SCOPE
    retry_codes: frozenset[int] = frozenset()
    max_disruptions: int = DEFAULT_MAX_DISRUPTIONS
    success_wait: int = DEFAULT_SUCCESS_WAIT_S
    node_lost_after: int = DEFAULT_NODE_LOST_AFTER_S
    use_evidence: bool = True

    @classmethod
    def of(cls, resource: dict) -> Rules:
        annotations = annotations_of(resource)
        scope = annotations.get(RESTART_SCOPE_ANNOTATION)
        return cls(scope if scope in SCOPES else REPLICA_SCOPE,
                   frozenset(exit_codes(annotations.get(RETRY_EXIT_CODES_ANNOTATION)) or ()),
                   whole_number(annotations.get(MAX_DISRUPTIONS_ANNOTATION), MAX_COUNT, DEFAULT_MAX_DISRUPTIONS),
                   whole_number(annotations.get(SUCCESS_WAIT_ANNOTATION), MAX_SUCCESS_WAIT_S, DEFAULT_SUCCESS_WAIT_S),
                   whole_number(annotations.get(NODE_LOST_AFTER_ANNOTATION), MAX_NODE_LOST_AFTER_S,
                                DEFAULT_NODE_LOST_AFTER_S),
                   annotations.get(NODE_LOSS_EVIDENCE_ANNOTATION) != "off")

    @property
    def job_scope(self) -> bool:
        return self.scope == JOB_SCOPE


def annotations_of(resource: dict) -> dict:
    annotations = (resource.get("metadata") or {}).get("annotations") or {}
    return annotations if isinstance(annotations, dict) else {}


def whole_number(text: object, most: int, default: int) -> int:
    """An annotation's ``"42"`` as 42 when it is a whole number up to ``most``; else ``default`` (ASCII digits
    only: ``"²".isdigit()`` is true, but int() refuses it)."""
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() and int(text) <= most else default


def exit_codes(text: object) -> list[int] | None:
    """``"3,42"`` as [3, 42]; None when it is not a comma-separated list of exit codes 1-255."""
    if not isinstance(text, str):
        return None
    words = [word.strip() for word in text.split(",")]
    if not words or not all(word.isdigit() and int(word) in EXIT_CODES for word in words):
        return None
    return sorted({int(word) for word in words})


def policy_retries(policy: str, code: int) -> bool:
    """Whether a restart policy retries a run that failed with ``code`` (the kubelet's and upstream's rules)."""
    return policy in ("OnFailure", "Always") or (policy == "ExitCode" and code >= RETRYABLE_FROM)


def failure_class(code: int | None, reason: str, disruption: str, policy: str, rules: Rules,
                  raised: bool = False) -> str:
    """The class of one failed run (see the module docstring). ``disruption``: what the runtime saw befall the
    pod ('' for nothing); ``raised``: the run ended in an exception of the program's (judged in job scope only)."""
    from trainctl.core.attribution import signal_of  # here: status and list read records, not failures

    if code is not None and code in rules.retry_codes:
        return COUNTED
    if policy == "Never" or code == USAGE_EXIT_CODE:
        return PERMANENT
    if disruption or reason == "OOMKilled" or signal_of(code) is not None:
        return DISRUPTION
    if raised and rules.job_scope:
        return PERMANENT
    return COUNTED if policy_retries(policy, MISSING_EXIT_CODE if code is None else code) else PERMANENT


def cause_text(replica: str, code: int | None, reason: str, disruption: str = "") -> str:
    """``worker-1: exit 137, OOMKilled``: a failed run, as the record and ``status`` name it."""
    from trainctl.core.attribution import signal_name

    if disruption:
        return f"{replica}: {disruption}"
    shown = "OOMKilled" if reason == "OOMKilled" else signal_name(code) or ("" if reason in ("", "Error") else reason)
    exit_part = "no exit code" if code is None else f"exit {code}"
    return f"{replica}: {exit_part}{', ' + shown if shown else ''}"


@dataclass
class Record:
    """What became of a job's attempts: kept in the annotation :data:`RECORD_ANNOTATION`."""

    attempt: int = 0  # the current attempt, 0 for the first
    counted: int = 0  # restarts that spent backoffLimit
    disruptions: int = 0  # restarts after a disruption: not counted, limited by max-disruptions
    preemptions: int = 0  # resumes after a suspend: never limited
    history: list[dict] = field(default_factory=list)  # the last HISTORY attempts: why each began, and when
    in_place: dict[str, int] = field(default_factory=dict)  # pod -> kubelet's restarts of it already classified
    #: job scope: replicas of each type seen all together in this attempt; one of them missing since is gone
    #: (a pod deleted before a pass saw it terminating, a lost node's pod removed)
    seen: dict[str, int] = field(default_factory=dict)
    #: replica scope: the last HISTORY replicas replaced after their node was lost, why and when (``cause``, ``at``):
    #: ``status`` says that the others may be stuck in a collective
    replaced: list[dict] = field(default_factory=list)
    #: the last time one of the job's nodes was suspect while the job kept progressing (trainctl/core/nodes.py): the
    #: node, since when, as what (NotReady or silent), and until when once it is over; ``status`` says why no restart
    held: dict = field(default_factory=dict)

    @classmethod
    def of(cls, resource: dict) -> Record:
        """The job's record; a missing or damaged annotation reads as an empty record (the counts a job stored
        in ``status.replicaStatuses.<type>.restarts`` before this annotation existed carry over)."""
        text = annotations_of(resource).get(RECORD_ANNOTATION)
        try:
            data = json.loads(text) if isinstance(text, str) and len(text) < 64 * 1024 else None
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            return cls(counted=legacy_restarts(resource))
        return cls(count(data.get("attempt")), count(data.get("counted")), count(data.get("disruptions")),
                   count(data.get("preemptions")), history_of(data.get("history")), in_place_of(data.get("inPlace")),
                   in_place_of(data.get("seen")), replaced_of(data.get("replaced")), held_of(data.get("held")))

    def text(self) -> str:
        data = {"attempt": self.attempt, "counted": self.counted, "disruptions": self.disruptions,
                "preemptions": self.preemptions, "history": self.history}
        for key, counts in (("inPlace", self.in_place), ("seen", self.seen)):
            if counts:
                data[key] = dict(sorted(counts.items()))
        if self.replaced:
            data["replaced"] = self.replaced
        if self.held:
            data["held"] = self.held
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    def restarted(self, kind: str, cause: str, now: str, node: str = "") -> None:
        """The job starts its next attempt after a failure of class ``kind`` (COUNTED or DISRUPTION); ``node``: the
        node whose loss caused it, if one did (its survivors are stopped with a short grace: trainctl/core/nodes.py)."""
        self.attempt += 1
        self.spend(kind)
        entry = {"attempt": self.attempt, "class": kind, "cause": cause[:MAX_TEXT], "at": now}
        self.remember({**entry, "node": node[:MAX_TEXT]} if node else entry)

    def node_lost_before(self, attempt: int) -> str:
        """The node whose loss ended the attempt before ``attempt``; '' when something else did, or its entry is no
        longer kept."""
        return next((entry.get("node", "") for entry in self.history if entry["attempt"] == attempt), "")

    def spend(self, kind: str) -> None:
        """One restart of class ``kind`` (COUNTED or DISRUPTION), of the job or of one replica."""
        if kind == DISRUPTION:
            self.disruptions += 1
        else:
            self.counted += 1

    def replaced_after(self, cause: str, now: str) -> None:
        """Replica scope: a replica lost with its node is replaced (its disruption spent by :meth:`spend`)."""
        self.replaced = [*self.replaced, {"cause": cause[:MAX_TEXT], "at": now}][-HISTORY:]

    def hold(self, held: dict | None, now: str) -> bool:
        """A suspect node the job kept progressing through (``held``: node, since, as), or none now (the last one is
        over at ``now``); True when the record changed."""
        if held:
            if {key: self.held.get(key) for key in HELD_TEXTS} == {**held, "until": None}:
                return False
            self.held = {key: str(value)[:MAX_TEXT] for key, value in held.items() if key in HELD_TEXTS}
            return True
        if not self.held or "until" in self.held:
            return False
        self.held = {**self.held, "until": now}
        return True

    def held_line(self) -> str:
        """``node n2 NotReady since 14:02; the job is still progressing, not restarted`` (or, once it is over, ``node n2
        was NotReady from 14:02 to 14:05; the job kept progressing, not restarted``)."""
        if not self.held:
            return ""
        node, what = self.held.get("node", "?"), self.held.get("as", NOT_READY_TEXT)
        what = what if what == NOT_READY_TEXT else "silent (its kubelet's lease not renewed)"
        if "until" in self.held:
            return f"node {node} was {what} from {clock(self.held.get('since'))} to {clock(self.held['until'])}; " \
                   "the job kept progressing, not restarted"
        return f"node {node} {what} since {clock(self.held.get('since'))}; the job is still progressing, not restarted"

    def preempted(self, at: str, resumed: str) -> None:
        """The job was suspended at ``at`` after it had run, and resumed at ``resumed``: its next attempt."""
        self.attempt += 1
        self.preemptions += 1
        self.remember({"attempt": self.attempt, "class": PREEMPTION, "at": at, "resumed": resumed})

    def remember(self, entry: dict) -> None:
        """A new attempt begins: why, kept; none of its replicas seen yet."""
        self.history = [*self.history, entry][-HISTORY:]
        self.seen = {}

    def describe(self, entry: dict) -> str:
        """One attempt as ``status`` says it: ``attempt 3 (restarted after worker-1: exit 137, OOMKilled)``,
        ``preempted at 14:02, resumed at 14:20, attempt 2``."""
        if entry.get("class") == PREEMPTION:
            return f"preempted at {clock(entry.get('at'))}, resumed at {clock(entry.get('resumed'))}, " \
                   f"attempt {entry['attempt'] + 1}"
        what = "a disruption, not counted" if entry.get("class") == DISRUPTION else "counted"
        return f"attempt {entry['attempt'] + 1} (restarted after {entry.get('cause', '?')}) at " \
               f"{clock(entry.get('at'))}: {what}"

    def lines(self, backoff_limit: int | None, rules: Rules) -> list[str]:
        """What ``status`` shows of the record: each kept attempt, then what the budgets have left."""
        held = [self.held_line()] if self.held else []
        if not self.attempt and not self.counted and not self.disruptions:
            return held
        limit = "no limit" if backoff_limit is None else f"backoffLimit {backoff_limit}"
        budget = (f"restarts: {self.counted} counted ({limit}), {self.disruptions} after disruptions (at most "
                  f"{rules.max_disruptions}), {self.preemptions} after preemptions; {rules.scope} scope")
        replaced = [f"{entry['cause']}: replaced at {clock(entry['at'])}: a disruption, not counted; the other "
                    "replicas may be stuck in a collective (--restart-scope job restarts every replica together)"
                    for entry in self.replaced]
        return [*(self.describe(entry) for entry in self.history), *replaced, *held, budget]


def count(value: object) -> int:
    return value if type(value) is int and 0 <= value <= MAX_COUNT else 0


def history_of(value: object) -> list[dict]:
    """The kept attempts that read as what :meth:`Record.remember` writes; others are left out."""
    entries = []
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, dict) and count(entry.get("attempt")) and \
                all(isinstance(entry.get(key, ""), str) for key in ENTRY_TEXTS):
            entries.append({key: entry[key] if key == "attempt" else entry[key][:MAX_TEXT]
                            for key in ("attempt", *ENTRY_TEXTS) if key in entry})
    return entries[-HISTORY:]


def replaced_of(value: object) -> list[dict]:
    """The kept replacements that read as what :meth:`Record.replaced_after` writes; others are left out."""
    return [{key: entry[key][:MAX_TEXT] for key in ("cause", "at")} for entry in value if isinstance(entry, dict)
            and all(isinstance(entry.get(key), str) for key in ("cause", "at"))][-HISTORY:] \
        if isinstance(value, list) else []


def held_of(value: object) -> dict:
    """The kept hold, when it reads as what :meth:`Record.hold` writes; else none."""
    if not isinstance(value, dict) or not all(isinstance(value.get(key), str) for key in ("node", "since", "as")):
        return {}
    return {key: value[key][:MAX_TEXT] for key in HELD_TEXTS if isinstance(value.get(key), str)}


def in_place_of(value: object) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    return {name: count(seen) for name, seen in list(value.items())[:MAX_PODS]
            if isinstance(name, str) and len(name) <= 253 and count(seen)}


def legacy_restarts(resource: dict) -> int:
    """Restarts a job counted in ``status.replicaStatuses.<type>.restarts`` (trainctl before this record)."""
    statuses = ((resource.get("status") or {}).get("replicaStatuses")) or {}
    return sum(count((entry or {}).get("restarts")) for entry in statuses.values() if isinstance(entry, dict))


def clock(stamp: str | None) -> str:
    """``14:02`` in this machine's time zone, for an RFC 3339 time of today; with the date otherwise."""
    if not stamp:
        return "?"
    try:
        moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).astimezone()
    except ValueError:
        return stamp[:MAX_TEXT]
    today = datetime.now(timezone.utc).astimezone().date()
    return moment.strftime("%H:%M" if moment.date() == today else "%Y-%m-%d %H:%M")
