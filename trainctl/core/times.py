"""The API's timestamps: RFC 3339 to the second, in UTC, as Kubernetes writes them in conditions and events.

A module of its own, so what only reads or stamps a time (the local backend's reads, a command) need not
load the reconcile engine to do so.
"""

from __future__ import annotations

from datetime import datetime, timezone


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
