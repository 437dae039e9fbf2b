"""Job conditions with the operator's update rules (contract 1.5).

Conditions are a list; the last one is the job's state (the ``State`` column).
"""

from __future__ import annotations

TERMINAL = ("Succeeded", "Failed")


def find(conditions: list[dict], ctype: str) -> dict | None:
    return next((c for c in conditions if c.get("type") == ctype), None)


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
