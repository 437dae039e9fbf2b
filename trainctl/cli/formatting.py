"""What every command on existing jobs shares: the job-name argument, durations, ages, colors, tables.

Tables follow kubectl: on a terminal a Rich table whose NAME column is never cut (other
columns fold); piped, plain columns three spaces apart, every value whole, no color codes,
so ``trainctl list | awk '{print $2}'`` sees full names.
"""

from __future__ import annotations

from typing import Annotated

from trainctl import API_GROUP
from trainctl.cli import completers
from trainctl.cli.params import Argument
from trainctl.cli.plain import echo, shown
from trainctl.errors import UserError
from trainctl.sdk.display import column_widths, plain_lines

Name = Annotated[str, Argument(help="Job name (see trainctl list).", show_default=False,
                               autocompletion=completers.job_names)]
PREFIX_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
STATE_COLORS = {"Succeeded": "green", "Failed": "red", "Running": "cyan", "Restarting": "yellow",
                "Suspended": "yellow", "Created": "white", "Pending": "white"}


def colored_state(state: str) -> str:
    """A job's or a replica's state in its color; a state is what the API says, shown as it reads (plain.shown)."""
    return f"[{STATE_COLORS.get(state, 'white')}]{shown(state)}[/]"


def resource_name(resource: dict) -> str:
    """kubectl's ``-o name`` form: ``pytorchjob.kubeflow.org/mnist``."""
    return f"{resource['kind'].lower()}.{API_GROUP}/{resource['metadata']['name']}"


def split_kind(reference: str) -> tuple[str | None, str]:
    """``tfjob/mnist`` (kind in any spelling by_name knows) -> (``TFJob``, ``mnist``); ``mnist`` -> (None, ``mnist``)."""
    if "/" not in reference:
        return None, reference
    from trainctl.frameworks import DEFAULT, by_name

    kind, _, name = reference.partition("/")
    if not name or "/" in name:
        raise UserError(f"{reference!r}: write NAME or KIND/NAME, e.g. {DEFAULT.singular}/mnist")
    return by_name(kind).kind, name


def print_table(headers: list[str], rows: list[list[str]], whole: tuple[str, ...] = ("NAME", "REPLICA")) -> None:
    """Rows of plain strings under ``headers``; the STATE column is colored on a terminal.

    Columns named in ``whole`` are never wrapped or cut, on a terminal either.
    """
    from trainctl.cli.common import console, stdout_is_terminal

    if not stdout_is_terminal():
        echo("\n".join(plain_lines(headers, rows, column_widths(headers, rows))))
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
