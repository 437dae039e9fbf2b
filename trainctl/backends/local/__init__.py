"""The local backend: every replica of a job runs as a process on this machine.

See docs/local-backend.md. :class:`LocalBackend` stores jobs under the state
directory and starts one detached supervisor per job
(:mod:`trainctl.backends.local.supervisor`), which runs the shared reconcile core.
"""

from trainctl.backends.local.backend import LocalBackend

__all__ = ["LocalBackend"]
