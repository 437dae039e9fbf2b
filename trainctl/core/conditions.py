"""A job's state, read in one place, and its conditions with the operator's update rules (contract 1.5).

Conditions are a list; the last one that is True is the job's state (the ``State`` column), a
terminal one (Succeeded, Failed) before any other. Everything that asks what became of a job,
whatever holds it (a job resource, a Kueue Workload, a CRD), reads it through
:func:`conditions_of` and :func:`state_of` instead of walking ``status.conditions`` itself.
"""

from __future__ import annotations

import json

TERMINAL = ("Succeeded", "Failed")
PENDING = "Pending"  # the state of a job no condition describes yet
# Trainer v2's name for Succeeded: a TrainJob's status in upstream's form (contract §1.3) is read as trainctl's
ALIASES = {"Succeeded": ("Succeeded", "Complete")}
# Where trainctl's controller keeps its own status of a TrainJob, whose status field holds upstream's form: no
# Created or Running condition, no start time or replica counts (trainctl/core/trainjob.py, upstream_status)
STATUS_ANNOTATION = "trainctl.io/status"


def status_of(obj: dict | None) -> dict:
    """The object's ``status`` ({} before anything wrote one); trainctl's own where the object keeps it in
    :data:`STATUS_ANNOTATION` (a TrainJob in a cluster)."""
    text = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(STATUS_ANNOTATION)
    if text:
        try:
            kept = json.loads(text)
        except ValueError:  # edited by hand: the status field is still there to read
            kept = None
        if isinstance(kept, dict):
            return kept
    return (obj or {}).get("status") or {}


def conditions_of(obj: dict | None) -> list[dict]:
    """The object's ``status.conditions`` ([] without)."""
    return status_of(obj).get("conditions") or []


def true_types(obj: dict | None) -> list[str]:
    """The types of the object's conditions that are True, in their order (a TrainJob's Complete as Succeeded)."""
    return [canonical(c.get("type")) for c in conditions_of(obj) if c.get("status") == "True"]


def canonical(ctype: str | None) -> str | None:
    return next((name for name, spellings in ALIASES.items() if ctype in spellings), ctype)


def state_of(resource: dict | None) -> str:
    """The job's state: Succeeded or Failed once one is True, else the last True condition (Created, Running,
    Restarting, Suspended), else Pending."""
    true = true_types(resource)
    return next((terminal for terminal in TERMINAL if terminal in true), true[-1] if true else PENDING)


def reached(obj: dict | None, ctype: str) -> bool:
    """Whether the object's condition ``ctype`` is True (a job's, a CRD's Established ...)."""
    return is_true(conditions_of(obj), ctype)


def has_finished(resource: dict | None) -> bool:
    """Whether the job succeeded or failed."""
    return finished(conditions_of(resource))


def find(conditions: list[dict], ctype: str) -> dict | None:
    spellings = ALIASES.get(ctype, (ctype,))
    return next((c for c in conditions if c.get("type") in spellings), None)


def is_true(conditions: list[dict], ctype: str) -> bool:
    condition = find(conditions, ctype)
    return bool(condition) and condition.get("status") == "True"


def finished(conditions: list[dict]) -> bool:
    return any(is_true(conditions, ctype) for ctype in TERMINAL)


def set_condition(conditions: list[dict], ctype: str, status: str, reason: str, message: str, now: str) -> list[dict]:
    """Return the new list after setting one condition (rules 1-6 of contract 1.5)."""
    if is_true(conditions, "Failed"):
        return conditions
    current = find(conditions, ctype)
    if current and current.get("status") == status and current.get("reason") == reason:
        return conditions
    transition = current["lastTransitionTime"] if current and current.get("status") == status else now
    updated = [c for c in conditions if c.get("type") != ctype]
    if ctype == "Restarting":
        updated = [c for c in updated if c.get("type") != "Running"]
    elif ctype == "Running" and status == "True":
        updated = [c for c in updated if c.get("type") != "Restarting"]
    if ctype in TERMINAL and status == "True":
        updated = [{**c, "status": "False"} if c.get("type") == "Running" else c for c in updated]
    updated.append({"type": ctype, "status": status, "reason": reason, "message": message,
                    "lastUpdateTime": now, "lastTransitionTime": transition})
    return updated
