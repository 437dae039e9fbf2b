"""trainctl: run Kubeflow kubeflow.org/v1 training jobs locally or on Kubernetes.

The package is layered so that the CLI stays a thin shell over a Python API:

* ``trainctl.frameworks``: one small module per framework holding only what
  differs between kinds (replica types, container name, port, env, success rule).
* ``trainctl.job``: read access to a job resource with the operator's in-memory
  defaults applied.
* ``trainctl.cli``: the Typer command groups; they call the API and print.

Heavy dependencies (the kubernetes client, any ML framework) are imported only
inside the functions that need them, so ``trainctl --help`` stays fast.
"""

__version__ = "0.1.0"
API_GROUP = "kubeflow.org"
API_VERSION = "kubeflow.org/v1"
