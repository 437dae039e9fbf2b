"""The in-cluster operator: informers, a work queue and the shared reconcile core against the API server.

controller.py wires informers to the work queue and runs the workers; executor.py does what the core
asks (creates and deletes with expectations, events, status writes); owned.py applies what a framework
needs besides pods and services; gang.py keeps PodGroups; progress.py reads running pods' reports;
manager.py runs it all (leader election, health and metrics endpoints); install.py makes its manifests.
It may import the core, the frameworks, Kubernetes' rules and client, and the Kubernetes backend's pod
logs; no backend imports it, and only the CLI does.
"""
