"""The in-cluster operator: informers, a work queue and the shared reconcile core against the API server."""
