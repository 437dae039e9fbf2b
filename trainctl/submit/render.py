"""Lay checked submit options out as a validated kubeflow.org/v1 job resource, or (``--api v2``) a Trainer v2
TrainJob on the kind's default ClusterTrainingRuntime.

A Jinja template per kind lays the resource out (``templates/<kind>.yaml.j2``, and ``templates/trainjob.yaml.j2``
for every kind's TrainJob; users may override them, see :func:`template_dirs`). It receives the options as
:func:`trainctl.submit.options.check` made them, every value parsed and checked
already: this module only arranges them (replicas, run policy, resources, volumes)
and never refuses a value. Rendering is injection-safe by construction: the
environment is sandboxed and immutable, undefined names are errors, and every
``{{ value }}`` is finalized to JSON, which YAML reads as a quoted scalar, list or
mapping. A user value therefore always lands as data and never as YAML structure or
template code. The YAML is parsed, ``--set`` edits are applied, and the result goes
through :func:`trainctl.core.validation.validate`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from trainctl.core.trainer_crds import TRAINJOB
from trainctl.errors import UserError, option
from trainctl.frameworks import Framework, kind_options
from trainctl.submit.options import Checked, SubmitOptions, as_checked

if TYPE_CHECKING:
    from trainctl.code.pods import CodeRequest

# What `submit` writes as runPolicy.backoffLimit unless --backoff-limit or a values file says
# otherwise: without one the operator (and PyTorchJob's default OnFailure) restarts a crashing
# replica forever. A template that writes its own runPolicy keeps its value.
DEFAULT_BACKOFF_LIMIT = 3
GPU_RESOURCE = "nvidia.com/gpu"
V2_TEMPLATE = "trainjob.yaml.j2"  # --api v2: a TrainJob, whatever the kind
# Characters JSON leaves raw but YAML does not read back as themselves: U+0085, U+2028 and
# U+2029 are YAML line breaks (folded into a space inside quotes); DEL, the C1 controls, the
# BOM and U+FFFE/U+FFFF are not allowed raw at all. Written as \uXXXX they survive exactly.
YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def template_dirs() -> list[tuple[str, Path]]:
    """Where templates are looked up, highest priority first (after --template)."""
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [
        ("project", Path.cwd() / ".trainctl" / "templates"),
        ("user", config_home / "trainctl" / "templates"),
        ("built-in", builtin_dir()),
    ]


def builtin_dir() -> Path:
    """The templates shipped with trainctl: ``trainctl/_templates`` in an installed wheel,
    ``templates/`` at the top of a source checkout (the same files)."""
    package = Path(__file__).resolve().parents[1]  # trainctl/, this module being trainctl/submit/render.py
    installed = package / "_templates"
    return installed if installed.is_dir() else package.parent / "templates"


def template_name(framework: Framework, api: str | None = None) -> str:
    """The template a job of ``framework`` renders with: the kind's, or with ``--api v2`` the TrainJob's."""
    return V2_TEMPLATE if api == "v2" else f"{framework.singular}.yaml.j2"


def environment(extra_dir: Path | None = None):
    from jinja2 import ChoiceLoader, FileSystemLoader, StrictUndefined, Undefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def printed(value: object) -> str:
        if isinstance(value, Undefined):
            str(value)  # raises UndefinedError naming the variable (json.dumps would raise a bare TypeError)
        return yaml_scalar(value)

    dirs = ([extra_dir] if extra_dir else []) + [path for _, path in template_dirs()]
    return ImmutableSandboxedEnvironment(
        loader=ChoiceLoader([FileSystemLoader(str(path)) for path in dirs]),
        undefined=StrictUndefined,
        autoescape=False,
        finalize=printed,
        keep_trailing_newline=True,
    )


def yaml_scalar(value: object) -> str:
    """``value`` as JSON that YAML reads back exactly: the template's only way to print a value."""
    return YAML_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", json.dumps(value, ensure_ascii=False))


def render(framework: Framework, options: SubmitOptions | Checked, code: CodeRequest | None = None) -> dict:
    """The validated job resource for ``options`` (checked here unless :func:`check` made them already; nothing is
    applied); with ``code`` (from :func:`trainctl.submit.code_plan.request`), every replica gets the snapshot and
    packages it names."""
    from trainctl.core.validation import validate
    from trainctl.submit.setpath import apply_set
    from trainctl.yamlsafe import load_one

    checked = as_checked(framework, options)
    name = template_name(framework, checked.api)
    template = load_template(name, checked.template)
    context = trainjob_context(checked) if checked.api == "v2" else template_context(checked)
    resource = load_one(filled(template, context, checked.template or name), f"template {template.filename}")
    check_rendered(resource, template.filename, framework, name)
    for assignment in checked.set:
        apply_set(resource, assignment)
    if code is not None:  # after --set: the init container takes the image the replica ends up with
        from trainctl.code.pods import attach, attach_trainjob

        (attach_trainjob if checked.api == "v2" else attach)(resource, framework, code)
    return validate(resource, source=f"rendered from {checked.template or name}"
                    if checked.template or checked.set else None)


def load_template(name: str, given: str | None):
    """The template file given (``--template``), else ``name``, first found in :func:`template_dirs`."""
    import jinja2

    source = given or name
    try:
        if given is None:
            return environment().get_template(name)
        path = Path(given)
        if not path.is_file():
            raise UserError(f"{option('template')} {given!r}: no such file")
        return environment(path.parent).get_template(path.name)
    except jinja2.TemplateError as err:
        raise template_error(err, source) from None
    except UnicodeDecodeError as err:  # jinja2 reads template files as UTF-8
        raise UserError(f"template {source}: not UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start}): "
                        "save it as UTF-8") from None


def filled(template, context: dict, source: str) -> str:
    """The template's text with ``context``; a template's own mistake is one line naming its file and line."""
    import jinja2

    try:
        return template.render(context)
    except jinja2.TemplateError as err:
        raise template_error(err, source) from None


def template_error(err, source: str) -> UserError:
    """A Jinja error as one line: the template file and line, then what is wrong."""
    import jinja2

    if isinstance(err, jinja2.TemplateSyntaxError):
        where = f"{err.filename or err.name or source}:{err.lineno}"
    else:  # raised while rendering: the innermost template frame of the traceback has the line
        frames = [(tb.tb_frame.f_code.co_filename, tb.tb_lineno) for tb in traceback_frames(err.__traceback__)]
        where = next((f"{name}:{line}" for name, line in reversed(frames)
                      if not name.endswith(".py") and not name.startswith("<")), source)
    return UserError(f"template {where}: {type(err).__name__}: {err.message or err}")


def traceback_frames(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def check_rendered(resource: object, filename: str, framework: Framework, name: str) -> None:
    """A template must render one mapping, the job; an empty one (a shell redirect truncates its
    target before the command runs) must not pass for a template that says nothing."""
    if resource is None:
        shown = "trainjob" if name == V2_TEMPLATE else framework.name
        raise UserError(f"template {filename} is empty: fill it (trainctl templates show {shown} "
                        f"> {filename}) or delete it to use the next one")
    if not isinstance(resource, dict):
        raise UserError(f"template {filename} renders a {type(resource).__name__}, not a mapping: "
                        f"a template must render one {TRAINJOB if name == V2_TEMPLATE else framework.kind} resource")


def template_context(checked: Checked) -> dict:
    """Every value a template may use, laid out from the checked options."""
    framework = checked.framework
    mounts, pod_volumes = volume_sections(checked)
    return {
        "kind": framework.kind,
        "replica_spec_field": framework.replica_spec_field,
        "container": framework.container,
        "port_name": framework.port_name,
        "port": framework.port,
        "name": checked.name,
        "namespace": checked.namespace,
        "labels": checked.labels,
        "annotations": {**checked.annotation, **stall_annotations(checked), **restart_annotations(checked)},
        "pod_labels": checked.label,
        "pod_annotations": {},
        "run_policy": run_policy(checked),
        "image": checked.image,
        "env": [{"name": key, "value": value} for key, value in checked.env],
        "replicas": [replica_context(checked, rtype, count) for rtype, count in checked.topology.items()],
        "volumes": pod_volumes,
        "volume_mounts": mounts,
        "node_selector": checked.node_selector,
        "tolerations": checked.toleration,
        "priority_class": checked.priority_class,
        **{name: checked.values[name] for name in kind_options()},  # every kind's, so any template may ask
    }


def stall_annotations(checked: Checked) -> dict[str, str]:
    """``--stall-after``/``--stall-timeout`` as the job's annotations (trainctl.core.job), in whole seconds."""
    from trainctl.core.job import STALL_AFTER_ANNOTATION, STALL_TIMEOUT_ANNOTATION

    given = ((STALL_AFTER_ANNOTATION, checked.stall_after), (STALL_TIMEOUT_ANNOTATION, checked.stall_timeout))
    return {key: str(seconds) for key, seconds in given if seconds is not None}


def restart_annotations(checked: Checked) -> dict[str, str]:
    """``--restart-scope``, ``--retry-on-exit-codes``, ``--node-lost-after`` and ``--checkpoints`` as the job's
    annotations (trainctl.core.restarts, trainctl.core.checkpoint_volume)."""
    from trainctl.core.checkpoint_volume import ANNOTATION as CHECKPOINTS
    from trainctl.core.restarts import NODE_LOST_AFTER_ANNOTATION, RESTART_SCOPE_ANNOTATION, RETRY_EXIT_CODES_ANNOTATION

    lost_after = checked.node_lost_after
    given = ((RESTART_SCOPE_ANNOTATION, checked.restart_scope), (CHECKPOINTS, checked.checkpoints),
             (RETRY_EXIT_CODES_ANNOTATION, ",".join(map(str, checked.retry_on_exit_codes)) or None),
             (NODE_LOST_AFTER_ANNOTATION, None if lost_after is None else str(lost_after)))
    return {key: value for key, value in given if value is not None}


def replica_context(checked: Checked, rtype: str, count: int) -> dict:
    framework = checked.framework
    runs_command = framework.idle_command(rtype) is None  # a replica that hosts another's ranks idles
    return {
        "type": rtype,
        "count": count,
        "restart_policy": checked.restart_policy or framework.restart_policy,
        "command": framework.command(checked.command, checked.workers, checked.own) if runs_command else None,
        "working_dir": None,
        "resources": resources(checked, gpus=framework.takes_gpus(rtype)),
    }


def resources(checked: Checked, gpus: bool) -> dict:
    limits = {key: checked.values[key] for key in ("cpu", "memory") if checked.values[key] is not None}
    if gpus and checked.gpus:
        limits[GPU_RESOURCE] = checked.gpus
    requests = {key: value for key, value in limits.items() if key != GPU_RESOURCE}
    return {key: value for key, value in (("limits", limits), ("requests", requests)) if value}


def run_policy(checked: Checked) -> dict:
    policy = {
        "cleanPodPolicy": checked.clean_pod_policy,
        "backoffLimit": DEFAULT_BACKOFF_LIMIT if checked.backoff_limit is None else checked.backoff_limit,
        "activeDeadlineSeconds": checked.active_deadline,
        "ttlSecondsAfterFinished": checked.ttl_after_finished,
        "suspend": checked.suspend or bool(checked.local_queue) or None,  # Kueue admits by unsuspending
    }
    scheduling = {
        "queue": checked.queue,
        "priorityClass": checked.priority_class,
        "minAvailable": sum(checked.topology.values()) if checked.gang else None,
    }
    scheduling = {key: value for key, value in scheduling.items() if value is not None}
    if scheduling:
        policy["schedulingPolicy"] = scheduling
    return {key: value for key, value in policy.items() if value is not None}


def volume_sections(checked: Checked) -> tuple[list[dict], list[dict]]:
    mounts = [{"name": v.name, "mountPath": v.mount_path, **({"readOnly": True} if v.read_only else {})}
              for v in checked.volume]
    pod_volumes = [{"name": v.name, **v.source} for v in checked.volume]
    if checked.shm_size is not None:
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        pod_volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": checked.shm_size}})
    return mounts, pod_volumes


def trainjob_context(checked: Checked) -> dict:
    """Every value the TrainJob template may use (``--api v2``), laid out from the checked options: the kind's
    default runtime (trainctl.core.convert, as ``trainctl convert`` names it), its nodes, the command under the
    launcher that stands in for v1's env, as ``convert`` puts it."""
    from trainctl.core.convert import default_runtime_ref, node_command
    from trainctl.submit.options import is_v2_procs

    framework = checked.framework
    shape = framework.trainer_v2
    procs = next((int(value) for name, value in checked.own.items() if value is not None
                  and is_v2_procs(framework, name)), None)
    command, procs = node_command(framework, checked.command, procs)
    return {
        "name": checked.name,
        "namespace": checked.namespace,
        "labels": checked.labels,
        "annotations": {**checked.annotation, **stall_annotations(checked), **restart_annotations(checked)},
        "runtime_ref": default_runtime_ref(framework),
        "suspend": checked.suspend or bool(checked.local_queue),  # Kueue admits by unsuspending
        "active_deadline": checked.active_deadline,
        "image": checked.values["image"],  # given, else the runtime's (the cluster's)
        "command": command,
        "env": [{"name": key, "value": value} for key, value in checked.env],
        "num_nodes": sum(count for rtype, count in checked.topology.items() if rtype in shape.node_types),
        "num_proc_per_node": procs,
        "resources": resources(checked, gpus=True),
    }
