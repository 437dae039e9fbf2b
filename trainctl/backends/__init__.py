"""Where jobs run: ``local`` (processes on this machine) or ``kubernetes``.

Backends are imported by name only when a command needs one, so ``trainctl --help``
never loads the Kubernetes client, and a build without the Kubernetes backend still
runs local jobs. base.py is the interface every backend implements and its data (replica rows,
log lines, reports); reported.py reads what replicas reported back through any backend. A backend
may import the core, the code that travels, the function jobs' files and the ground floor; the
controller (which reuses the Kubernetes backend's pod logs) and the SDK use them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from trainctl.errors import UserError

if TYPE_CHECKING:
    from trainctl.backends.base import Backend

# backend name -> (module, class); the class takes the keyword arguments given to load()
IMPLEMENTATIONS = {
    "local": ("trainctl.backends.local", "LocalBackend"),
    "kubernetes": ("trainctl.backends.kube", "KubeBackend"),
}


def load(name: str, **options: object) -> Backend:
    """An instance of the backend called ``name``; UserError if unknown or not part of this build."""
    if name not in IMPLEMENTATIONS:
        raise UserError(f"backend {name!r}: use one of {', '.join(IMPLEMENTATIONS)}")
    module_name, class_name = IMPLEMENTATIONS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as missing:
        if missing.name is None or not module_name.startswith(missing.name):
            raise  # a bug inside the backend, not a missing backend
        raise UserError(f"the {name} backend is not available in this trainctl build: "
                        "run jobs locally with TRAINCTL_BACKEND=local") from None
    return getattr(module, class_name)(**options)
