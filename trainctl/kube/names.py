"""Kubernetes' own rules for the names and small values a job carries, in one place.

The rules are those of k8s.io/apimachinery (``pkg/util/validation`` and ``pkg/api/validate/content``),
which the API server applies to every object's metadata and to every pod the operator creates from a
replica's template. trainctl applies them before anything exists, on every way in (``submit`` flags,
``apply -f`` documents, the Python API), so that a job the local backend accepts is one a cluster
accepts too, and a mistake is one line now instead of a pod that never appears.

* **label key** (also annotation keys, node-selector and toleration keys, selector keys): an optional
  prefix, a DNS-1123 subdomain of at most 253 characters, and ``/``, then a name of at most 63
  characters of ``[-_.A-Za-z0-9]`` that starts and ends with ``[A-Za-z0-9]``. At most one ``/``.
* **label value**: empty, or at most 63 characters of the same alphabet as a key's name.
* **DNS-1123 label** (container, volume and namespace names): at most 63 of ``[-a-z0-9]``, starting
  and ending with a letter or digit; a **DNS-1123 subdomain** is such labels joined by dots, at most 253.
* **port number**: 1 to 65535 (``containerPort``; a ``hostPort`` may also be 0, meaning none).
* **port name** (IANA service name): at most 15 of ``[-a-z0-9]``, at least one letter, no ``--``, not
  starting or ending with ``-``.
* **environment variable name**: ``[-._a-zA-Z][-._a-zA-Z0-9]*``, and not ``.``, ``..`` or ``..*``.
* **a string a process receives** (each word of ``command`` and ``args``, each env entry as ``NAME=value``):
  not a rule of the API server but of the node, whose runtime hands them to execve: at most
  :data:`MAX_ARG_STRLEN` bytes with the NUL that ends it (Linux's limit per string, 128 KiB), else the
  container can never start.
* **image reference** (a container's ``image``): the grammar of distribution's reference package, by which
  the kubelet's runtime reads it: ``[host[:port]/]path[:tag][@digest]``, path components of lower-case
  letters and digits joined by ``.``, ``_``, ``__`` or dashes, the name at most 255 characters.

Each ``*_problem`` function returns None for a valid value, else the rule it breaks as a phrase that
the caller puts behind the field or flag it checked. Only ASCII ranges are spelled out in the patterns,
so no Unicode letter or digit passes for ``[a-z0-9]``.
"""

from __future__ import annotations

import re

from trainctl.errors import UserError, shortened

# Patterns as text, matched with re.fullmatch, which compiles each on its first use and keeps it: compiling all
# of them up front cost every ``status`` and ``list`` a millisecond for the one it checks (docs/benchmarks.md).
DNS_1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
ENV_NAME = r"[-._a-zA-Z][-._a-zA-Z0-9]*"
PORT_NAME = r"[-a-z0-9]+"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[a-fA-F0-9:]+\])"
IMAGE_NAME = rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
IMAGE_TAG_AND_DIGEST = (r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                        r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")
LABEL_MAX, SUBDOMAIN_MAX, PORT_NAME_MAX, IMAGE_NAME_MAX = 63, 253, 15, 255
PORT_MAX = 65535
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_ARG_STRLEN = 32 * 4096  # Linux's MAX_ARG_STRLEN (32 pages of 4 KiB): one argv or environment string, NUL included
LABEL_ALPHABET = "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"


def check_namespace(namespace: object, where: str = "--namespace") -> str:
    """``namespace`` if it is a DNS-1123 label; a one-line UserError naming ``where`` otherwise."""
    problem = namespace_problem(namespace)
    if problem:
        raise UserError(f"{where} {shortened(repr(namespace))}: {problem}")
    return namespace


def namespace_problem(namespace: object) -> str | None:
    if isinstance(namespace, str) and len(namespace) <= LABEL_MAX and re.fullmatch(DNS_1123_LABEL, namespace):
        return None
    return ("not a valid namespace: at most 63 lower-case letters, digits and '-', starting and ending with a letter "
            "or digit")


def dns_label_problem(name: str) -> str | None:
    if len(name) <= LABEL_MAX and re.fullmatch(DNS_1123_LABEL, name):
        return None
    return (f"not a DNS-1123 label: at most {LABEL_MAX} lower-case letters, digits and '-', starting and ending "
            "with a letter or digit")


def dns_subdomain_problem(name: str) -> str | None:
    if len(name) <= SUBDOMAIN_MAX and re.fullmatch(DNS_1123_SUBDOMAIN, name):
        return None
    return (f"not a DNS-1123 subdomain: at most {SUBDOMAIN_MAX} lower-case letters, digits, '-' and '.', "
            "each part starting and ending with a letter or digit")


def image_problem(image: str) -> str | None:
    """What makes ``image`` no image reference (``registry.local/team/trainer:1.0``), or None."""
    reference = re.fullmatch(f"({IMAGE_NAME}){IMAGE_TAG_AND_DIGEST}", image)
    if reference and len(reference.group(1)) <= IMAGE_NAME_MAX:
        return None
    return ("not an image reference: [registry[:port]/]path[:tag][@digest], the path in lower-case letters, digits "
            "and '.', '_' or '-' between them, such as registry.local/team/trainer:1.0")


def label_key_problem(key: str) -> str | None:
    """What makes ``key`` no label key (Kubernetes' IsLabelKey), or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return "not a valid key: [prefix/]name has at most one '/'"
    if len(parts) == 2:
        if not parts[0]:
            return "not a valid key: the prefix before '/' is empty (leave out the '/', or give a domain)"
        problem = dns_subdomain_problem(parts[0])
        if problem:
            return f"not a valid key: its prefix {parts[0]!r} is {problem}"
    name = parts[-1]
    if len(name) > LABEL_MAX or not re.fullmatch(LABEL_NAME, name):
        return f"not a valid key: [prefix/]name, the name at most {LABEL_MAX} {LABEL_ALPHABET}"
    return None


def label_value_problem(value: str) -> str | None:
    """What makes ``value`` no label value (Kubernetes' IsLabelValue), or None."""
    if value == "" or (len(value) <= LABEL_MAX and re.fullmatch(LABEL_NAME, value)):
        return None
    return f"not a label value: empty, or at most {LABEL_MAX} {LABEL_ALPHABET}"


def port_number_problem(port: int, zero_means_none: bool = False) -> str | None:
    low = 0 if zero_means_none else 1
    return None if low <= port <= PORT_MAX else f"not a port number: {low} to {PORT_MAX}"


def port_name_problem(name: str) -> str | None:
    """What makes ``name`` no port name (an IANA service name, Kubernetes' IsValidPortName), or None."""
    if (len(name) <= PORT_NAME_MAX and re.fullmatch(PORT_NAME, name) and re.search("[a-z]", name)
            and "--" not in name and not name.startswith("-") and not name.endswith("-")):
        return None
    return (f"not a port name: at most {PORT_NAME_MAX} lower-case letters, digits and '-', with at least one "
            "letter, no '--', not starting or ending with '-'")


def process_string_problem(text: str, spelled: str = "") -> str | None:
    """Why ``text`` (a command word, or an env entry as ``NAME=value``: ``spelled`` says so) cannot reach a
    process: longer than execve takes; None when it fits."""
    size = len(text.encode(errors="surrogatepass"))
    if size < MAX_ARG_STRLEN:
        return None
    return (f"{size:,} bytes{spelled}: a process receives at most {MAX_ARG_STRLEN - 1:,} per argument or environment "
            f"entry (Linux's MAX_ARG_STRLEN, {MAX_ARG_STRLEN:,} bytes with the NUL that ends it), so the replica could "
            "never start; put large data in a file or a ConfigMap")


def process_strings_problem(container: dict, path: str) -> tuple[str, str] | None:
    """The first word of a container's (or a TrainJob trainer's) ``command`` and ``args``, or env entry, too long
    for execve, as (its field path, why); None when all fit."""
    for field in ("command", "args"):
        for index, word in enumerate(container.get(field) or []):
            if isinstance(word, str) and (problem := process_string_problem(word)):
                return f"{path}.{field}[{index}]", f"{word[:20]!r}... is {problem}"
    for index, env in enumerate(container.get("env") or []):
        name, value = (env.get("name"), env.get("value")) if isinstance(env, dict) else (None, None)
        if isinstance(name, str) and isinstance(value, str) and (
                problem := process_string_problem(f"{name}={value}", f" as {name[:60]}=value")):
            return f"{path}.env[{index}].value", f"the variable {name[:60]!r} is {problem}"
    return None


def env_name_problem(name: str) -> str | None:
    """What makes ``name`` no environment variable name (Kubernetes' IsEnvVarName), or None."""
    if re.fullmatch(ENV_NAME, name) and name != "." and not name.startswith(".."):
        return None
    return ("not a valid variable name: letters, digits, '_', '-' and '.', not starting with a digit, and "
            "neither '.' nor starting with '..'")
