"""Shell completion of values: job names, job kinds and replica names (bash, zsh and fish alike).

Typer calls these while the shell waits for an answer, so each must be quick and must never
fail: the local backend is a directory listing; a cluster is asked only with a short
timeout per request and an overall deadline, and any error completes nothing rather than
printing a traceback into the user's prompt. The namespace and backend options already on
the command line (``-n``, ``--local``, ``--context``, ``--kubeconfig``) are honoured.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

CLUSTER_DEADLINE_S = 1.5  # everything a completion may spend asking a cluster


def job_kinds(incomplete: str) -> list[tuple[str, str]]:
    from trainctl.frameworks import ALL

    return [(fw.name, fw.kind) for fw in ALL if fw.name.startswith(incomplete)]


# ``ctx`` has no annotation: typer evaluates a completer's annotations, and this module is imported without
# typer on cli/fast.py's path; typer then passes the click context by the parameter's name
def job_names(ctx, incomplete: str) -> list[tuple[str, str]]:
    """Names of the jobs in the command's namespace, each with its kind as the help text."""
    try:
        return [(name, kind) for name, kind in _jobs(ctx.params) if name.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - a completion must never break the shell prompt
        return []


def replica_names(ctx, incomplete: str) -> list[str]:
    """``master-0``, ``worker-1`` ... of the job named earlier on the command line."""
    try:
        from trainctl.core.job import Job

        params = _parsed_params(ctx, incomplete)
        job = Job(_resource(params, params["name"]))
        names = [job.replica_id(t, i) for t in job.replica_types for i in range(job.replicas(t))]
    except Exception:  # noqa: BLE001 - unknown job, no cluster: nothing to offer
        return []
    return [name for name in names if name.startswith(incomplete)]


def _parsed_params(ctx: typer.Context, incomplete: str) -> dict:
    """The command's parameters, even while an option's value is being completed.

    Click parses the line resiliently, but an option still missing its value (``--replica``
    at the end) makes it drop every parameter; parsing the shell's words without that
    option recovers the job name and ``-n``.
    """
    if ctx.params.get("name") is not None:
        return ctx.params
    import os
    import shlex

    if "COMP_WORDS" in os.environ:  # bash: the words and the index of the one being completed
        words = shlex.split(os.environ["COMP_WORDS"])[:int(os.environ.get("COMP_CWORD", "0"))]
    else:  # zsh and fish: the line so far, the incomplete word last
        words = shlex.split(os.environ.get("_TYPER_COMPLETE_ARGS", ""))
        words = words[:-1] if incomplete and words and words[-1] == incomplete else words
    rest = words[words.index(ctx.info_name) + 1:] if ctx.info_name in words else []
    if rest and rest[-1].startswith("-"):
        rest = rest[:-1]  # the option whose value is being completed
    return ctx.command.make_context(ctx.info_name, rest, resilient_parsing=True).params


def _backend_name(params: dict) -> str:
    from trainctl.sdk.client import choose_backend

    return choose_backend("local" if params.get("local") else None, params.get("context"), params.get("kubeconfig"))


def _jobs(params: dict) -> list[tuple[str, str]]:
    namespace = params.get("namespace")
    if _backend_name(params) == "local":
        from trainctl.paths import home

        folder = home() / "jobs" / (namespace or "default")
        return [(path.name, "") for path in sorted(folder.iterdir()) if (path / "job.json").is_file()]
    from trainctl.frameworks import ALL
    from trainctl.kube import job_resource

    rest = _cluster(params)
    deadline = time.monotonic() + CLUSTER_DEADLINE_S
    found = []
    for framework in ALL:
        if time.monotonic() > deadline:
            break
        try:
            items = rest.list(job_resource(framework), namespace or rest.config.namespace)["items"]
        except Exception:  # noqa: BLE001 - that kind's CRD may be missing; the others still count
            continue
        found += [(item["metadata"]["name"], framework.kind) for item in items]
    return sorted(found)


def _resource(params: dict, name: str) -> dict:
    if _backend_name(params) == "local":
        from trainctl.backends.local.store import JobDir

        return JobDir(params.get("namespace") or "default", name).read_job()
    from trainctl.backends.kube.backend import KubeBackend

    backend = KubeBackend(context=params.get("context"), kubeconfig=params.get("kubeconfig"))
    backend.client.timeout = CLUSTER_DEADLINE_S / 3
    return backend.find(name, params.get("namespace") or backend.default_namespace())


def _cluster(params: dict):
    """trainctl's REST client with a short timeout: a slow cluster completes nothing, quickly."""
    from trainctl.kube.client import connect

    rest = connect(params.get("context"), params.get("kubeconfig"))
    rest.timeout = CLUSTER_DEADLINE_S / 3
    return rest
