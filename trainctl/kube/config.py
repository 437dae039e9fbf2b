"""Where the cluster is and who we are: a kubeconfig context, or the pod's service account.

Read with PyYAML and the standard library only, so commands that talk to a cluster do not
pay the Kubernetes client's import time (about 1.7 s). Supported: bearer tokens (inline
or tokenFile), client certificates (files or inline data), basic auth, exec credential
plugins, certificate authorities and insecure-skip-tls-verify; that is what kubectl's
own kubeconfigs use. Legacy auth-provider entries are refused with the fix.

The context a command used is kept, parsed, in trainctl.kube.kubeconfig_cache, so the next
command reads JSON instead of importing the YAML parser (docs/benchmarks.md, CLI latency).
"""

from __future__ import annotations

import base64
import os
import ssl
from pathlib import Path

from trainctl.errors import UserError, option
from trainctl.kube import kubeconfig_cache

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ClusterConfig:
    """Where the API server is and the credentials to show it (a plain class: every command makes it, and a
    dataclass costs ten times as long to make; docs/benchmarks.md, CLI latency)."""

    def __init__(self, server: str, context: str, namespace: str = "default", user: str = "",
                 token: str | None = None, token_file: str | None = None,
                 basic_auth: tuple[str, str] | None = None, ssl_context: ssl.SSLContext | None = None,
                 exec_plugin: dict | None = None) -> None:
        self.server, self.context, self.namespace, self.user = server, context, namespace, user
        self.token, self.token_file, self.basic_auth, self.ssl_context = token, token_file, basic_auth, ssl_context
        #: an exec plugin to run for a (fresh) token when the server answers 401
        self.exec_plugin = exec_plugin

    def __repr__(self) -> str:  # never the credentials
        return f"ClusterConfig(server={self.server!r}, context={self.context!r}, namespace={self.namespace!r}, " \
               f"user={self.user!r})"

    def bearer_token(self) -> str | None:
        if self.token_file:
            # projected service-account tokens are rotated on disk: read the current one
            return Path(self.token_file).read_text().strip()
        return self.token

    def refresh(self) -> bool:
        """Run the exec plugin again (the token expired); False when there is nothing to refresh."""
        if not self.exec_plugin:
            return False
        self.token = run_exec_plugin(self.exec_plugin, self)
        return True


def load(context: str | None = None, kubeconfig: str | None = None) -> ClusterConfig:
    """In-cluster config inside a pod (unless a kubeconfig or context is named), else the kubeconfig."""
    if os.environ.get("KUBERNETES_SERVICE_HOST") and not (context or kubeconfig or os.environ.get("KUBECONFIG")):
        return in_cluster()
    return from_kubeconfig(context, kubeconfig)


def in_cluster() -> ClusterConfig:
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    host = f"[{host}]" if ":" in host else host
    namespace_file = SERVICE_ACCOUNT_DIR / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.exists() else "default"
    tls = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT_DIR / "ca.crt"))
    return ClusterConfig(server=f"https://{host}:{port}", context="in-cluster", namespace=namespace,
                         user="serviceaccount", token_file=str(SERVICE_ACCOUNT_DIR / "token"), ssl_context=tls)


def kubeconfig_path(kubeconfig: str | None) -> Path:
    if kubeconfig:
        return Path(kubeconfig).expanduser()
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    # like kubectl, the first file of KUBECONFIG that exists holds the contexts we read
    existing = [p for p in paths if Path(p).expanduser().exists()]
    return Path((existing or paths or ["~/.kube/config"])[0]).expanduser()


def from_kubeconfig(context: str | None, kubeconfig: str | None) -> ClusterConfig:
    path = kubeconfig_path(kubeconfig)
    chosen = kubeconfig_cache.read(path, context)
    if chosen is None:
        stamp = kubeconfig_cache.fingerprint(path)  # before reading: an edit meanwhile is seen next time
        chosen = chosen_context(path, context)
        kubeconfig_cache.write(path, context, chosen, stamp)
    return cluster_config(path, chosen)


def chosen_context(path: Path, context: str | None) -> dict:
    """From the kubeconfig at ``path``: the context to use (``context``, else the current one) as
    ``{"name", "context", "cluster", "user"}``, each entry as the file has it."""
    import yaml

    try:
        # libyaml's loader where built in: kubeconfigs with many contexts parse in a fraction of the time
        document = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except OSError as error:
        raise UserError(f"kubeconfig {path}: {error.strerror or error}; create one (kubectl config) "
                        "or run jobs locally (TRAINCTL_BACKEND=local)") from None
    except yaml.YAMLError as error:
        raise UserError(f"kubeconfig {path}: not valid YAML ({str(error).splitlines()[0]}); fix it") from None
    if not isinstance(document, dict):
        raise UserError(f"kubeconfig {path}: not a kubeconfig (expected a mapping); fix it")
    contexts = named(document, "contexts", "context")
    name = context or document.get("current-context")
    if not name:
        raise UserError(f"kubeconfig {path}: no current-context set: pass {option('context')} or run kubectl config "
                        "use-context")
    if name not in contexts:
        have = ", ".join(contexts) or "none"
        raise UserError(f"{option('context')} {name!r}: no such context in {path} (have: {have})")
    chosen = contexts[name] or {}
    cluster = named(document, "clusters", "cluster").get(chosen.get("cluster"))
    if not cluster or not cluster.get("server"):
        raise UserError(f"kubeconfig {path}: context {name!r} names cluster {chosen.get('cluster')!r}, "
                        "which has no server; fix the kubeconfig")
    user = named(document, "users", "user").get(chosen.get("user", "")) or {}
    return {"name": name, "context": chosen, "cluster": cluster, "user": user}


def cluster_config(path: Path, chosen: dict) -> ClusterConfig:
    """The connection :func:`chosen_context` describes: TLS context, credentials (an exec plugin is run now)."""
    context, cluster, user = chosen["context"], chosen["cluster"], chosen["user"]
    user_name = context.get("user", "")
    config = ClusterConfig(server=cluster["server"].rstrip("/"), context=chosen["name"],
                           namespace=context.get("namespace") or "default", user=user_name)
    config.ssl_context = tls_context(cluster, user, path.parent) if config.server.startswith("https") else None
    authenticate(config, user, path)
    return config


def named(document: dict, section: str, key: str) -> dict[str, dict]:
    return {entry.get("name"): entry.get(key) for entry in document.get(section) or [] if isinstance(entry, dict)}


def relative(base: Path, name: str) -> str:
    return str((base / Path(name).expanduser()).resolve())


def tls_context(cluster: dict, user: dict, base: Path) -> ssl.SSLContext:
    if cluster.get("insecure-skip-tls-verify"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    elif cluster.get("certificate-authority"):
        context = ssl.create_default_context(cafile=relative(base, cluster["certificate-authority"]))
    else:
        context = ssl.create_default_context()
    load_client_certificate(context, user, base)
    return context


def load_client_certificate(context: ssl.SSLContext, user: dict, base: Path) -> None:
    if user.get("client-certificate") and user.get("client-key"):
        context.load_cert_chain(relative(base, user["client-certificate"]), relative(base, user["client-key"]))
    elif user.get("client-certificate-data") and user.get("client-key-data"):
        import tempfile

        # ssl wants files: write both to a private directory that exists only while loading
        with tempfile.TemporaryDirectory(prefix="trainctl-") as private:
            cert, key = Path(private, "cert.pem"), Path(private, "key.pem")
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            context.load_cert_chain(str(cert), str(key))


def authenticate(config: ClusterConfig, user: dict, path: Path) -> None:
    if user.get("token"):
        config.token = user["token"]
    elif user.get("tokenFile"):
        config.token_file = relative(path.parent, user["tokenFile"])
    elif user.get("username") is not None and user.get("password") is not None:
        config.basic_auth = (user["username"], user["password"])
    elif user.get("exec"):
        config.exec_plugin = user["exec"]
        config.token = run_exec_plugin(user["exec"], config)
    elif user.get("auth-provider"):
        provider = user["auth-provider"].get("name", "?")
        raise UserError(f"kubeconfig {path}: user {config.user!r} uses the removed auth-provider {provider!r}; "
                        "switch it to an exec credential plugin (e.g. gke-gcloud-auth-plugin, kubelogin)")


def run_exec_plugin(plugin: dict, config: ClusterConfig) -> str | None:
    """Run a client.authentication.k8s.io exec plugin (no shell) and return its token."""
    import json
    import subprocess
    import tempfile

    command = [plugin.get("command", "")] + [str(a) for a in plugin.get("args") or []]
    env = {**os.environ, **{e["name"]: e["value"] for e in plugin.get("env") or []}}
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True)
        credential = json.loads(result.stdout)
    except FileNotFoundError:
        raise UserError(f"kubeconfig user {config.user!r}: exec plugin {command[0]!r} is not installed; "
                        f"install it or pick another {option('context')}") from None
    except (subprocess.SubprocessError, ValueError) as error:
        raise UserError(f"kubeconfig user {config.user!r}: exec plugin {command[0]!r} failed "
                        f"({type(error).__name__}); run it by hand to see why") from None
    status = credential.get("status") or {}
    if status.get("clientCertificateData") and status.get("clientKeyData") and config.ssl_context:
        with tempfile.TemporaryDirectory(prefix="trainctl-") as private:
            cert, key = Path(private, "cert.pem"), Path(private, "key.pem")
            cert.write_text(status["clientCertificateData"])
            key.write_text(status["clientKeyData"])
            config.ssl_context.load_cert_chain(str(cert), str(key))
    return status.get("token")
