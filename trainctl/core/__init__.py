"""The reconcile core: a pure function from (job, observed replicas, time) to actions.

Shared by the local runtime (replicas are processes) and the in-cluster controller
(replicas are pods): neither contains any job logic of its own, they only observe and
execute. See :func:`trainctl.core.reconcile.reconcile`.
"""
