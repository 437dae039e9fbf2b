"""trainctl: run Kubeflow kubeflow.org/v1 training jobs locally or on Kubernetes.

    from trainctl import Client
    job = Client().run(train, args={"lr": 0.1}, framework="pytorch", workers=3)
    job.wait(); print(job.result())

and inside a job's replicas (any script or function, with or without trainctl in the image)::

    trainctl.report(step=i, total=steps, loss=loss)   # trainctl status / job.progress() / job.metrics()
    trainctl.latest_checkpoint(), trainctl.checkpoint_path(step), trainctl.preempting()  # docs/fault-tolerance.md

(docs/python-api.md is the walkthrough.) The package is layered so that the CLI stays a thin shell over a
Python API, and one engine serves every framework and both runtimes (docs/architecture.md draws the layers):

* ``trainctl.frameworks``: one small module per framework holding only what
  differs between kinds (replica types, container name, port, env, success rule).
* ``trainctl.core``: the job model and the reconcile engine both runtimes share.
* ``trainctl.submit``: the one pipeline from options to a validated job resource.
* ``trainctl.backends``, ``trainctl.controller``: where jobs run.
* ``trainctl.sdk``: the Python API (``Client``, ``JobHandle``); ``trainctl.compat`` speaks upstream's
  ``TrainingClient`` over it.
* ``trainctl.cli``: the Typer command groups; they call the API and print.

Heavy dependencies (the kubernetes client, any ML framework) are imported only
inside the functions that need them, so ``trainctl --help`` stays fast.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads them
    from trainctl.checkpoints import (PREEMPTED_EXIT, checkpoint_complete, checkpoint_dir, checkpoint_path,
                                      checkpoint_step, latest_checkpoint, preempting, restart_attempt)
    from trainctl.errors import InvalidArgument, JobFailed, UserError
    from trainctl.reporting import report
    from trainctl.sdk.client import Client
    from trainctl.sdk.handle import JobHandle

__version__ = "0.1.0"
API_GROUP = "kubeflow.org"
API_VERSION = "kubeflow.org/v1"
# Kubeflow Trainer v2: TrainJob, TrainingRuntime, ClusterTrainingRuntime (trainctl/core/trainer_crds.py)
TRAINER_API_GROUP = "trainer.kubeflow.org"
TRAINER_API_VERSION = f"{TRAINER_API_GROUP}/v1alpha1"

# The public API, loaded on first use so `import trainctl` (and the CLI's start-up) stays light.
CHECKPOINTS = ["checkpoint_dir", "checkpoint_path", "checkpoint_complete", "checkpoint_step", "latest_checkpoint",
               "preempting", "restart_attempt", "PREEMPTED_EXIT"]
__all__ = ["Client", "InvalidArgument", "JobFailed", "JobHandle", "UserError", "report", *CHECKPOINTS]
_EXPORTS = {"Client": "trainctl.sdk.client", "JobHandle": "trainctl.sdk.handle", "JobFailed": "trainctl.errors",
            "InvalidArgument": "trainctl.errors", "UserError": "trainctl.errors", "report": "trainctl.reporting",
            **dict.fromkeys(CHECKPOINTS, "trainctl.checkpoints")}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'trainctl' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # found directly from now on: report() is called in training loops
    return value
