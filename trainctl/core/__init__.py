"""The core: what a kubeflow.org/v1 job is, and the reconcile engine both runtimes share.

The job model: job.py (the resource with the operator's defaults applied), crds.py and
validation.py (its schema and admission rules), conditions.py (the one reader of a job's state, and
the operator's condition rules). The engine: reconcile.py, a pure function from (job, observed
replicas, time) to actions (actions.py), with network.py for how replicas address each other and
attribution.py for which replica caused a failure. Shared by the local runtime (replicas are
processes) and the in-cluster controller (replicas are pods): neither contains any job logic of its
own, they only observe and execute. It may import the frameworks, Kubernetes' rules, the function
runner's record format and the ground floor; never a backend, the submission, the SDK or the CLI.
"""
