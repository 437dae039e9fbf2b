"""The options of a submission: each defined once, then parsed and checked once, before any template runs.

``trainctl submit``'s flags, ``Client.run``'s keywords and a values file's keys (``-f values.yaml``)
are one set of options. :data:`OPTIONS` defines each of them once: its keyword, type, help, flags,
whether the local backend honours it, and the parser that checks and converts a given value.
Everything else is made from that table: the CLI's parameters (trainctl/cli/submit.py),
:class:`SubmitOptions` (what was given: ``None`` or ``[]`` for "not given"), the conversion of a
Python keyword's or a values file's value to the option's type (:func:`coerce`), and :func:`check`,
which turns what was given into :class:`Checked` values for one framework: parsed, defaulted and
checked together, every problem one line that names the option as the caller spells it
(:func:`trainctl.errors.option`). A framework's own options (``--ps``, ``--nproc-per-node``:
``Framework.options``) join the table after ``--memory``; given for another kind, one is refused
naming the kind it is for.

Nothing here builds YAML or reads files: the template receives the checked values as data
(trainctl/submit/render.py), and what travels with the job is decided from them (trainctl/submit/code_plan.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field, fields, make_dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from trainctl.core.job import KUEUE_QUEUE_LABEL
from trainctl.errors import UserError, option, setting, shortened, spelled
from trainctl.frameworks import ALL, Framework
from trainctl.frameworks.base import CLEAN_POD_POLICIES, RESTART_POLICIES, KindOption
from trainctl.kube.names import (
    DNS_1123_SUBDOMAIN,
    TAINT_EFFECTS,
    dns_subdomain_problem,
    env_name_problem,
    label_key_problem,
    label_value_problem,
    process_string_problem,
)
from trainctl.submit.durations import parse_duration
from trainctl.submit.setpath import parse_assignment

QUANTITY = re.compile(r"(\d+(\.\d*)?|\.\d+)([numkMGTPE]|[KMGTPE]i)?")
SIZE = re.compile(r"(\d{1,12})(Ki|Mi|Gi|K|M|G)?")
SIZE_UNITS = {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
MAX_WORKDIR_LIMIT = 256 << 20
# Entries per repeatable option (and words of the command): far above real jobs, and low enough
# that every replica's copy of them renders and validates in well under a second.
MAX_ITEMS = 1000
# The CRD's integer formats: replica counts, backoffLimit and ttlSecondsAfterFinished are int32,
# activeDeadlineSeconds is int64 (checked again on the resource by trainctl.core.validation).
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
REPEAT = "(repeatable)"
APIS = ("v1", "v2")  # --api: a kubeflow.org/v1 job of the kind, or a Trainer v2 TrainJob on the kind's runtime
# why a TrainJob of --api v2 cannot say what an option says
IN_RUNTIME = "a TrainJob has no pod template (its runtime holds it, a TrainingRuntime of your own can)"
NO_RUN_POLICY = "a TrainJob has no such field (its runtime's Jobs and JobSet say it)"
if TYPE_CHECKING:
    SubmitOptions: type  # made from OPTIONS on first use (see __getattr__)


class Volume(NamedTuple):
    name: str
    mount_path: str
    read_only: bool
    source: dict  # the pod volume source, e.g. {"persistentVolumeClaim": {"claimName": "data"}}


class Option(NamedTuple):
    """One submit option: ``--backoff-limit`` on the command line, ``backoff_limit=`` in Python, ``backoff-limit:``
    or ``backoff_limit:`` in a values file."""

    name: str  # the Python keyword and SubmitOptions' field
    type: type  # str, int, bool, or list (of strings: a repeatable flag)
    help: str
    #: the value as the job uses it, from the given one (None or [] when not given): raises UserError naming
    #: the option through errors.option(name)
    parse: Callable[[Any, str], Any] | None = None
    flags: tuple[str, ...] = ()  # on the command line; default --<name with - for _>
    local: bool = True  # whether the local backend honours it (the submit summary names those it does not)
    framework: Framework | None = None  # the one kind that takes it (Framework.options)
    #: why a Trainer v2 TrainJob (``--api v2``) cannot say it (None: it can): the runtime holds the pod template
    not_v2: str | None = None

    @property
    def cli_flags(self) -> tuple[str, ...]:
        return self.flags or (f"--{self.name.replace('_', '-')}",)

    @property
    def cli_help(self) -> str:
        return f"{self.framework.name}: {self.help}" if self.framework else self.help

    @property
    def empty(self) -> object:
        """Its value when it is not given."""
        return [] if self.type is list else None


# ---- parsers for option values: each names the option as the caller spells it (errors.option) ----------

def generated_name(prefix: str) -> str:
    """``<prefix>-<6 random letters or digits>``: the name of a job the user did not name."""
    import secrets  # here: it imports hashlib and random, which `trainctl --help` has no use for
    import string

    alphabet = string.ascii_lowercase + string.digits
    return f"{prefix}-{''.join(secrets.choice(alphabet) for _ in range(6))}"


def quoted(value: object) -> str:
    """``value`` as an error message quotes it: its repr, shortened as a too-long ``--name`` is."""
    return shortened(repr(value))


def key_value(text: str, name: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UserError(f"{option(name)} {quoted(text)}: expected KEY=VALUE")
    return key, value


def env_pairs(items: list[str], name: str = "env") -> list[tuple[str, str]]:
    pairs = [key_value(item, name) for item in items]
    for key, value in pairs:
        if problem := env_name_problem(key):
            raise UserError(f"{option(name)} {quoted(key)}: {problem}")
        if problem := process_string_problem(f"{key}={value}", f" as {key[:60]}=value"):
            raise UserError(f"{option(name)} {quoted(key)}: {problem}")
    return pairs


def label_map(items: list[str], name: str, check_value: bool = True) -> dict[str, str]:
    result = {}
    for item in items:
        key, value = key_value(item, name)
        check_label_key(key, name)
        if check_value and (problem := label_value_problem(value)):
            raise UserError(f"{option(name)} {shortened(key)}={quoted(value)}: the value is {problem}")
        result[key] = value
    return result


def check_label_key(key: str, keyword: str) -> None:
    if problem := label_key_problem(key):
        raise UserError(f"{option(keyword)} {quoted(key)}: {problem}")


def quantity(text: str | None, name: str) -> str | None:
    if text is not None and not QUANTITY.fullmatch(text):
        raise UserError(f"{option(name)} {quoted(text)}: not a quantity (examples: 2, 500m, 16Gi)")
    return text


def positive(value: int | None, name: str, minimum: int = 1, maximum: int = INT32_MAX) -> int | None:
    if value is not None and value < minimum:
        raise UserError(f"{option(name)} {value}: must be at least {minimum}")
    if value is not None and value > maximum:
        raise UserError(f"{option(name)} {value}: must be at most {maximum} (the field is an "
                        f"{'int32' if maximum == INT32_MAX else 'int64'})")
    return value


def seconds(text: str | None, name: str) -> int | None:
    """A duration option (``--stall-after 10m``) in whole seconds, at least one."""
    return positive(parse_duration(text, option(name)), name, maximum=INT64_MAX)


def choice(value: str | None, name: str, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    for candidate in allowed:
        if candidate.lower() == value.lower():
            return candidate
    raise UserError(f"{option(name)} {quoted(value)}: use one of {', '.join(allowed)}")


def volumes(items: list[str], name: str = "volume") -> list[Volume]:
    """``pvc:CLAIM:/path[:ro]`` and ``host:/src:/path[:ro]``."""
    parsed = []
    for index, item in enumerate(items):
        parts = item.split(":")
        read_only = parts[-1] == "ro"
        if read_only:
            parts = parts[:-1]
        if len(parts) != 3 or parts[0] not in ("pvc", "host") or not parts[1] or not parts[2].startswith("/"):
            raise UserError(f"{option(name)} {quoted(item)}: expected pvc:CLAIM:/mount/path[:ro] or "
                            "host:/src:/mount/path[:ro]")
        kind, origin, mount = parts
        if kind == "pvc":
            if problem := dns_subdomain_problem(origin):
                raise UserError(f"{option(name)} {quoted(item)}: the claim name {quoted(origin)} is {problem}")
            source = {"persistentVolumeClaim": {"claimName": origin, "readOnly": read_only}}
        else:
            if not origin.startswith("/"):
                raise UserError(f"{option(name)} {quoted(item)}: the host path must be absolute")
            source = {"hostPath": {"path": origin}}
        parsed.append(Volume(f"volume-{index}", mount, read_only, source))
    return parsed


def workdir_limit(text: str | None, name: str = "workdir_limit") -> int:
    """``--workdir-limit`` in bytes: a size such as 32Mi, 500Ki or 1000000 (default 32Mi)."""
    from trainctl.code.snapshot import DEFAULT_LIMIT

    if text is None:
        return DEFAULT_LIMIT
    match = SIZE.fullmatch(text.strip())
    if not match:
        raise UserError(f"{option(name)} {quoted(text)}: not a size (examples: 32Mi, 500Ki, 64M)")
    size = int(match.group(1)) * SIZE_UNITS[match.group(2) or ""]
    if not 1024 <= size <= MAX_WORKDIR_LIMIT:
        raise UserError(f"{option(name)} {quoted(text)}: must be between 1Ki and 256Mi (a ConfigMap per "
                        f"900 KiB); ship more on a volume ({option('volume')}) or in the image")
    return size


def workdir_mount(text: str | None, name: str = "workdir_mount") -> str | None:
    """``--workdir-mount``: an absolute, normalized path that is not / and not trainctl's own /trainctl."""
    if text is None:
        return None
    import posixpath

    if not text.startswith("/") or text.startswith("//") or posixpath.normpath(text) != text or "\x00" in text \
            or text in ("/", "/trainctl") or text.startswith("/trainctl/"):
        raise UserError(f"{option(name)} {quoted(text)}: must be an absolute, normalized directory path other "
                        "than / and /trainctl (e.g. /workspace)")
    return text


def pip_specs(items: list[str], name: str = "pip") -> list[str]:
    """``--pip`` requirement specifiers; pip options belong in a --requirements file."""
    for item in items:
        if not item.strip() or item.startswith("-") or "\x00" in item or "\n" in item:
            raise UserError(f"{option(name)} {quoted(item)}: give a requirement (numpy==2.1, ./pkg.whl); pip options "
                            f"such as --index-url go in a {option('requirements')} file")
    return list(items)


def local_queue(queue: str | None, name: str = "local_queue") -> str | None:
    """``--local-queue``: the name of a Kueue LocalQueue (a DNS subdomain that fits a label value)."""
    if queue is not None and (len(queue) > 63 or not re.fullmatch(DNS_1123_SUBDOMAIN, queue)):
        raise UserError(f"{option(name)} {quoted(queue)}: not a LocalQueue name (at most 63 lower-case letters, "
                        "digits, '-' and '.')")
    return queue


def tolerations(items: list[str], name: str = "toleration") -> list[dict]:
    """``key[=value]:Effect``; without a value the toleration matches any value (Exists)."""
    parsed = []
    for item in items:
        spec, sep, effect = item.rpartition(":")
        if not sep or effect not in TAINT_EFFECTS or not spec:
            raise UserError(f"{option(name)} {quoted(item)}: expected key[=value]:EFFECT with EFFECT one of "
                            f"{', '.join(TAINT_EFFECTS)}")
        key, has_value, value = spec.partition("=")
        check_label_key(key, name)
        if has_value and (problem := label_value_problem(value)):
            raise UserError(f"{option(name)} {quoted(item)}: the value is {problem}")
        toleration = {"key": key, "operator": "Equal" if has_value else "Exists", "effect": effect}
        if has_value:
            toleration["value"] = value
        parsed.append(toleration)
    return parsed


def kind_option_value(value: object, name: str, kind_option: KindOption) -> object:
    """A framework's own option (``--chief 1``) held to that framework's rules."""
    if kind_option.minimum is not None:
        positive(value, name, minimum=kind_option.minimum)
    if value is not None and kind_option.problem and (problem := kind_option.problem(value)):
        raise UserError(f"{option(name)} {value}: {problem}")
    return value


def restart_scope(value: str | None, name: str = "restart_scope") -> str | None:
    from trainctl.core.restarts import SCOPES  # here: --help has no use for the core

    return choice(value, name, SCOPES)


def node_lost_after(text: str | None, name: str = "node_lost_after") -> int | None:
    """``--node-lost-after 30``: whole seconds in ASCII digits, as the annotation reads them (core/nodes.py)."""
    from trainctl.core.restarts import MAX_NODE_LOST_AFTER_S

    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_NODE_LOST_AFTER_S:
        raise UserError(f"{option(name)} {quoted(text)}: give whole seconds from 0 to {MAX_NODE_LOST_AFTER_S} "
                        "(e.g. 30: a replica whose node is not Ready for 30 s is lost and restarts)")
    return int(text)


def retryable_exit_codes(items: list[str], name: str = "retry_on_exit_codes") -> list[int]:
    """``--retry-on-exit-codes 3,42`` (repeatable): exit codes 1-255, sorted, each once."""
    from trainctl.core.restarts import exit_codes

    codes: set[int] = set()
    for item in items:
        parsed = exit_codes(item)
        if parsed is None:
            raise UserError(f"{option(name)} {quoted(item)}: give exit codes 1-255, comma-separated (e.g. 3,42; 0 is "
                            "success)")
        codes.update(parsed)
    return sorted(codes)


def checkpoint_storage(text: str | None, name: str = "checkpoints") -> str | None:
    from trainctl.core.checkpoint_volume import problem

    if text is not None and (issue := problem(text)):
        raise UserError(f"{option(name)} {quoted(text)}: {issue}")
    return text


def assignments(items: list[str], name: str = "set") -> list[tuple[str, list, object]]:
    """``--set PATH=VALUE`` items, each parsed (trainctl.submit.setpath) and applied once the template rendered."""
    return [parse_assignment(item) for item in items]


# ---- the table ------------------------------------------------------------------------------------

WORKERS_HELP = "; ".join(f"{fw.name}: {fw.workers_help}" for fw in ALL)
INT32 = partial(positive, minimum=0)

OPTIONS: tuple[Option, ...] = (
    Option("name", str, "Job name (DNS-1035); default <kind>-<random>."),
    Option("namespace", str, "Namespace of the job (default: the kubeconfig's, else 'default').",
           flags=("--namespace", "-n")),
    Option("image", str, "Container image (default per kind; ignored by the local backend)."),
    Option("api", str, "v1: a kubeflow.org/v1 job of KIND (default); v2: a Kubeflow Trainer v2 TrainJob on KIND's "
           "default ClusterTrainingRuntime (docs/trainer-v2.md).", partial(choice, allowed=APIS)),
    Option("workers", int, f"Number of nodes. {WORKERS_HELP}.", positive),
    Option("gpus", int, "GPUs per replica (nvidia.com/gpu).", INT32),
    Option("cpu", str, "CPU per replica, e.g. 4 or 500m.", quantity, local=False),
    Option("memory", str, "Memory per replica, e.g. 16Gi.", quantity, local=False),
    *(Option(kind_option.name, kind_option.type, kind_option.help, partial(kind_option_value, kind_option=kind_option),
             framework=framework) for framework in ALL for kind_option in framework.options),
    Option("env", list, f"Environment variable K=V {REPEAT}.", env_pairs, flags=("--env", "-e")),
    Option("label", list, f"Label K=V on the job and its pods {REPEAT}.", label_map),
    Option("annotation", list, f"Annotation K=V on the job {REPEAT}.", partial(label_map, check_value=False)),
    Option("volume", list, f"pvc:CLAIM:/path[:ro] or host:/src:/path[:ro] {REPEAT}.", volumes, not_v2=IN_RUNTIME),
    Option("shm_size", str, "Size of a memory-backed /dev/shm, e.g. 8Gi.", quantity, local=False, not_v2=IN_RUNTIME),
    Option("node_selector", list, f"Node label K=V the pods need {REPEAT}.", label_map, local=False,
           not_v2=IN_RUNTIME),
    Option("toleration", list, f"key[=value]:NoSchedule|PreferNoSchedule|NoExecute {REPEAT}.", tolerations,
           local=False, not_v2=IN_RUNTIME),
    Option("priority_class", str, "PriorityClass of the pods.", local=False, not_v2=IN_RUNTIME),
    Option("queue", str, "Scheduling queue (runPolicy.schedulingPolicy.queue).", local=False, not_v2=NO_RUN_POLICY),
    Option("local_queue", str, "Kueue LocalQueue: label the job kueue.x-k8s.io/queue-name and create it suspended "
           "until Kueue admits it (docs/schedulers.md).", local_queue),
    Option("gang", bool, "Gang-schedule: all replicas start together or none.", flags=("--gang",), local=False,
           not_v2="a TrainJob is gang-scheduled by its runtime's podGroupPolicy"),
    Option("restart_policy", str, "Always, OnFailure, Never or ExitCode (default per kind).",
           partial(choice, allowed=RESTART_POLICIES),
           not_v2="a TrainJob's pods restart in place (OnFailure) up to their Job's backoffLimit, as its runtime "
                  "says"),
    Option("backoff_limit", int, "Restarts allowed before the job fails (default 3).", INT32, not_v2=NO_RUN_POLICY),
    # restarts and checkpoints (trainctl/core/restarts.py, docs/fault-tolerance.md): annotations the operator ignores
    Option("restart_scope", str, "What a retried failure restarts: replica (the failed one, as the Training "
           "Operator does; default) or job (every replica together, as the job's next attempt).", restart_scope),
    Option("node_lost_after", str, "Seconds a node may be NotReady or unreachable before its replicas count as lost "
           "and restart, a disruption (default 60; e.g. --node-lost-after 30 --restart-scope job). See "
           "docs/fault-tolerance.md.", node_lost_after, flags=("--node-lost-after",), local=False),
    Option("retry_on_exit_codes", list, "Exit codes retried whatever the restart policy, each counted against "
           f"--backoff-limit, e.g. 3,42 {REPEAT}.", retryable_exit_codes, flags=("--retry-on-exit-codes",)),
    Option("checkpoints", str, "Storage behind trainctl.checkpoint_dir() that outlives the replicas: SIZE (a claim "
           "the job owns, e.g. 10Gi), pvc:CLAIM or host:/path (locally: the job's own directory, or host:).",
           checkpoint_storage),
    Option("active_deadline", int, "Fail the job after this many seconds running.",
           partial(positive, maximum=INT64_MAX)),
    # durations: 90, 90s, 10m, 1h30m (trainctl.backends.reported)
    Option("stall_after", str, "Call the running job stalled when no replica wrote output or a report for this long "
           "(default 10m).", seconds),
    Option("stall_timeout", str, "Fail the job once no replica wrote output or a report for this long (e.g. 30m; a "
           "hung all-reduce).", seconds),
    Option("ttl_after_finished", int, "Delete the job this many seconds after it ends.", INT32, not_v2=NO_RUN_POLICY),
    Option("clean_pod_policy", str, "What to stop when the job ends: All, Running, None.",
           partial(choice, allowed=CLEAN_POD_POLICIES), not_v2=NO_RUN_POLICY),
    Option("suspend", bool, "Create the job suspended (start with resume).", flags=("--suspend",)),
    Option("set", list, f"PATH=VALUE: set any field of the resource {REPEAT}.", assignments, flags=("--set",)),
    Option("template", str, "Jinja template file to render instead of the kind's."),
    # code that travels with the job (trainctl/submit/code_plan.py turns these into what ships)
    Option("workdir", str, "Directory whose files travel with the job (default: on Kubernetes the current one; "
           "locally none, the replicas run in the current one). See docs/code-shipping.md."),
    Option("no_workdir", bool, "Ship no code: the image has it.", flags=("--no-workdir",)),
    Option("workdir_limit", str, "Largest code snapshot, compressed, e.g. 64Mi (default 32Mi).", workdir_limit),
    Option("workdir_mount", str, "Where the code is unpacked in the container, its working directory (default "
           "/workspace).", workdir_mount, local=False),
    Option("ship_secret", list, "A credential-like file of the workdir (.env, a key; held back by default) to ship "
           f"anyway, by its path in the workdir {REPEAT}. See docs/code-shipping.md.", flags=("--ship-secret",)),
    Option("pip", list, f"Package to pip install before the command {REPEAT}.", pip_specs, flags=("--pip",)),
    Option("requirements", str, "requirements.txt to pip install before the command."),
)
BY_NAME = {option.name: option for option in OPTIONS}


# ---- what was given -----------------------------------------------------------------------------

def merged_with(self: SubmitOptions, values: dict, source: str) -> SubmitOptions:
    """Fill options not given on the command line from a values file mapping."""
    merged = {name: getattr(self, name) for name in self.__dataclass_fields__}
    types = {"command": list, **{name: opt.type for name, opt in BY_NAME.items()}}  # a file may hold the command
    for raw_key, value in values.items():
        key = str(raw_key).replace("-", "_")
        if key not in types:
            raise UserError(f"{source}: unknown key {quoted(raw_key)}: use the long option names of "
                            "`trainctl submit --help` (e.g. workers, env, gpus)")
        if merged[key] in (None, []):
            merged[key] = coerce(value, types[key], f"{source}: {raw_key}")
    return type(self)(**merged)


def __getattr__(name: str) -> type:
    """``SubmitOptions``, made from the table on first use: making a dataclass of every option costs
    milliseconds that ``trainctl --help`` (which needs only OPTIONS) does not pay."""
    if name != "SubmitOptions":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made = make_dataclass(
        "SubmitOptions",
        [("command", list, field(default_factory=list)),
         *((opt.name, opt.type | None if opt.type is not list else list,
            field(default_factory=list) if opt.type is list else field(default=None)) for opt in OPTIONS)],
        frozen=True,
        namespace={"merged_with": merged_with, "__module__": __name__,
                   "__doc__": "What a submission was given: the command, and each option of OPTIONS (None or [] when "
                              "not given: the kind's default applies). Made from the table: a new option is one entry."})
    globals()[name] = made
    return made


def coerce(value: object, kind: type, where: str) -> object:
    """A values file's (or a Python keyword's) value as an option of type ``kind``: a list from one item or a dict
    (K=V), strict integers and booleans; anything else one line naming ``where``."""
    if kind is list:
        items = value if isinstance(value, list) else [value]
        if isinstance(value, dict):
            items = [f"{mapping_key(k, where)}={scalar(v, where)}" for k, v in value.items()]
        return [str(scalar(item, where)) for item in items]
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{where}: must be an integer (got {quoted(value)})")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise UserError(f"{where}: must be true or false (got {quoted(value)})")
        return value
    if isinstance(value, (dict, list)):
        raise UserError(f"{where}: must be a single value (got {type(value).__name__})")
    return str(value)


def scalar(item: object, where: str) -> object:
    """An item of a list option (or a key or value of its dict): a string or a number, never None, bytes or an
    object, whose str() would be "None", "b'...'" or a repr and pass for a value."""
    if not isinstance(item, (str, int, float)):
        raise UserError(f"{where}: {quoted(item)} is a {type(item).__name__}, not a string or a number: give "
                        "its text, e.g. {'LR': '0.1'}")
    return item


def mapping_key(key: object, where: str) -> object:
    """A key of a dict given for K=V items: one holding '=' would move the rest of it into the value
    ({"A=B": "c"} would become A="B=c")."""
    if "=" in str(scalar(key, where)):
        raise UserError(f"{where}: the key {quoted(str(key))} holds '=', which ends a key: no variable, label or "
                        "annotation name has one")
    return key


def check_given(options: SubmitOptions) -> None:
    """Refuse an option given as '' (it would silently become the default: a generated name, the
    kind's image) and a list option with more than MAX_ITEMS entries (20,000 ``env`` entries)."""
    for given in fields(options):
        value, flag = getattr(options, given.name), option(given.name)
        if value == "":
            raise UserError(f"{flag} '': empty; give a value, or leave {flag} out to get the default")
        if isinstance(value, list) and len(value) > MAX_ITEMS:
            what = spelled("the command after --", "the command list") if given.name == "command" else flag
            raise UserError(f"{what}: {len(value):,} entries is more than {MAX_ITEMS:,}: put that much "
                            "configuration in a file the job reads")


# ---- what the job is made of ------------------------------------------------------------------------

class Checked(NamedTuple):
    """What :func:`check` made of a submission's options for one framework. Each option's value, parsed, is an
    attribute of its name (``checked.env``: (name, value) pairs, ``checked.volume``: :class:`Volume` objects,
    ``checked.workdir_limit``: bytes); besides them, what the options decide together."""

    framework: Framework
    command: list[str]
    values: dict[str, Any]
    name: str  # given, or <framework>-<random>
    image: str  # given, or the framework's
    topology: dict[str, int]  # replica type -> count
    own: dict[str, Any]  # the framework's own options (Framework.options)
    labels: dict[str, str]  # the job's: --label, and Kueue's queue label with --local-queue

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self.values:
            raise AttributeError(f"no submit option {name!r}")
        return self.values[name]


def check(framework: Framework, given: SubmitOptions) -> Checked:
    """Every value of ``given`` parsed and checked for ``framework``, once; the first problem is a UserError."""
    if not given.command:
        raise UserError(f"missing command: put it after --, e.g. trainctl submit {framework.name} -- python train.py")
    check_given(given)
    values = {}
    for opt in OPTIONS:
        value = getattr(given, opt.name)
        if opt.framework not in (None, framework) and value is not None:
            raise UserError(f"{option(opt.name)} applies to {opt.framework.name} jobs only (this is {framework.name})")
        values[opt.name] = opt.parse(value, opt.name) if opt.parse else value
    check_together(framework, values)
    own = {kind_option.name: values[kind_option.name] for kind_option in framework.options}
    topology = framework.topology(values["workers"] or framework.default_workers,
                                  **{name: value or 0 for name, value in own.items()})
    return Checked(framework, list(given.command), values, values["name"] or generated_name(framework.name),
                   values["image"] or framework.default_image, topology, own,
                   queue_labels(values["label"], values["local_queue"]))


def check_together(framework: Framework, values: dict) -> None:
    """The rules that hold between options."""
    if values["api"] == "v2":
        check_v2(framework, values)
    if values["no_workdir"] and values["workdir"] is not None:
        raise UserError(f"{option('workdir')} and {option('no_workdir')} contradict each other: give one of them")
    if (values["pip"] or values["requirements"] is not None) and framework.no_packages:
        raise UserError(f"{option('pip')}/{option('requirements')}: not for {framework.name} jobs, "
                        f"{framework.no_packages}: install the packages in the image")


def check_v2(framework: Framework, values: dict) -> None:
    """``--api v2``: a kind with a default Trainer v2 runtime, and no option a TrainJob cannot say."""
    if framework.trainer_v2 is None or framework.trainer_v2.runtime is None:
        kinds = ", ".join(fw.name for fw in ALL if fw.trainer_v2 and fw.trainer_v2.runtime)
        raise UserError(f"{setting('api', 'v2')}: no default Trainer v2 runtime runs {framework.name} jobs (one runs "
                        f"{kinds}): submit it as a v1 job, and trainctl convert makes a TrainJob and its "
                        "TrainingRuntime of that")
    for opt in OPTIONS:
        if opt.not_v2 and values[opt.name] is not False and values[opt.name] not in (None, [], {}):
            raise UserError(f"{option(opt.name)} cannot be said with {setting('api', 'v2')}: {opt.not_v2}: "
                            f"leave one of them out")
    for kind_option in framework.options:
        value = values[kind_option.name]
        if value is not None and (not is_v2_procs(framework, kind_option.name) or not a_count(str(value))):
            raise UserError(f"{option(kind_option.name)} {value}: {setting('api', 'v2')} takes a number of processes "
                            "per node, 1 or more (numProcPerNode), or nothing: one per GPU, else per CPU")


def a_count(text: str) -> bool:
    """1 or more in ASCII digits (``"²".isdigit()`` holds, and int() refuses it)."""
    return text.isascii() and text.isdigit() and int(text) >= 1


def is_v2_procs(framework: Framework, name: str) -> bool:
    """Whether the kind's own option ``name`` is the spec field (``nproc_per_node``: ``nprocPerNode``) v2's
    ``numProcPerNode`` stands for: the one kind option a TrainJob says."""
    first, *rest = name.split("_")
    return first + "".join(word.title() for word in rest) == framework.trainer_v2.proc_field


def queue_labels(labels: dict[str, str], queue: str | None) -> dict[str, str]:
    """The job's labels plus Kueue's queue label (on the job only: Kueue reads it there)."""
    if queue is None:
        return labels
    if labels.get(KUEUE_QUEUE_LABEL, queue) != queue:
        raise UserError(f"{option('label')} {KUEUE_QUEUE_LABEL}={labels[KUEUE_QUEUE_LABEL]} and "
                        f"{option('local_queue')} {queue}: give the queue once, with {option('local_queue')}")
    return {**labels, KUEUE_QUEUE_LABEL: queue}


def as_checked(framework: Framework, options: SubmitOptions | Checked) -> Checked:
    """``options`` checked for ``framework``: as they are when :func:`check` made them already."""
    return options if isinstance(options, Checked) else check(framework, options)


def unenforced(checked: Checked) -> list[str]:
    """The given options a local run cannot honour: processes share this machine, its scheduler and its /dev/shm."""
    return [opt.cli_flags[0] for opt in OPTIONS if not opt.local and checked.values[opt.name]]
