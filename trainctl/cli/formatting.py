"""What every command on existing jobs shares: the job-name argument, durations, ages, colors, tables.

Tables follow kubectl: on a terminal a Rich table whose NAME column is never cut (other
columns fold); piped, plain columns three spaces apart, every value whole, no color codes,
so ``trainctl list | awk '{print $2}'`` sees full names.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

import typer

from trainctl import API_GROUP
from trainctl.cli import completers
from trainctl.errors import UserError
from trainctl.submit_options import parse_duration  # noqa: F401 - the commands' durations (--since, --timeout)

Name = Annotated[str, typer.Argument(help="Job name (see trainctl list).", show_default=False,
                                     autocompletion=completers.job_names)]
PREFIX_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
STATE_COLORS = {"Succeeded": "green", "Failed": "red", "Running": "cyan", "Restarting": "yellow",
                "Suspended": "yellow", "Created": "white", "Pending": "white"}


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


def resource_name(resource: dict) -> str:
    """kubectl's ``-o name`` form: ``pytorchjob.kubeflow.org/mnist``."""
    return f"{resource['kind'].lower()}.{API_GROUP}/{resource['metadata']['name']}"


def split_kind(reference: str) -> tuple[str | None, str]:
    """``tfjob/mnist`` (kind in any spelling by_name knows) -> (``TFJob``, ``mnist``); ``mnist`` -> (None, ``mnist``)."""
    if "/" not in reference:
        return None, reference
    from trainctl.frameworks import by_name

    kind, _, name = reference.partition("/")
    if not name or "/" in name:
        raise UserError(f"{reference!r}: write NAME or KIND/NAME, e.g. pytorchjob/mnist")
    return by_name(kind).kind, name


def print_table(headers: list[str], rows: list[list[str]], whole: tuple[str, ...] = ("NAME", "REPLICA")) -> None:
    """Rows of plain strings under ``headers``; the STATE column is colored on a terminal.

    Columns named in ``whole`` are never wrapped or cut, on a terminal either.
    """
    from trainctl.cli.common import console, stdout_is_terminal

    if not stdout_is_terminal():
        typer.echo("\n".join(plain_lines(headers, rows, column_widths(headers, rows))))
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=None)
    narrowest = []  # whole columns at full width, the others folded down to their header
    for header, width in zip(headers, column_widths(headers, rows)):
        narrowest.append(width if header in whole else len(header))
        table.add_column(header, no_wrap=header in whole, overflow="fold", min_width=narrowest[-1])
    state = headers.index("STATE") if "STATE" in headers else None
    for row in rows:
        table.add_row(*(colored_state(cell) if i == state else escape(cell) for i, cell in enumerate(row)))
    out = console()
    needed = sum(narrowest) + 2 * len(headers)  # each column is padded by a space on either side
    if needed <= out.width:
        out.print(table)
    else:  # wider than the terminal, which wraps the lines: better than a cut name
        from rich.console import Console

        Console(highlight=False, width=needed).print(table, crop=False)


def column_widths(headers: list[str], rows: list[list[str]], minimum: list[int] | None = None) -> list[int]:
    return [max([len(h), *(len(r[i]) for r in rows), *(minimum[i:i + 1] if minimum else [])])
            for i, h in enumerate(headers)]


def plain_lines(headers: list[str] | None, rows: list[list[str]], widths: list[int]) -> list[str]:
    """Whitespace-aligned lines (the header first, when given), as kubectl prints when piped."""
    lines = [headers] if headers else []
    lines += [[cell or "-" for cell in row] for row in rows]  # an empty cell would shift awk's fields
    return ["   ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
