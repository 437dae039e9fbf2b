"""Durations as people write them on a command line: ``90``, ``90s``, ``5m``, ``1h30m``.

Apart from the option table (options.py) so that ``logs --since`` and ``wait --timeout`` read one without
loading the whole submission pipeline.
"""

from __future__ import annotations

import re

from trainctl.errors import UserError

DURATION = r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?"  # compiled on first use: most commands take none


def parse_duration(text: str | None, flag: str) -> int | None:
    """``90``, ``90s``, ``5m``, ``1h30m`` -> seconds."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    match = re.fullmatch(DURATION, text)
    if not text or not match or not any(match.groups()):
        raise UserError(f"{flag} {text!r}: expected a duration such as 30s, 5m or 1h30m")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds
