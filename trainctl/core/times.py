"""The API's timestamps: RFC 3339 to the second, in UTC, as Kubernetes writes them in conditions and events.

A module of its own, so what only reads or stamps a time (the local backend's reads, a command) need not
load the reconcile engine to do so.
"""

from __future__ import annotations

from datetime import datetime, timezone


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    """``2026-01-02T03:04:05Z`` as an aware datetime; ValueError for a time that is not in UTC (no ``Z``)."""
    if not text:
        return None
    if not text.endswith("Z"):
        raise ValueError(f"not an RFC 3339 time in UTC: {text!r}")
    return datetime.fromisoformat(text)  # in C: strptime's first use loads _strptime, locale and calendar


def readable_time(text: object) -> datetime | None:
    """:func:`parse_time` for a time anyone may have written: None for what is no RFC 3339 time in UTC."""
    try:
        return parse_time(text) if isinstance(text, str) else None
    except ValueError:
        return None
