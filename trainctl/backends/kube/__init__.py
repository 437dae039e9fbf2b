"""The Kubernetes backend: jobs are kubeflow.org/v1 custom resources on a cluster.

Pods are created by whichever operator runs there (trainctl's controller or the Kubeflow
Training Operator); this backend stores jobs, reads them back with their pods and
events, and streams logs through the API server.
"""

from trainctl.backends.kube.backend import KubeBackend

__all__ = ["KubeBackend"]
