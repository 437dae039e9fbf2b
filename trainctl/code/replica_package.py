"""The ``__init__.py`` of the package ``trainctl`` that travels with every job, so that a replica can
``import trainctl; trainctl.report(...)`` in an image without trainctl.

trainctl writes this file, as ``trainctl/__init__.py``, and :mod:`trainctl.reporting` and
:mod:`trainctl.checkpoints` beside it, into a
directory of the job's own (``.trainctl/lib`` of a pod's code snapshot; the job's state directory
locally) and puts that directory first on the replicas' PYTHONPATH (trainctl.code.pods.REPLICA_LIB).
Imported there, it first looks for a trainctl installed anywhere else on ``sys.path``: if there is
one, this import becomes that package, whole (its Client and all), so an image that has trainctl
runs its own; if not, the package is this stand-in, whose attributes are ``report`` and the checkpoint
functions (``checkpoint_dir``, ``latest_checkpoint``, ``preempting`` ...).

The standard library only, and nothing runs unless it is imported as ``trainctl``.
"""

import importlib.machinery
import importlib.util
import os
import sys


def installed_trainctl():
    """The spec of a package ``trainctl`` other than this stand-in, as the import system would find it were this
    directory not on ``sys.path`` (an editable install's finder included), or None."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    elsewhere = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    for finder in sys.meta_path:
        try:
            if finder is importlib.machinery.PathFinder:
                spec = finder.find_spec("trainctl", elsewhere)
            else:
                spec = finder.find_spec("trainctl", None)
        except (AttributeError, ImportError, ValueError):  # a finder of another age, or one that refuses
            continue
        origin = getattr(spec, "origin", None)
        if spec is not None and origin and os.path.dirname(os.path.dirname(os.path.abspath(origin))) != here:
            return spec
    return None


if __name__ == "trainctl":
    _installed = installed_trainctl()
    if _installed is not None:  # the import system hands out what sys.modules holds once this module ran
        _module = importlib.util.module_from_spec(_installed)
        sys.modules["trainctl"] = _module
        _installed.loader.exec_module(_module)
    else:
        from trainctl.checkpoints import (PREEMPTED_EXIT, checkpoint_complete, checkpoint_dir,  # noqa: F401
                                          checkpoint_path, checkpoint_step, latest_checkpoint, preempting,
                                          restart_attempt)
        from trainctl.reporting import report  # noqa: F401 - the stand-in's exports

        __all__ = ["report", "checkpoint_dir", "checkpoint_path", "checkpoint_complete", "checkpoint_step",
                   "latest_checkpoint", "preempting", "restart_attempt", "PREEMPTED_EXIT"]
