"""What every command on existing jobs shares: the job-name argument, durations, ages, colors."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Annotated

import typer

from trainctl.errors import UserError

Name = Annotated[str, typer.Argument(help="Job name (see trainctl list).", show_default=False)]
PREFIX_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
STATE_COLORS = {"Succeeded": "green", "Failed": "red", "Running": "cyan", "Restarting": "yellow",
                "Suspended": "yellow", "Created": "white", "Pending": "white"}
DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str | None, flag: str) -> int | None:
    """``90``, ``90s``, ``5m``, ``1h30m`` -> seconds."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    match = DURATION.fullmatch(text)
    if not text or not match or not any(match.groups()):
        raise UserError(f"{flag} {text!r}: expected a duration such as 30s, 5m or 1h30m")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def since(timestamp: str | None, until: str | None = None) -> str:
    """Human duration between two RFC 3339 times (until: now)."""
    if not timestamp:
        return "-"
    start = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    end = datetime.strptime(until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) if until \
        else datetime.now(timezone.utc)
    seconds = max(0, int((end - start).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def colored_state(state: str) -> str:
    return f"[{STATE_COLORS.get(state, 'white')}]{state}[/]"


def replica_specs(resource: dict) -> dict:
    return next((v for k, v in (resource.get("spec") or {}).items() if k.endswith("ReplicaSpecs")), {}) or {}
