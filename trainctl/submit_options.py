"""What ``trainctl submit`` was asked for, parsed and checked, before any template runs.

Flags arrive as strings (``-e K=V``, ``--volume pvc:data:/data:ro``); this module turns
them into typed values and rejects malformed ones with a one-line error that names the
flag. The same keys may come from a values file (``-f values.yaml``); flags win over it.
Nothing here builds YAML: the template receives these values as data.
"""

from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass, field, fields

from trainctl.errors import UserError, option, spelled
from trainctl.frameworks import Framework
from trainctl.frameworks.base import CLEAN_POD_POLICIES, RESTART_POLICIES
from trainctl.k8s_names import (
    DNS_1123_SUBDOMAIN,
    TAINT_EFFECTS,
    dns_subdomain_problem,
    env_name_problem,
    label_key_problem,
    label_value_problem,
)

DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
QUANTITY = re.compile(r"(\d+(\.\d*)?|\.\d+)([numkMGTPE]|[KMGTPE]i)?")
SIZE = re.compile(r"(\d{1,12})(Ki|Mi|Gi|K|M|G)?")
SIZE_UNITS = {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
MAX_WORKDIR_LIMIT = 256 << 20
# Entries per repeatable option (and words of the command): far above real jobs, and low enough
# that every replica's copy of them renders and validates in well under a second.
MAX_ITEMS = 1000
# The CRD's integer formats: replica counts, backoffLimit and ttlSecondsAfterFinished are int32,
# activeDeadlineSeconds is int64 (checked again on the resource by trainctl.validation).
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1


@dataclass(frozen=True)
class Volume:
    name: str
    mount_path: str
    read_only: bool
    source: dict  # the pod volume source, e.g. {"persistentVolumeClaim": {"claimName": "data"}}


@dataclass
class SubmitOptions:
    """Everything a template may use. ``None`` means "not given": the kind's default applies."""

    command: list[str] = field(default_factory=list)
    name: str | None = None
    namespace: str | None = None
    image: str | None = None
    workers: int | None = None
    gpus: int | None = None
    cpu: str | None = None
    memory: str | None = None
    nproc_per_node: str | None = None
    ps: int | None = None
    chief: int | None = None
    evaluator: int | None = None
    slots_per_worker: int | None = None
    env: list[str] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    annotation: list[str] = field(default_factory=list)
    volume: list[str] = field(default_factory=list)
    shm_size: str | None = None
    node_selector: list[str] = field(default_factory=list)
    toleration: list[str] = field(default_factory=list)
    priority_class: str | None = None
    queue: str | None = None
    local_queue: str | None = None
    gang: bool | None = None
    restart_policy: str | None = None
    backoff_limit: int | None = None
    active_deadline: int | None = None
    stall_after: str | None = None  # durations: 90, 90s, 10m, 1h30m (trainctl.reported)
    stall_timeout: str | None = None
    ttl_after_finished: int | None = None
    clean_pod_policy: str | None = None
    suspend: bool | None = None
    set: list[str] = field(default_factory=list)
    template: str | None = None
    # code that travels with the job (trainctl.code.plan turns these into what ships)
    workdir: str | None = None
    no_workdir: bool | None = None
    workdir_limit: str | None = None
    workdir_mount: str | None = None
    ship_secret: list[str] = field(default_factory=list)  # credential-like files of the workdir sent anyway
    pip: list[str] = field(default_factory=list)
    requirements: str | None = None

    def merged_with(self, values: dict, source: str) -> SubmitOptions:
        """Fill options not given on the command line from a values file mapping."""
        known = {f.name: f for f in fields(self)}
        merged = SubmitOptions(**{f.name: getattr(self, f.name) for f in fields(self)})
        for raw_key, value in values.items():
            key = str(raw_key).replace("-", "_")
            if key not in known:
                raise UserError(f"{source}: unknown key {raw_key!r}: use the long option names of "
                                "`trainctl submit --help` (e.g. workers, env, gpus)")
            if getattr(merged, key) in (None, []):
                setattr(merged, key, coerce(value, known[key].type, f"{source}: {raw_key}"))
        return merged


def coerce(value: object, annotation: str, where: str) -> object:
    """A values file's (or a Python keyword's) value as the field's type: a list from one item or a dict
    (K=V), strict integers and booleans; anything else one line naming ``where``."""
    if annotation.startswith("list"):
        items = value if isinstance(value, list) else [value]
        if isinstance(value, dict):
            items = [f"{mapping_key(k, where)}={scalar(v, where)}" for k, v in value.items()]
        return [str(scalar(item, where)) for item in items]
    if annotation.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{where}: must be an integer (got {value!r})")
        return value
    if annotation.startswith("bool"):
        if not isinstance(value, bool):
            raise UserError(f"{where}: must be true or false (got {value!r})")
        return value
    if isinstance(value, (dict, list)):
        raise UserError(f"{where}: must be a single value (got {type(value).__name__})")
    return str(value)


def scalar(item: object, where: str) -> object:
    """An item of a list option (or a key or value of its dict): a string or a number, never None, bytes or an
    object, whose str() would be "None", "b'...'" or a repr and pass for a value."""
    if not isinstance(item, (str, int, float)):
        raise UserError(f"{where}: {repr(item)[:60]} is a {type(item).__name__}, not a string or a number: give "
                        "its text, e.g. {'LR': '0.1'}")
    return item


def mapping_key(key: object, where: str) -> object:
    """A key of a dict given for K=V items: one holding '=' would move the rest of it into the value
    ({"A=B": "c"} would become A="B=c")."""
    if "=" in str(scalar(key, where)):
        raise UserError(f"{where}: the key {str(key)[:60]!r} holds '=', which ends a key: no variable, label or "
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


# ---- parsers for option values: each names the option as the caller spells it (errors.option) ----------

def generated_name(prefix: str) -> str:
    """``<prefix>-<6 random letters or digits>``: the name of a job the user did not name."""
    alphabet = string.ascii_lowercase + string.digits
    return f"{prefix}-{''.join(secrets.choice(alphabet) for _ in range(6))}"


def key_value(text: str, name: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UserError(f"{option(name)} {text!r}: expected KEY=VALUE")
    return key, value


def env_pairs(items: list[str]) -> list[tuple[str, str]]:
    pairs = [key_value(item, "env") for item in items]
    for key, _ in pairs:
        if problem := env_name_problem(key):
            raise UserError(f"{option('env')} {key!r}: {problem}")
    return pairs


def label_map(items: list[str], name: str, check_value: bool = True) -> dict[str, str]:
    result = {}
    for item in items:
        key, value = key_value(item, name)
        check_label_key(key, name)
        if check_value and (problem := label_value_problem(value)):
            raise UserError(f"{option(name)} {key}={value!r}: the value is {problem}")
        result[key] = value
    return result


def check_label_key(key: str, keyword: str) -> None:
    if problem := label_key_problem(key):
        raise UserError(f"{option(keyword)} {key!r}: {problem}")


def quantity(text: str | None, name: str) -> str | None:
    if text is not None and not QUANTITY.fullmatch(text):
        raise UserError(f"{option(name)} {text!r}: not a quantity (examples: 2, 500m, 16Gi)")
    return text


def positive(value: int | None, name: str, minimum: int = 1, maximum: int = INT32_MAX) -> int | None:
    if value is not None and value < minimum:
        raise UserError(f"{option(name)} {value}: must be at least {minimum}")
    if value is not None and value > maximum:
        raise UserError(f"{option(name)} {value}: must be at most {maximum} (the field is an "
                        f"{'int32' if maximum == INT32_MAX else 'int64'})")
    return value


def parse_duration(text: str | None, flag: str) -> int | None:
    """``90``, ``90s``, ``5m``, ``1h30m`` -> seconds."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    match = DURATION.fullmatch(text)
    if not text or not match or not any(match.groups()):
        raise UserError(f"{flag} {text!r}: expected a duration such as 30s, 5m or 1h30m")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def stall_annotations(options: SubmitOptions) -> dict[str, str]:
    """``--stall-after``/``--stall-timeout`` as the job's annotations (trainctl.job), in whole seconds."""
    from trainctl.job import STALL_AFTER_ANNOTATION, STALL_TIMEOUT_ANNOTATION

    found = {}
    for key, name, text in ((STALL_AFTER_ANNOTATION, "stall_after", options.stall_after),
                            (STALL_TIMEOUT_ANNOTATION, "stall_timeout", options.stall_timeout)):
        seconds = positive(parse_duration(text, option(name)), name, maximum=INT64_MAX)
        if seconds is not None:
            found[key] = str(seconds)
    return found


def choice(value: str | None, name: str, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    for candidate in allowed:
        if candidate.lower() == value.lower():
            return candidate
    raise UserError(f"{option(name)} {value!r}: use one of {', '.join(allowed)}")


def restart_policy(value: str | None) -> str | None:
    return choice(value, "restart_policy", RESTART_POLICIES)


def clean_pod_policy(value: str | None) -> str | None:
    return choice(value, "clean_pod_policy", CLEAN_POD_POLICIES)


def volumes(items: list[str]) -> list[Volume]:
    """``pvc:CLAIM:/path[:ro]`` and ``host:/src:/path[:ro]``."""
    parsed = []
    for index, item in enumerate(items):
        parts = item.split(":")
        read_only = parts[-1] == "ro"
        if read_only:
            parts = parts[:-1]
        if len(parts) != 3 or parts[0] not in ("pvc", "host") or not parts[1] or not parts[2].startswith("/"):
            raise UserError(f"{option('volume')} {item!r}: expected pvc:CLAIM:/mount/path[:ro] or "
                            "host:/src:/mount/path[:ro]")
        kind, origin, mount = parts
        if kind == "pvc":
            if problem := dns_subdomain_problem(origin):
                raise UserError(f"{option('volume')} {item!r}: the claim name {origin!r} is {problem}")
            source = {"persistentVolumeClaim": {"claimName": origin, "readOnly": read_only}}
        else:
            if not origin.startswith("/"):
                raise UserError(f"{option('volume')} {item!r}: the host path must be absolute")
            source = {"hostPath": {"path": origin}}
        parsed.append(Volume(f"volume-{index}", mount, read_only, source))
    return parsed


def workdir_limit(text: str | None) -> int:
    """``--workdir-limit`` in bytes: a size such as 32Mi, 500Ki or 1000000 (default 32Mi)."""
    from trainctl.code.snapshot import DEFAULT_LIMIT

    if text is None:
        return DEFAULT_LIMIT
    match = SIZE.fullmatch(text.strip())
    if not match:
        raise UserError(f"{option('workdir_limit')} {text!r}: not a size (examples: 32Mi, 500Ki, 64M)")
    size = int(match.group(1)) * SIZE_UNITS[match.group(2) or ""]
    if not 1024 <= size <= MAX_WORKDIR_LIMIT:
        raise UserError(f"{option('workdir_limit')} {text!r}: must be between 1Ki and 256Mi (a ConfigMap per "
                        f"900 KiB); ship more on a volume ({option('volume')}) or in the image")
    return size


def workdir_mount(text: str | None) -> str | None:
    """``--workdir-mount``: an absolute, normalized path that is not / and not trainctl's own /trainctl."""
    if text is None:
        return None
    import posixpath

    if not text.startswith("/") or text.startswith("//") or posixpath.normpath(text) != text or "\x00" in text \
            or text in ("/", "/trainctl") or text.startswith("/trainctl/"):
        raise UserError(f"{option('workdir_mount')} {text!r}: must be an absolute, normalized directory path other "
                        "than / and /trainctl (e.g. /workspace)")
    return text


def pip_specs(items: list[str]) -> list[str]:
    """``--pip`` requirement specifiers; pip options belong in a --requirements file."""
    for item in items:
        if not item.strip() or item.startswith("-") or "\x00" in item or "\n" in item:
            raise UserError(f"{option('pip')} {item!r}: give a requirement (numpy==2.1, ./pkg.whl); pip options "
                            f"such as --index-url go in a {option('requirements')} file")
    return list(items)


def local_queue(name: str | None) -> str | None:
    """``--local-queue``: the name of a Kueue LocalQueue (a DNS subdomain that fits a label value)."""
    if name is not None and (len(name) > 63 or not DNS_1123_SUBDOMAIN.fullmatch(name)):
        raise UserError(f"{option('local_queue')} {name!r}: not a LocalQueue name (at most 63 lower-case letters, "
                        "digits, '-' and '.')")
    return name


def tolerations(items: list[str]) -> list[dict]:
    """``key[=value]:Effect``; without a value the toleration matches any value (Exists)."""
    parsed = []
    for item in items:
        spec, sep, effect = item.rpartition(":")
        if not sep or effect not in TAINT_EFFECTS or not spec:
            raise UserError(f"{option('toleration')} {item!r}: expected key[=value]:EFFECT with EFFECT one of "
                            f"{', '.join(TAINT_EFFECTS)}")
        key, has_value, value = spec.partition("=")
        check_label_key(key, "toleration")
        if has_value and (problem := label_value_problem(value)):
            raise UserError(f"{option('toleration')} {item!r}: the value is {problem}")
        toleration = {"key": key, "operator": "Equal" if has_value else "Exists", "effect": effect}
        if has_value:
            toleration["value"] = value
        parsed.append(toleration)
    return parsed
