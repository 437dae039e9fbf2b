"""Connecting to a cluster and turning API failures into one-line errors.

The Kubernetes client is imported here, on first use only, never at start-up.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from trainctl.errors import NotFound, UserError

REQUEST_TIMEOUT_S = 15


@dataclass
class Connection:
    api_client: object
    context: str
    namespace: str
    user: str


def connect(context: str | None, kubeconfig: str | None) -> Connection:
    """In-cluster config inside a pod (unless a kubeconfig/context is given), else the kubeconfig."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise UserError("the Kubernetes client is not installed: pip install 'trainctl[kubernetes]'") from None
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not (context or kubeconfig or os.environ.get("KUBECONFIG")):
        config.load_incluster_config()
        namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
        namespace = open(namespace_file).read().strip() if os.path.exists(namespace_file) else "default"
        return Connection(client.ApiClient(), "in-cluster", namespace, "serviceaccount")
    try:
        contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError) as error:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise UserError(f"kubeconfig {where}: {str(error).rstrip('.')}; fix it or run with --local") from None
    chosen = next((c for c in contexts if c["name"] == context), None) if context else current
    if chosen is None:
        names = ", ".join(c["name"] for c in contexts) or "none"
        raise UserError(f"--context {context!r}: no such context in the kubeconfig (have: {names})")
    api_client = config.new_client_from_config(config_file=kubeconfig, context=chosen["name"])
    if not api_client.configuration.verify_ssl:
        # the kubeconfig asked for insecure-skip-tls-verify: say nothing on every request, as kubectl does
        import urllib3

        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    details = chosen.get("context") or {}
    return Connection(api_client, chosen["name"], details.get("namespace") or "default", details.get("user", ""))


@contextlib.contextmanager
def api_errors(what: str, connection: Connection | None = None) -> Iterator[None]:
    """Map API and network failures of ``what`` to a UserError naming the cause and the fix."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        yield
    except ApiException as error:
        raise UserError(describe(error, what, connection)) from None
    except (HTTPError, OSError) as error:
        server = getattr(getattr(connection, "api_client", None), "configuration", None)
        host = getattr(server, "host", "the cluster")
        raise UserError(f"{what}: cannot reach {host} ({type(error).__name__}); is the cluster up? "
                        "(or run with --local)") from None


def describe(error, what: str, connection: Connection | None) -> str:
    import json

    try:
        message = json.loads(error.body).get("message", "") if error.body else ""
    except (ValueError, AttributeError):
        message = ""
    user = f' as "{connection.user}"' if connection and connection.user else ""
    if error.status == 401:
        return f"{what}: unauthorized{user}: the credentials in the kubeconfig were refused; log in again"
    if error.status == 403:
        return (f"{what}: forbidden{user}: {message or 'no permission'}; ask for the Role in "
                "controller/rbac/cli-role.yaml")
    if error.status == 404:
        return f"{what}: not found{': ' + message if message else ''}"
    return f"{what}: {error.status} {error.reason}{': ' + message if message else ''}"


def is_status(error: BaseException, status: int) -> bool:
    return getattr(error, "status", None) == status


def not_found(kind_name: str, namespace: str) -> NotFound:
    return NotFound(f'job "{kind_name}" not found in namespace "{namespace}" (kubernetes): see trainctl list')
