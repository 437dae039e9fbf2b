"""A container's env as its process sees it, by kubelet's rules, for the local backend's processes.

Values as written, with ``$(VAR)`` replaced by a variable defined before it (``$$`` escapes a ``$``, an unknown
reference stays as written); ``valueFrom.fieldRef`` of the pod's own metadata (the downward API: its name,
namespace, uid, a label or an annotation) and its IP. What exists only in a cluster (a Secret's or ConfigMap's key,
the node's name) is left out.
"""

from __future__ import annotations

import re

REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
KEYED_FIELD = re.compile(r"metadata\.(labels|annotations)\['([^']*)'\]")


def resolved(entries: list[dict], metadata: dict | None = None, pod_ip: str | None = None) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in entries:
        if "valueFrom" in entry:
            value = field_value(((entry["valueFrom"] or {}).get("fieldRef") or {}).get("fieldPath"), metadata or {},
                                pod_ip)
            if value is None:
                continue
        else:
            value = REFERENCE.sub(lambda found: env.get(found[1], found[0]) if found[1] else "$",
                                  str(entry.get("value", "")))
        env[entry["name"]] = value
    return env


def field_value(path: str | None, metadata: dict, pod_ip: str | None) -> str | None:
    """The downward API's value of ``path`` for a pod with ``metadata``; None where a process has none."""
    keyed = KEYED_FIELD.fullmatch(path or "")
    if keyed:
        return (metadata.get(keyed[1]) or {}).get(keyed[2])
    if path in ("metadata.name", "metadata.namespace", "metadata.uid"):
        return metadata.get(path.removeprefix("metadata."))
    return pod_ip if path == "status.podIP" else None
