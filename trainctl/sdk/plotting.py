"""Loss curves: ``trainctl plot NAME -o loss.png`` and ``job.plot()``, with matplotlib, an optional extra.

One panel per metric, stacked, over the steps (over the seconds since the first point when the
points carry no steps): a loss and a learning rate live on scales too different for one axis. At most
:data:`MAX_PANELS` in one image: a job that reports hundreds of metrics (a gradient norm per layer) would
otherwise take tens of seconds to draw and outgrow what Agg can render (65,536 pixels a side); by default the first
ones reported are drawn (a script reports its loss first), the title says how many of how many.
The figure is made without pyplot (no GUI backend, no global state), rendered with Agg, and
returned as a :class:`Plot`, which IPython shows inline as a PNG in any kernel. Without matplotlib
the call is one line saying what to install (``pip install 'trainctl[plot]'``).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from trainctl.errors import InvalidArgument, UserError, option, spelled

if TYPE_CHECKING:
    from trainctl.backends.reported import Point

FORMATS = ("png", "svg", "pdf")
PANEL_INCHES = (8.0, 2.6)
MAX_PANELS = 16  # some 0.1 s of CPU a panel to draw


class Plot:
    """A drawn figure: ``.figure`` (matplotlib's), ``.save(path)``; shown inline by IPython."""

    def __init__(self, figure, left_out: tuple[str, ...] = ()) -> None:
        self.figure = figure
        self.left_out = left_out  # the metrics reported but not drawn, past MAX_PANELS

    def save(self, path: str) -> None:
        suffix = str(path).rsplit(".", 1)[-1].lower() if "." in str(path) else ""
        if suffix not in FORMATS:
            raise InvalidArgument(f"{spelled('-o/--output', 'path')} {path!r}: name a .png, .svg or .pdf file")
        try:
            self.render(path, suffix)
        except OSError as error:
            raise UserError(f"cannot write {path}: {error.strerror or error}") from None

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.render(buffer, "png")
        return buffer.getvalue()

    def render(self, target, suffix: str) -> None:
        import warnings

        with warnings.catch_warnings():  # a metric named in a script the font lacks still plots, as boxes
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            self.figure.savefig(target, format=suffix)


def plot(series: list[Point], names: list[str] | None, title: str, path: str | None = None) -> Plot:
    """The curves of ``names`` (default: every metric in ``series``, the first MAX_PANELS of them), written to
    ``path`` when given."""
    if not series:
        raise UserError(f"{title} has reported no metrics (yet): its replicas report them with "
                        "trainctl.report(step=..., loss=...) (docs/progress.md)")
    reported = list(dict.fromkeys(name for point in series for name in point.metrics))
    for name in names or []:
        if not isinstance(name, str) or name not in reported:
            raise InvalidArgument(f"{option('metrics')} {name!r}: {title} reported {', '.join(reported)}")
    if names and len(set(names)) > MAX_PANELS:
        raise InvalidArgument(f"{option('metrics')} names {len(set(names))} metrics: one image draws at most "
                              f"{MAX_PANELS}, so draw them in several")
    chosen = list(dict.fromkeys(names)) if names else reported[:MAX_PANELS]
    left_out = tuple(name for name in reported if name not in chosen) if not names else ()
    heading = f"{title} ({len(chosen)} of {len(reported)} metrics)" if left_out else title
    shown = Plot(drawn(series, chosen, heading), left_out)
    if path is not None:
        shown.save(path)
    return shown


def drawn(series: list[Point], names: list[str], title: str):
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UserError("plotting needs matplotlib, an optional extra: pip install 'trainctl[plot]'") from None
    by_step = all(point.step is not None for point in series)
    start = series[0].time
    figure = Figure(figsize=(PANEL_INCHES[0], PANEL_INCHES[1] * len(names)), layout="constrained")
    axes = figure.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    for panel, name in zip(axes, names):
        shown = [point for point in series if name in point.metrics]
        panel.plot([point.step if by_step else point.time - start for point in shown],
                   [point.metrics[name] for point in shown], linewidth=1.2)
        panel.set_ylabel(name, parse_math=False)  # a replica's text, never matplotlib's $math$
        panel.grid(True, alpha=0.3)
    axes[-1].set_xlabel("step" if by_step else "seconds since the first report")
    axes[0].set_title(title)
    return figure
