"""Turn ``trainctl submit`` options into a validated kubeflow.org/v1 job resource.

A Jinja template per kind lays the resource out (``templates/<kind>.yaml.j2``;
users may override it, see :func:`template_dirs`). Rendering is injection-safe by
construction: the environment is sandboxed and immutable, undefined names are
errors, and every ``{{ value }}`` is finalized to JSON, which YAML reads as a
quoted scalar, list or mapping. A user value therefore always lands as data and
never as YAML structure or template code. The YAML is parsed, ``--set`` edits
are applied, and the result goes through :func:`trainctl.validation.validate`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from trainctl.errors import UserError, option
from trainctl.frameworks import Framework
from trainctl.job import KUEUE_QUEUE_LABEL
from trainctl.submit_options import (
    INT64_MAX,
    SubmitOptions,
    check_given,
    clean_pod_policy,
    env_pairs,
    generated_name,
    label_map,
    local_queue,
    positive,
    quantity,
    restart_policy,
    stall_annotations,
    tolerations,
    volumes,
)

if TYPE_CHECKING:
    from trainctl.code.pods import CodeRequest

LAUNCHERS = ("mpirun", "mpiexec", "horovodrun", "prterun")
# What `submit` writes as runPolicy.backoffLimit unless --backoff-limit or a values file says
# otherwise: without one the operator (and PyTorchJob's default OnFailure) restarts a crashing
# replica forever. A template that writes its own runPolicy keeps its value.
DEFAULT_BACKOFF_LIMIT = 3
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
    package = Path(__file__).resolve().parent
    installed = package / "_templates"
    return installed if installed.is_dir() else package.parent / "templates"


def template_name(framework: Framework) -> str:
    return f"{framework.singular}.yaml.j2"


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


def render(framework: Framework, options: SubmitOptions, code: CodeRequest | None = None) -> dict:
    """The validated job resource for ``options`` (nothing is applied); with ``code`` (from
    :func:`trainctl.code.plan.request`), every replica gets the snapshot and packages it names."""
    import jinja2

    from trainctl.setpath import apply_set
    from trainctl.validation import validate
    from trainctl.yamlsafe import load_one

    context = template_context(framework, options)
    source = options.template or template_name(framework)
    try:
        if options.template:
            path = Path(options.template)
            if not path.is_file():
                raise UserError(f"{option('template')} {options.template!r}: no such file")
            template = environment(path.parent).get_template(path.name)
        else:
            template = environment().get_template(template_name(framework))
        text = template.render(context)
    except jinja2.TemplateError as err:
        raise template_error(err, source) from None
    except UnicodeDecodeError as err:  # jinja2 reads template files as UTF-8
        raise UserError(f"template {source}: not UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start}): "
                        "save it as UTF-8") from None
    resource = load_one(text, f"template {template.filename}")
    check_rendered(resource, template.filename, framework)
    for assignment in options.set:
        apply_set(resource, assignment)
    if code is not None:  # after --set: the init container takes the image the replica ends up with
        from trainctl.code.pods import attach

        attach(resource, framework, code)
    return validate(resource, source=f"rendered from {source}" if options.template or options.set else None)


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


def check_rendered(resource: object, filename: str, framework: Framework) -> None:
    """A template must render one mapping, the job; an empty one (a shell redirect truncates its
    target before the command runs) must not pass for a template that says nothing."""
    if resource is None:
        raise UserError(f"template {filename} is empty: fill it (trainctl templates show {framework.name} "
                        f"> {filename}) or delete it to use the next one")
    if not isinstance(resource, dict):
        raise UserError(f"template {filename} renders a {type(resource).__name__}, not a mapping: "
                        f"a template must render one {framework.kind} resource")


def template_context(framework: Framework, options: SubmitOptions) -> dict:
    """Every value a template may use, checked and converted from the options."""
    if not options.command:
        raise UserError("missing command: put it after --, e.g. trainctl submit pytorch -- python train.py")
    check_given(options)
    topology = replica_topology(framework, options)
    mounts, pod_volumes = volume_sections(options)
    labels = label_map(options.label, "label")
    return {
        "kind": framework.kind,
        "replica_spec_field": framework.replica_spec_field,
        "container": framework.container,
        "port_name": framework.port_name,
        "port": framework.port,
        "name": options.name or generated_name(framework.name),
        "namespace": options.namespace,
        "labels": queue_labels(labels, options.local_queue),
        "annotations": {**label_map(options.annotation, "annotation", check_value=False),
                        **stall_annotations(options)},
        "pod_labels": labels,
        "pod_annotations": {},
        "run_policy": run_policy(options, sum(topology.values())),
        "image": options.image or framework.default_image,
        "env": [{"name": key, "value": value} for key, value in env_pairs(options.env)],
        "replicas": [
            replica_context(framework, options, rtype, count) for rtype, count in topology.items()
        ],
        "volumes": pod_volumes,
        "volume_mounts": mounts,
        "node_selector": label_map(options.node_selector, "node_selector"),
        "tolerations": tolerations(options.toleration),
        "priority_class": options.priority_class,
        "nproc_per_node": options.nproc_per_node,
        "slots_per_worker": positive(options.slots_per_worker, "slots_per_worker"),
    }


def queue_labels(labels: dict[str, str], queue: str | None) -> dict[str, str]:
    """The job's labels plus Kueue's queue label (on the job only: Kueue reads it there)."""
    if local_queue(queue) is None:
        return labels
    if labels.get(KUEUE_QUEUE_LABEL, queue) != queue:
        raise UserError(f"{option('label')} {KUEUE_QUEUE_LABEL}={labels[KUEUE_QUEUE_LABEL]} and "
                        f"{option('local_queue')} {queue}: give the queue once, with {option('local_queue')}")
    return {**labels, KUEUE_QUEUE_LABEL: queue}


def replica_topology(framework: Framework, options: SubmitOptions) -> dict[str, int]:
    workers = positive(options.workers, "workers")
    extras = {"ps": options.ps, "chief": options.chief, "evaluator": options.evaluator}
    for name, value in extras.items():
        if value is not None and framework.kind != "TFJob":
            raise UserError(f"{option(name)} applies to tensorflow jobs only (this is {framework.name})")
        positive(value, name, minimum=0)
    if (options.chief or 0) > 1:
        raise UserError(f"{option('chief')} {options.chief}: a TFJob has at most one chief")
    if options.nproc_per_node is not None and framework.kind != "PyTorchJob":
        raise UserError(f"{option('nproc_per_node')} applies to pytorch jobs only (this is {framework.name})")
    if options.slots_per_worker is not None and framework.kind != "MPIJob":
        raise UserError(f"{option('slots_per_worker')} applies to mpi jobs only (this is {framework.name})")
    default = 2 if framework.kind == "PyTorchJob" else 1
    return framework.topology(workers or default, **{k: v or 0 for k, v in extras.items()})


def replica_context(framework: Framework, options: SubmitOptions, rtype: str, count: int) -> dict:
    runs_command = not (framework.kind == "MPIJob" and rtype == "Worker")
    return {
        "type": rtype,
        "count": count,
        "restart_policy": restart_policy(options.restart_policy) or framework.restart_policy,
        "command": replica_command(framework, options) if runs_command else None,
        "working_dir": None,
        "resources": resources(options, gpus=not (framework.kind == "MPIJob" and rtype == "Launcher")),
    }


def replica_command(framework: Framework, options: SubmitOptions) -> list[str]:
    """The command as given; an MPI launcher gets ``mpirun -np <ranks>`` in front unless it has one."""
    command = list(options.command)
    if framework.kind != "MPIJob" or Path(command[0]).name in LAUNCHERS:
        return command
    ranks = (options.workers or 1) * (options.slots_per_worker or 1)
    return ["mpirun", "--allow-run-as-root", "-np", str(ranks), "--bind-to", "none", *command]


def resources(options: SubmitOptions, gpus: bool) -> dict:
    amounts = {
        "cpu": quantity(options.cpu, "cpu"),
        "memory": quantity(options.memory, "memory"),
    }
    limits = {key: value for key, value in amounts.items() if value is not None}
    if gpus and positive(options.gpus, "gpus", minimum=0):
        limits["nvidia.com/gpu"] = options.gpus
    requests = {key: value for key, value in limits.items() if key != "nvidia.com/gpu"}
    return {key: value for key, value in (("limits", limits), ("requests", requests)) if value}


def run_policy(options: SubmitOptions, total_replicas: int) -> dict:
    policy = {
        "cleanPodPolicy": clean_pod_policy(options.clean_pod_policy),
        "backoffLimit": DEFAULT_BACKOFF_LIMIT if options.backoff_limit is None
        else positive(options.backoff_limit, "backoff_limit", minimum=0),
        "activeDeadlineSeconds": positive(options.active_deadline, "active_deadline", maximum=INT64_MAX),
        "ttlSecondsAfterFinished": positive(options.ttl_after_finished, "ttl_after_finished", minimum=0),
        "suspend": options.suspend or bool(options.local_queue) or None,  # Kueue admits by unsuspending
    }
    scheduling = {
        "queue": options.queue,
        "priorityClass": options.priority_class,
        "minAvailable": total_replicas if options.gang else None,
    }
    scheduling = {key: value for key, value in scheduling.items() if value is not None}
    if scheduling:
        policy["schedulingPolicy"] = scheduling
    return {key: value for key, value in policy.items() if value is not None}


def volume_sections(options: SubmitOptions) -> tuple[list[dict], list[dict]]:
    parsed = volumes(options.volume)
    mounts = [{"name": v.name, "mountPath": v.mount_path, **({"readOnly": True} if v.read_only else {})}
              for v in parsed]
    pod_volumes = [{"name": v.name, **v.source} for v in parsed]
    if options.shm_size is not None:
        size = quantity(options.shm_size, "shm_size")
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        pod_volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size}})
    return mounts, pod_volumes
