"""Cluster DNS for the real node: a watcher that turns Services and Endpoints into a hosts file
that dnsmasq serves (there is no CoreDNS in Debian; docs/real-node.md).

    python -m tests.cluster.dns KUBECONFIG HOSTS_FILE DNSMASQ_PID

Runs inside the node's network namespace. It lists Services and Endpoints in all namespaces once,
then follows each with a watch (as CoreDNS's informers do): a change reaches the file within
milliseconds, and an idle cluster costs nothing. (It used to list both every 0.25 s, each over a new
TLS connection: some 7 % of a core between the API server, etcd and itself for the whole real-node
tier.) A watch that ends or fails is started again from a new list. It writes, for each Service:
  - ``<clusterIP> name.ns.svc.cluster.local`` when it has a cluster IP;
  - for a headless Service, ``<ip> name.ns.svc.cluster.local`` per endpoint address and
    ``<ip> hostname.name.ns.svc.cluster.local`` where the address carries a hostname (pods with
    ``hostname`` + ``subdomain``), not-ready addresses included when the Service publishes them.
When the records change it replaces the file atomically and sends dnsmasq SIGHUP: dnsmasq then
drops its cache and re-reads the file, so removed records disappear too (a hosts *directory*
watched through inotify only ever adds). Standard library only, so any Python runs it.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import sys
import threading
import time
import urllib.request
from pathlib import Path

DOMAIN = "svc.cluster.local"
#: the API server ends each watch after this long; the watcher lists again and watches on
WATCH_S = 300


class Api:
    """GET against the API server with the client certificate of an (admin) kubeconfig."""

    def __init__(self, kubeconfig: Path) -> None:
        config = json.loads(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.server = cluster["server"]
        self.context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.context.load_cert_chain(user["client-certificate"], user["client-key"])

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(f"{self.server}{path}", context=self.context, timeout=10) as response:
            return json.load(response)

    def watch(self, path: str, resource_version: str):
        """The events of one watch, one JSON object per line, until the server ends it."""
        url = f"{self.server}{path}?watch=1&resourceVersion={resource_version}&timeoutSeconds={WATCH_S}"
        with urllib.request.urlopen(url, context=self.context, timeout=WATCH_S + 30) as response:
            for line in response:
                yield json.loads(line)


class Store:
    """The Services and Endpoints the watches have seen; ``changed`` is set on every change."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[tuple[str, str], dict]] = {"services": {}, "endpoints": {}}
        self.lock = threading.Lock()
        self.changed = threading.Event()

    def replace(self, kind: str, items: list[dict]) -> None:
        with self.lock:
            self.objects[kind] = {key_of(item): item for item in items}
        self.changed.set()

    def apply(self, kind: str, event: dict) -> None:
        item = event["object"]
        with self.lock:
            if event["type"] == "DELETED":
                self.objects[kind].pop(key_of(item), None)
            else:
                self.objects[kind][key_of(item)] = item
        self.changed.set()

    def records(self) -> list[str]:
        with self.lock:
            return records(list(self.objects["services"].values()), list(self.objects["endpoints"].values()))


def key_of(item: dict) -> tuple[str, str]:
    return item["metadata"]["namespace"], item["metadata"]["name"]


def follow(api: Api, kind: str, store: Store) -> None:
    """List ``kind`` in every namespace, then apply its watch's events; again from a new list when the watch
    ends, expires (an ERROR event: 410 Gone) or the connection fails."""
    path = f"/api/v1/{kind}"
    while True:
        try:
            listing = api.get(path)
            store.replace(kind, listing["items"])
            for event in api.watch(path, listing["metadata"]["resourceVersion"]):
                if event["type"] == "ERROR":
                    break
                store.apply(kind, event)
        except (OSError, ValueError) as error:  # the API server restarting or stopping: keep the last records
            print(f"dns: {kind}: {error}", file=sys.stderr, flush=True)
            time.sleep(1)


def records(services: list[dict], endpoints: list[dict]) -> list[str]:
    """Sorted ``ip name`` lines for these Services and their Endpoints."""
    by_name = {(item["metadata"]["namespace"], item["metadata"]["name"]): item for item in endpoints}
    lines = set()
    for service in services:
        namespace, name = service["metadata"]["namespace"], service["metadata"]["name"]
        fqdn = f"{name}.{namespace}.{DOMAIN}"
        cluster_ip = service["spec"].get("clusterIP")
        if cluster_ip and cluster_ip != "None":
            lines.add(f"{cluster_ip} {fqdn}")
            continue
        publish_not_ready = service["spec"].get("publishNotReadyAddresses", False)
        for subset in by_name.get((namespace, name), {}).get("subsets") or []:
            addresses = [*(subset.get("addresses") or []),
                         *((subset.get("notReadyAddresses") or []) if publish_not_ready else [])]
            for address in addresses:
                lines.add(f"{address['ip']} {fqdn}")
                if address.get("hostname"):
                    lines.add(f"{address['ip']} {address['hostname']}.{fqdn}")
    return sorted(lines)


def write_atomically(path: Path, text: str) -> None:
    draft = path.with_name(f".{path.name}.draft")
    draft.write_text(text)
    draft.chmod(0o644)  # dnsmasq reads it after dropping root
    os.replace(draft, path)


def serve(api: Api, hosts: Path, dnsmasq_pid: int) -> None:
    store = Store()
    for kind in store.objects:
        threading.Thread(target=follow, args=(api, kind, store), name=f"watch {kind}", daemon=True).start()
    written = None
    while True:
        store.changed.wait()
        store.changed.clear()
        lines = store.records()
        if lines != written:
            write_atomically(hosts, "".join(f"{line}\n" for line in lines))
            os.kill(dnsmasq_pid, signal.SIGHUP)
            written = lines


def main(argv: list[str]) -> int:
    kubeconfig, hosts, dnsmasq_pid = argv
    serve(Api(Path(kubeconfig)), Path(hosts), int(dnsmasq_pid))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
