"""API and network failures as one-line errors that name what failed and the fix."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from trainctl.errors import UserError
from trainctl.kube.client import ApiError, Client

CLI_ROLE_HINT = "ask for the Role in controller/rbac/cli-role.yaml"


@contextlib.contextmanager
def api_errors(what: str, client: Client, forbidden_hint: str = CLI_ROLE_HINT) -> Iterator[None]:
    """Map an ApiError or a network failure inside the block to a UserError about ``what``."""
    try:
        yield
    except ApiError as error:
        raise UserError(describe(error, what, client, forbidden_hint)) from None
    except OSError as error:
        raise UserError(f"{what}: cannot reach {client.config.server} ({type(error).__name__}); "
                        "is the cluster up? (or run jobs locally: TRAINCTL_BACKEND=local)") from None


def describe(error: ApiError, what: str, client: Client, forbidden_hint: str = CLI_ROLE_HINT) -> str:
    user = f' as "{client.config.user}"' if client.config.user else ""
    message = error.message
    if error.status == 401:
        return f"{what}: unauthorized{user}: the credentials in the kubeconfig were refused; log in again"
    if error.status == 403:
        return f"{what}: forbidden{user}: {message or 'no permission'}; {forbidden_hint}"
    if error.status == 404:
        return f"{what}: not found{': ' + message if message else ''}"
    return f"{what}: {error.status} {error.reason}{': ' + message if message else ''}"
