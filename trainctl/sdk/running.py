"""``Client.run``: a function or a command line becomes a job, through ``trainctl submit``'s own pipeline.

Every keyword of ``run`` but :data:`RUN_ONLY` is a submit option (trainctl.submit.options.OPTIONS,
the one definition of every ``trainctl submit`` option), and the job goes through the same pipeline
(:mod:`trainctl.submit.pipeline`): a keyword means what its option means and is refused for what the
option is refused for. Python values are converted as a values file's are (``env={"LR": 0.1}`` is
``-e LR=0.1``; ``workers="3"`` is an error, not 3). Every refusal is one
:class:`~trainctl.errors.InvalidArgument` naming the keyword (the shared checks name options through
:func:`trainctl.errors.option`, which spells keywords outside the CLI), raised before anything is
written or created. This module only translates: keywords into options, a function into its command
and files (trainctl.functions.shipping).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import shutil
import sys
import warnings
from typing import TYPE_CHECKING

from trainctl.errors import InvalidArgument, UserError
from trainctl.paths import functions_dir
from trainctl.submit.options import BY_NAME, SubmitOptions, coerce
from trainctl.submit.pipeline import prepare

if TYPE_CHECKING:
    from trainctl.code.pods import CodeRequest
    from trainctl.frameworks import Framework
    from trainctl.functions.shipping import Shipment
    from trainctl.sdk.handle import JobHandle

# A function job's restart policy unless restart_policy= says otherwise. An exception in the user's code
# (the runner then exits 1) is not transient: restarting it only makes the notebook wait backoffLimit times
# the run for the same traceback. ExitCode fails the job at once on exit codes 1-127 and restarts on 128+
# (killed by a signal: OOM, preemption's SIGTERM, a lost node), which is what may pass (docs/python-api.md).
FUNCTION_RESTART_POLICY = "ExitCode"
NOT_KEYWORDS = ("command",)  # run()'s first argument
# run()'s own keywords, no SubmitOptions field
RUN_ONLY = ("framework", "args", "packages", "pickle_result", "replace", "preflight", "dry_run")


def run(client, target: object, *, framework: str, args: dict | None, packages: list[str] | None,
        replace: bool, preflight: bool, dry_run: bool, keywords: dict, pickle_result: bool = False,
        extra: dict[str, bytes] | None = None) -> JobHandle | dict:
    """``client``: the trainctl.sdk.client.Client whose ``run`` this is. ``extra``: files a command needs beside the working directory's (path in the snapshot -> content),
    e.g. a recipe of trainctl's; they travel only where a snapshot does (clusters, or --workdir)."""
    from trainctl.sdk.handle import JobHandle

    if packages is not None:  # the data scientist's name for --pip
        if keywords.get("pip") is not None:
            raise InvalidArgument("packages= is pip= by its data-science name: give one of them")
        keywords = {**keywords, "pip": checked_packages(packages)}
    if not isinstance(pickle_result, bool):
        raise InvalidArgument(f"pickle_result={pickle_result!r}: give True or False")
    resource, code, local_files = planned(client, target, framework, args, keywords, extra, pickle_result)
    for warning in code.snapshot.warnings if code and code.snapshot else []:  # what submit prints in yellow
        warnings.warn(warning, stacklevel=3)
    if dry_run:  # every check the create makes, on the same backend (a local function's files are trainctl's own)
        client.submit(copy.deepcopy(resource), replace=replace, preflight=preflight, code=code, dry_run=True)
        return resource
    stored = submitted(client, resource, code, local_files, replace, preflight)
    return JobHandle(client, stored["metadata"]["name"], stored["metadata"]["namespace"], stored["kind"])


def planned(client, target: object, framework: str, args: dict | None, keywords: dict,
            extra: dict[str, bytes] | None = None,
            pickle_result: bool = False) -> tuple[dict, CodeRequest | None, Shipment | None]:
    """The job's resource, the code that travels with it (as for submit) and, for a function on the local
    backend, the files to write before it runs. Nothing is written here."""
    kind = checked(framework_named, framework)
    if not isinstance(target, (list, tuple)):
        return planned_function(client, kind, target, args, keywords, pickle_result)
    if pickle_result:
        raise InvalidArgument("pickle_result=True is for functions: a command has no result")
    if args is not None:
        raise InvalidArgument("args= is for functions: put a command's arguments in its list, "
                              "e.g. ['python', 'train.py', '--lr', '0.1']")
    submission = checked(prepare, kind, options_from(keywords, checked_command(target)), client.backend_name, extra)
    return submission.resource, submission.code, None


def planned_function(client, kind: Framework, func: object, args: dict | None, keywords: dict,
                     pickle_result: bool) -> tuple[dict, CodeRequest | None, Shipment | None]:
    """:func:`planned` for a function: its files are written beside the local jobs' state, or travel in a
    cluster's code snapshot; the job's annotation names the function."""
    from trainctl.functions import shipping

    shipment = shipping.ship(func, args, kind, pickle_result)
    # a TrainJob's restart policy is its runtime's (api="v2")
    if keywords.get("restart_policy") is None and str(keywords.get("api")).lower() != "v2":
        keywords = {**keywords, "restart_policy": FUNCTION_RESTART_POLICY}
    local = client.backend_name == "local"
    options = options_from(keywords, [])
    if not local and options.no_workdir:
        raise InvalidArgument("no_workdir: a function travels to a cluster in the code snapshot; leave it out")
    runner = functions_dir() / shipment.digest / shipping.RUNNER_FILE if local else shipping.SNAPSHOT_RUNNER
    own = {kind_option.name: getattr(options, kind_option.name) for kind_option in kind.options}
    options = dataclasses.replace(
        options, command=shipping.command(kind, sys.executable if local else "python3", str(runner), own),
        annotation=[*options.annotation, f"{shipping.FUNCTION_ANNOTATION}={shipment.function}"])
    extra = None if local else shipping.snapshot_files(shipment)
    submission = checked(prepare, kind, options, client.backend_name, extra)
    return submission.resource, submission.code, shipment if local else None


def submitted(client, resource: dict, code: CodeRequest | None, local_files: Shipment | None,
              replace: bool, preflight: bool) -> dict:
    """Write a local function's files, then create the job; a failed create leaves no files behind."""
    from trainctl.functions import shipping

    if local_files is None:
        return client.submit(resource, replace=replace, preflight=preflight, code=code)
    directory = shipping.place_locally(local_files, functions_dir())
    try:
        return client.submit(resource, replace=replace, preflight=preflight, code=code)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def framework_named(name: str) -> Framework:
    from trainctl.frameworks import CLI_NAMES, by_name

    if not isinstance(name, str):
        raise UserError(f"framework={name!r}: give one of {', '.join(CLI_NAMES)}")
    return by_name(name)


def checked_packages(packages: object) -> list[str]:
    """``packages``: pip requirement strings, one or a list (None or a number in it would become ``--pip=None``)."""
    items = packages if isinstance(packages, (list, tuple)) else [packages]
    for item in items:
        if not isinstance(item, str):
            raise InvalidArgument(f"packages: {item!r} is a {type(item).__name__}; give requirement strings, "
                                  "e.g. packages=['numpy>=1.26', 'pandas']")
    return list(items)


def checked_command(words: list | tuple) -> list[str]:
    if not words or not all(isinstance(word, str) for word in words):
        raise InvalidArgument(f"command {list(words)!r}: give the words as strings, e.g. ['python', 'train.py']")
    return list(words)


def options_from(keywords: dict, command: list[str]) -> SubmitOptions:
    """The options ``keywords`` give, each converted as a values file's value is; None means "not given"."""
    known = [field.name for field in dataclasses.fields(SubmitOptions) if field.name not in NOT_KEYWORDS]
    given = {}
    for key, value in keywords.items():
        if key not in known:
            guess = difflib.get_close_matches(key, [*known, *RUN_ONLY], n=1)
            hint = f"did you mean {guess[0]}? " if guess else ""
            raise InvalidArgument(f"run() got an unknown keyword {key!r}: {hint}the keywords are the long options "
                                  "of `trainctl submit --help` with _ for - (workers, gpus, env, backoff_limit ...)")
        if value is not None:
            given[key] = checked(coerce, value, BY_NAME[key].type, key)
    return SubmitOptions(command=command, **given)


def checked(step, *arguments):
    """``step(*arguments)``, its UserError as the InvalidArgument a bad keyword is."""
    try:
        return step(*arguments)
    except InvalidArgument:
        raise
    except UserError as error:
        raise InvalidArgument(error.message) from None
