"""A small Kubernetes REST client: JSON dicts over persistent HTTPS connections.

Why not the official client: importing it costs about 1.7 s (every CLI command paid it)
and its typed models take several times the memory of plain dicts, which matters to a
controller caching thousands of pods. The API is plain REST, so this module speaks it
directly: ``get``/``list``/``create``/``patch``/``delete`` and ``watch`` on a
:class:`Resource`, with one keep-alive connection per thread, over trainctl.kube.http
(HTTP/1.1 without http.client's email parser).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple
from urllib.parse import quote, urlencode, urlsplit

from trainctl.kube import http
from trainctl.kube.config import ClusterConfig

REQUEST_TIMEOUT_S = 30
MERGE_PATCH = "application/merge-patch+json"
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
USER_AGENT = "trainctl"
STREAM_CHUNK_BYTES = 1 << 20


class Resource(NamedTuple):
    """A REST collection: ``/api/v1/.../pods`` or ``/apis/<group>/<version>/.../<plural>``."""

    group: str
    version: str
    plural: str
    namespaced: bool = True
    kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", kind="Pod")
SERVICES = Resource("", "v1", "services", kind="Service")
EVENTS = Resource("", "v1", "events", kind="Event")
CONFIGMAPS = Resource("", "v1", "configmaps", kind="ConfigMap")
SECRETS = Resource("", "v1", "secrets", kind="Secret")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", kind="ServiceAccount")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False, kind="Namespace")
NODES = Resource("", "v1", "nodes", namespaced=False, kind="Node")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", kind="Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", kind="RoleBinding")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False, kind="ClusterRole")
CLUSTER_ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", namespaced=False,
                                 kind="ClusterRoleBinding")
DEPLOYMENTS = Resource("apps", "v1", "deployments", kind="Deployment")
LEASES = Resource("coordination.k8s.io", "v1", "leases", kind="Lease")
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False,
                kind="CustomResourceDefinition")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", namespaced=False, kind="PriorityClass")


class ApiError(Exception):
    """The API server answered with an error status (or could not be reached: status 0)."""

    def __init__(self, status: int, reason: str, message: str = "", body: dict | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status, self.reason, self.message, self.body = status, reason, message, body or {}

    @property
    def gone(self) -> bool:
        return self.status == 410


class TokenBucket:
    """client-go's client-side rate limit (flowcontrol.NewTokenBucketRateLimiter): ``qps`` tokens a second,
    at most ``burst`` saved up; every request takes one, waiting its turn when there is none (waiters
    are served in the order they came, as golang.org/x/time/rate reserves them)."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.qps, self.burst, self.clock, self.sleep = qps, burst, clock, sleep
        self.tokens, self.updated = float(burst), clock()
        self.lock = threading.Lock()
        self.waited_s = 0.0  # all the time requests spent waiting for a token (the controller's metrics)

    def take(self) -> None:
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.qps) - 1
            self.updated = now
            delay = -self.tokens / self.qps if self.tokens < 0 else 0.0
            self.waited_s += delay
        if delay:
            self.sleep(delay)


# client-go's rest.Config: QPS 0 means its default (5 a second, bursts of 10), a negative QPS no limit at all
CLIENT_GO_QPS, CLIENT_GO_BURST = 5.0, 10


def rate_limit(qps: float, burst: int) -> TokenBucket | None:
    """The limiter client-go makes of a QPS and a burst (None: unthrottled)."""
    if math.isnan(qps) or burst < 0:
        raise ValueError(f"QPS {qps} and burst {burst}: give a QPS (negative: no limit) and a burst of 0 or more")
    if qps < 0 or math.isinf(qps):
        return None
    return TokenBucket(qps or CLIENT_GO_QPS, burst or CLIENT_GO_BURST)


class Client:
    def __init__(self, config: ClusterConfig, timeout: float = REQUEST_TIMEOUT_S,
                 limiter: TokenBucket | None = None) -> None:
        """``limiter``: every request waits for its token (the controller's --kube-api-qps/--kube-api-burst)."""
        self.config, self.timeout, self.limiter = config, timeout, limiter
        url = urlsplit(config.server)
        self.https = url.scheme == "https"
        self.host, self.port = url.hostname or "localhost", url.port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")
        self.local = threading.local()
        self.tls_sessions = http.TlsSessions()
        self.requests: dict[str, int] = {}  # API requests sent by verb (get, list, create, update/status ...)
        self.counter_lock = threading.Lock()

    # ---- connections -----------------------------------------------------------
    def _connect(self, timeout: float | None) -> http.Connection:
        return http.Connection(self.host, self.port, timeout, self.config.ssl_context if self.https else None,
                               self.tls_sessions)

    def _headers(self, content_type: str | None = None, accept: str = "application/json") -> dict:
        headers = {"Accept": accept, "User-Agent": USER_AGENT}
        token = self.config.bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif self.config.basic_auth:
            import base64

            pair = ":".join(self.config.basic_auth).encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _sending(self, verb: str) -> None:
        """Before each request goes out: wait for its token (if limited), count it by verb."""
        if self.limiter is not None:
            self.limiter.take()
        with self.counter_lock:
            self.requests[verb] = self.requests.get(verb, 0) + 1

    # ---- requests --------------------------------------------------------------
    def request(self, method: str, path: str, body: object = None, query: dict | None = None,
                content_type: str = "application/json", raw: bool = False, verb: str | None = None,
                accept: str = "application/json"):
        """Send one request on this thread's keep-alive connection; the decoded JSON answer."""
        target = self.prefix + path + (f"?{urlencode(query)}" if query else "")
        payload = json.dumps(body).encode() if body is not None else None
        for attempt in range(3):
            connection = getattr(self.local, "connection", None) or self._connect(self.timeout)
            self.local.connection = connection
            try:
                self._sending(verb or method.lower())
                response = connection.request(method, target, payload,
                                              self._headers(content_type if payload is not None else None, accept))
                data = response.read()
            except (BrokenPipeError, ConnectionResetError):
                # the server closed an idle keep-alive connection: reconnect and send again
                connection.close()
                self.local.connection = None
                if attempt == 2:
                    raise
                continue
            except OSError:
                connection.close()
                self.local.connection = None
                raise
            if response.status == 401 and attempt == 0 and self.config.refresh():
                continue
            if response.status >= 400:
                raise error_from(response.status, response.reason, data)
            if raw:
                return data
            return json.loads(data) if data else {}
        raise AssertionError("unreachable")

    def get(self, resource: Resource, name: str, namespace: str | None = None, subresource: str | None = None) -> dict:
        return self.request("GET", resource.path(namespace, name, subresource), verb="get")

    def get_metadata(self, resource: Resource, name: str, namespace: str | None = None) -> dict:
        """The object without its body (a ConfigMap's megabyte of data stays on the server): a
        PartialObjectMetadata, whose ``metadata`` is the object's."""
        return self.request("GET", resource.path(namespace, name), verb="get", accept=METADATA_ONLY)

    def list(self, resource: Resource, namespace: str | None = None, selector: str | None = None,
             field_selector: str | None = None, **query) -> dict:
        """The whole collection (``items`` and ``metadata.resourceVersion``)."""
        if selector:
            query["labelSelector"] = selector
        if field_selector:
            query["fieldSelector"] = field_selector
        return self.request("GET", resource.path(namespace), query=query or None, verb="list")

    def list_each(self, wanted: list[tuple[Resource, dict]], namespace: str | None = None) -> list[dict | ApiError]:
        """:meth:`list` of each (resource, query: ``labelSelector``, ``fieldSelector`` ...) in one round trip
        (:meth:`get_each`)."""
        return self.get_each([("list", resource.path(namespace), query) for resource, query in wanted])

    def get_each(self, wanted: list[tuple[str, str, dict | None]]) -> list[dict | ApiError]:
        """A GET of each (verb as counted, path, query), all requests sent before the first answer is read (HTTP/1.1
        pipelining, one round trip for all); each answer decoded, or the ApiError it was. Should the connection
        drop on the way, what is left is asked for one at a time."""
        targets = [self.prefix + path + (f"?{urlencode(query)}" if query else "") for _, path, query in wanted]
        answers: list[dict | ApiError] = []
        connection = getattr(self.local, "connection", None) or self._connect(self.timeout)
        self.local.connection = connection
        try:
            for (verb, _, _), target in zip(wanted, targets):
                self._sending(verb)
                connection.send("GET", target, None, self._headers())
            for _ in targets:
                response = connection.response("GET")
                answers.append(decoded(response.status, response.reason, response.read()))
        except OSError:
            connection.close()
            self.local.connection = None
        if any(isinstance(answer, ApiError) and answer.status == 401 for answer in answers) and self.config.refresh():
            answers = []  # an exec plugin's token expired: ask again with the new one
        return answers + [self._answer_of(*request) for request in wanted[len(answers):]]

    def _answer_of(self, verb: str, path: str, query: dict | None) -> dict | ApiError:
        try:
            return self.request("GET", path, query=query or None, verb=verb)
        except ApiError as error:
            return error

    def create(self, resource: Resource, body: dict, namespace: str | None = None, dry_run: bool = False) -> dict:
        """Create the object; with ``dry_run`` the server validates and admits it, and stores nothing."""
        return self.request("POST", resource.path(namespace), body, query={"dryRun": "All"} if dry_run else None,
                            verb="create")

    def replace(self, resource: Resource, body: dict, namespace: str | None = None,
                subresource: str | None = None) -> dict:
        return self.request("PUT", resource.path(namespace, body["metadata"]["name"], subresource), body,
                            verb="update" + (f"/{subresource}" if subresource else ""))

    def patch(self, resource: Resource, name: str, patch: dict, namespace: str | None = None,
              subresource: str | None = None) -> dict:
        return self.request("PATCH", resource.path(namespace, name, subresource), patch, content_type=MERGE_PATCH,
                            verb="patch" + (f"/{subresource}" if subresource else ""))

    def apply(self, resource: Resource, body: dict, namespace: str | None = None) -> str:
        """Create the object, or merge it into the existing one: ``created``, ``configured`` or ``unchanged``.

        A JSON merge patch keeps what the server filled in (a Service's clusterIP, defaults) and
        works on every server version; server-side apply would not (1.20 rejects CRDs holding
        fields newer than itself, where create and merge patch drop them). A no-op patch leaves
        the resourceVersion alone, which tells ``unchanged`` from ``configured``.
        """
        name = body["metadata"]["name"]
        try:
            before = self.get(resource, name, namespace)["metadata"]["resourceVersion"]
        except ApiError as error:
            if error.status != 404:
                raise
            try:
                self.create(resource, body, namespace)
                return "created"
            except ApiError as race:
                if race.status != 409:
                    raise
                before = None  # created meanwhile by someone else: merge into theirs
        after = self.patch(resource, name, body, namespace)["metadata"]["resourceVersion"]
        return "unchanged" if after == before else "configured"

    def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
               propagation: str | None = None, grace_period: int | None = None, uid: str | None = None,
               resource_version: str | None = None) -> dict:
        options: dict = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation:
            options["propagationPolicy"] = propagation
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if uid:
            options["preconditions"] = {"uid": uid}  # never delete a newer object of the same name
        if resource_version:  # nor one changed since it was read
            options.setdefault("preconditions", {})["resourceVersion"] = resource_version
        return self.request("DELETE", resource.path(namespace, name), options, verb="delete")

    def delete_collection(self, resource: Resource, namespace: str, selector: str) -> dict:
        return self.request("DELETE", resource.path(namespace), query={"labelSelector": selector})

    # ---- streams ------------------------------------------------------------------
    def stream(self, path: str, query: dict, timeout: float | None, chunks: bool = False,
               opened: Callable[[], None] | None = None) -> Iterator[bytes]:
        """Lines of a long-running GET (watch, follow logs) on a connection of its own; with
        ``chunks``, the body as it arrives instead, in pieces of any size (logs read in bulk).
        ``opened``: called once the server answered, before any of the body came."""
        connection = self._connect(timeout)
        try:
            self._sending("watch" if query.get("watch") else "stream")
            response = connection.request("GET", self.prefix + path + "?" + urlencode(query), None, self._headers())
            if response.status >= 400:
                raise error_from(response.status, response.reason, response.read())
            if opened is not None:
                opened()
            while True:
                try:
                    line = response.read1(STREAM_CHUNK_BYTES) if chunks else response.readline()
                except TimeoutError:
                    return
                if not line:
                    return
                yield line
        finally:
            connection.close()

    def watch(self, resource: Resource, namespace: str | None, resource_version: str,
              selector: str | None = None, timeout_s: int = 300) -> Iterator[dict]:
        """Watch events ``{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}}``.

        Ends when the server closes the watch (after ``timeout_s``); an expired
        resourceVersion raises ApiError 410 so the caller relists.
        """
        query = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": timeout_s,
                 "allowWatchBookmarks": "true"}
        if selector:
            query["labelSelector"] = selector
        for line in self.stream(resource.path(namespace), query, timeout=timeout_s + 30):
            event = json.loads(line)
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                raise ApiError(status.get("code", 500), status.get("reason", "Error"), status.get("message", ""))
            yield event

    def close(self) -> None:
        connection = getattr(self.local, "connection", None)
        if connection:
            connection.close()
            self.local.connection = None


def decoded(status: int, reason: str, data: bytes) -> dict | ApiError:
    """An answer's JSON, or the ApiError its status says it is."""
    if status >= 400:
        return error_from(status, reason, data)
    return json.loads(data) if data else {}


def error_from(status: int, reason: str, data: bytes) -> ApiError:
    try:
        body = json.loads(data) if data else {}
    except ValueError:
        body = {}
    message = body.get("message", "") if isinstance(body, dict) else ""
    return ApiError(status, body.get("reason") or reason if isinstance(body, dict) else reason, message, body)


def connect(context: str | None = None, kubeconfig: str | None = None, limiter: TokenBucket | None = None) -> Client:
    from trainctl.kube import config

    return Client(config.load(context, kubeconfig), limiter=limiter)
