"""List+watch caches of API objects (client-go's reflector and indexer, in small).

An :class:`Informer` lists a collection once, then watches from the list's
resourceVersion and keeps an in-memory copy up to date. When the server says the
version is too old (410 Gone) it lists again and reports the difference, so no change
is ever missed. Reconciles read only these caches: steady state costs no GET or LIST.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from trainctl.kube.client import ApiError, Client, Resource

log = logging.getLogger("trainctl.controller")

Key = tuple[str, str]  # (namespace, name)
Handler = Callable[[str, dict], None]  # (ADDED | MODIFIED | DELETED, object)
WATCH_TIMEOUT_S = 60  # a watch the server silently stalls costs at most this long
RETRY_S = 1.0
TOMBSTONES = 10_000  # deletions remembered, so a late copy of a deleted object is not taken for a new one


def object_key(obj: dict) -> Key:
    metadata = obj["metadata"]
    return metadata.get("namespace", ""), metadata["name"]


def newer(obj: dict, cached: dict) -> bool:
    """Whether ``obj`` is a later version than ``cached``.

    resourceVersions are opaque to clients, but every API server backed by etcd issues
    increasing integers; compare them as such, and treat anything else as different.
    """
    new, old = obj["metadata"].get("resourceVersion", ""), cached["metadata"].get("resourceVersion", "")
    if new.isdigit() and old.isdigit():
        return int(new) > int(old)
    return new != old


class Informer:
    def __init__(self, client: Client, resource: Resource, namespace: str | None = None,
                 selector: str | None = None, index: Callable[[dict], object] | None = None,
                 transform: Callable[[dict], dict] | None = None) -> None:
        """``transform``: what of each object is kept (client-go's SetTransform), for caches of thousands."""
        self.client, self.resource, self.namespace, self.selector = client, resource, namespace, selector
        self.index_of, self.transform = index, transform
        self.cache: dict[Key, dict] = {}
        self.indexed: dict[object, dict[Key, dict]] = {}
        self.tombstones: OrderedDict[Key, dict] = OrderedDict()  # key -> the object as it was deleted
        self.handlers: list[Handler] = []
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.stopping = threading.Event()
        self.resource_version = ""
        self.thread: threading.Thread | None = None

    def __repr__(self) -> str:
        scope = self.namespace or "all namespaces"
        return f"<Informer {self.resource.plural} in {scope}>"

    # ---- reads (any thread) ---------------------------------------------------------
    def get(self, namespace: str, name: str) -> dict | None:
        with self.lock:
            return self.cache.get((namespace, name))

    def last_seen(self, namespace: str, name: str) -> dict | None:
        """The object as cached, or as it was when it was deleted (while its tombstone lasts)."""
        with self.lock:
            return self.cache.get((namespace, name)) or self.tombstones.get((namespace, name))

    def by_index(self, value: object) -> list[dict]:
        with self.lock:
            return list(self.indexed.get(value, {}).values())

    def items(self) -> list[dict]:
        with self.lock:
            return list(self.cache.values())

    # ---- the loop ---------------------------------------------------------------------
    def start(self) -> Informer:
        self.thread = threading.Thread(target=self.run, name=f"informer-{self.resource.plural}", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                if not self.resource_version:
                    self.relist()
                self.watch()
            except ApiError as error:
                if error.gone:
                    log.info("%r: resourceVersion expired, listing again", self)
                    self.resource_version = ""
                    continue
                log.warning("%r: %s; retrying", self, error)
                self.stopping.wait(RETRY_S)
            except (OSError, ValueError) as error:
                if self.stopping.is_set():
                    return  # stopped while the watch waited: its connection going is no news
                log.warning("%r: %s: %s; retrying", self, type(error).__name__, error)
                self.stopping.wait(RETRY_S)

    def relist(self) -> None:
        listing = self.client.list(self.resource, self.namespace, self.selector)
        fresh = {object_key(item): item for item in listing.get("items") or []}
        with self.lock:
            gone = [obj for key, obj in self.cache.items() if key not in fresh]
        for obj in gone:
            self.apply("DELETED", obj)
        for obj in fresh.values():
            self.apply("ADDED", obj)
        self.resource_version = listing["metadata"]["resourceVersion"]
        self.synced.set()

    def watch(self) -> None:
        for event in self.client.watch(self.resource, self.namespace, self.resource_version, self.selector,
                                       timeout_s=WATCH_TIMEOUT_S):
            if self.stopping.is_set():
                return
            obj = event["object"]
            self.resource_version = obj["metadata"].get("resourceVersion") or self.resource_version
            if event["type"] != "BOOKMARK":
                self.apply(event["type"], obj)

    def apply(self, kind: str, obj: dict) -> None:
        """Take one event into the cache and tell the handlers.

        Events reach the cache from two threads: the watch, and a reconcile that shows its own
        write at once. So a write answered just before the object was deleted may arrive after
        the DELETED event; without the tombstone it would bring the object back into the cache
        for good (no later event ever removes it), and the controller would keep recreating the
        children of a job that no longer exists.
        """
        # server-side-apply bookkeeping: about a third of a pod's JSON, never read by the controller
        obj["metadata"].pop("managedFields", None)
        if self.transform is not None:
            obj = self.transform(obj)
        key = object_key(obj)
        with self.lock:
            old = self.cache.get(key)
            if kind == "DELETED":
                self.cache.pop(key, None)
                self.bury(key, obj)
            elif old is not None and not newer(obj, old):
                return  # a relist re-reports what we have, or the watch catches up with our own write
            elif old is None and key in self.tombstones and not newer(obj, self.tombstones[key]):
                return  # a late copy of what was deleted since
            else:
                self.cache[key] = obj
                self.tombstones.pop(key, None)
            self._reindex(key, old, None if kind == "DELETED" else obj)
        for handler in self.handlers:
            try:
                handler(kind, obj)
            except Exception:  # noqa: BLE001  one handler's bug must not end the watch for every object after it
                log.exception("%r: a handler failed on %s %s; watching on", self, kind, "/".join(map(str, key)))

    def bury(self, key: Key, obj: dict) -> None:
        self.tombstones[key] = obj
        self.tombstones.move_to_end(key)
        while len(self.tombstones) > TOMBSTONES:
            self.tombstones.popitem(last=False)

    def _reindex(self, key: Key, old: dict | None, new: dict | None) -> None:
        if self.index_of is None:
            return
        if old is not None:
            bucket = self.indexed.get(self.index_of(old))
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self.indexed[self.index_of(old)]
        if new is not None:
            self.indexed.setdefault(self.index_of(new), {})[key] = new
