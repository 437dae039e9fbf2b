"""One submission pipeline, for ``trainctl submit`` and ``Client.run`` alike: options in, a created job out.

    check -> what travels -> render -> (a local function's files) -> create

1. :func:`trainctl.submit_options.check`: every option's value parsed and checked, once, before
   anything else runs; a problem is one line naming the option as the caller spells it.
2. :func:`trainctl.code.plan.request`: what travels with the job (a snapshot of the working
   directory, packages to install), which depends on the backend.
3. :func:`trainctl.render.render`: the kind's template filled with the checked values, ``--set``
   applied, the code attached, the resource validated. Nothing is created up to here: a dry run
   stops after :func:`prepare`.
4. :func:`submitted`: a local function job's files written, then the job created through the
   client; a create that fails leaves no files behind.

The front-ends only translate: the CLI (trainctl/cli/submit.py) turns flags and ``-f`` values into
:class:`~trainctl.submit_options.SubmitOptions` and prints; ``Client.run`` (trainctl/running.py) turns
keywords, and a function into its command and files. Neither checks a value itself.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainctl.submit_options import Checked, SubmitOptions, check

if TYPE_CHECKING:
    from trainctl.api import Client
    from trainctl.code.pods import CodeRequest
    from trainctl.frameworks import Framework
    from trainctl.functions import Shipment


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
    from trainctl.code.plan import request
    from trainctl.render import render

    checked = check(framework, options)
    code = request(checked, backend_name, framework.kind, extra)
    return Submission(framework, checked, render(framework, checked, code), code)


def submitted(client: Client, resource: dict, code: CodeRequest | None, local_files: Shipment | None,
              replace: bool, preflight: bool) -> dict:
    """Step 4: write a local function's files (``local_files``), then create the job; a failed create leaves no
    files behind. The job as stored."""
    if local_files is None:
        return client.submit(resource, replace=replace, preflight=preflight, code=code)
    from trainctl import functions

    directory = functions.place_locally(local_files, functions_root())
    try:
        return client.submit(resource, replace=replace, preflight=preflight, code=code)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def functions_root():
    """Where a local job's function files live (one directory per submission, beside the jobs' state)."""
    from trainctl.backends.local.store import home

    return home() / "functions"
