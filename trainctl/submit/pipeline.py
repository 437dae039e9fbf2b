"""One submission pipeline, for ``trainctl submit`` and ``Client.run`` alike: options in, a job to create out.

    check -> what travels -> render   (then the client creates it)

1. :func:`trainctl.submit.options.check`: every option's value parsed and checked, once, before
   anything else runs; a problem is one line naming the option as the caller spells it.
2. :func:`trainctl.submit.code_plan.request`: what travels with the job (a snapshot of the working
   directory, packages to install), which depends on the backend.
3. :func:`trainctl.submit.render.render`: the kind's template filled with the checked values, ``--set``
   applied, the code attached, the resource validated. Nothing is created here: a dry run prints
   the :class:`Submission`, anything else hands it to ``Client.submit``.

The front-ends only translate: the CLI (trainctl/cli/submit.py) turns flags and ``-f`` values into
:class:`~trainctl.submit.options.SubmitOptions` and prints; ``Client.run`` (trainctl/sdk/running.py) turns
keywords, and a function into its command and files (which it writes before the create). Neither
checks a value itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainctl.submit.options import Checked, SubmitOptions, check

if TYPE_CHECKING:
    from trainctl.code.pods import CodeRequest
    from trainctl.frameworks import Framework


@dataclass(frozen=True)
class Submission:
    """A job ready to create: its resource, rendered and validated, and the code that travels with it."""

    framework: Framework
    options: Checked
    resource: dict
    code: CodeRequest | None


def prepare(framework: Framework, options: SubmitOptions, backend_name: str,
            extra: dict[str, bytes] | None = None) -> Submission:
    """Steps 1 to 3: the job ``options`` ask for on ``backend_name``, nothing created. ``extra``: files trainctl
    adds to the code snapshot when one travels (a function's, a recipe)."""
    from trainctl.submit.code_plan import request
    from trainctl.submit.render import render

    checked = check(framework, options)
    code = request(checked, backend_name, framework.kind, extra)
    return Submission(framework, checked, render(framework, checked, code), code)
