"""How jobs show in IPython and Jupyter: a handle or a job list as a table, a handle's logs as text.

IPython asks an object for its representations (``_repr_mimebundle_``, ``_repr_pretty_``);
plain Python keeps the short ``repr``, which reads nothing. A table has the columns of
``trainctl list`` (state, replicas, age, duration, progress), from the same row function, as HTML for a
notebook and as the CLI's plain columns for a terminal. The job is read when it is shown, so
a handle displayed twice shows its state twice.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainctl.api import Client
    from trainctl.backends.base import LogLine
    from trainctl.handle import JobHandle


def table(client: Client, resources: list[dict]) -> dict[str, str]:
    """The jobs as ``trainctl list`` shows them: ``{"text/html": <table>, "text/plain": columns}``."""
    from trainctl.cli.formatting import column_widths, plain_lines
    from trainctl.cli.status import job_row, list_columns, progress_cell

    headers = list_columns(wide=False)
    rows = [job_row(resource, False, progress_cell(client, resource)) for resource in resources]
    cells = "".join(f"<th>{html.escape(header)}</th>" for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return {"text/html": f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>",
            "text/plain": "\n".join(plain_lines(headers, rows, column_widths(headers, rows)))}


class Jobs(list):
    """``client.jobs()``: a list of handles that shows as a table of the jobs as they were listed (a list's own
    printer would win over a bundle in IPython, so HTML and text come from their own methods)."""

    def __init__(self, client: Client, handles: list[JobHandle], resources: list[dict]) -> None:
        super().__init__(handles)
        self.client, self.resources = client, resources

    def _repr_html_(self) -> str:
        return table(self.client, self.resources)["text/html"]

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(table(self.client, self.resources)["text/plain"])


class LogLines:
    """``job.logs()``: the lines, one at a time, as an iterator; shown in IPython, their text."""

    def __init__(self, lines: Iterator[LogLine]) -> None:
        self.lines = lines

    def __iter__(self) -> Iterator[LogLine]:
        return self

    def __next__(self) -> LogLine:
        return next(self.lines)

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text("\n".join(str(line) for line in self))
