"""Cluster DNS for the real node: a poller that turns Services and Endpoints into a hosts file
that dnsmasq serves (there is no CoreDNS in Debian; docs/real-node.md).

    python -m tests.cluster.dns KUBECONFIG HOSTS_FILE DNSMASQ_PID

Runs inside the node's network namespace. Every POLL_S it lists Services and Endpoints in all
namespaces, over one kept-alive TLS connection (a new connection per list cost the API server, etcd and
the poller some 7 % of a core on an idle node: API server 7.0 % against 4.1 % with the poller stopped),
and writes, for each Service:
  - ``<clusterIP> name.ns.svc.cluster.local`` when it has a cluster IP;
  - for a headless Service, ``<ip> name.ns.svc.cluster.local`` per endpoint address and
    ``<ip> hostname.name.ns.svc.cluster.local`` where the address carries a hostname (pods with
    ``hostname`` + ``subdomain``), not-ready addresses included when the Service publishes them.
When the records change it replaces the file atomically and sends dnsmasq SIGHUP: dnsmasq then
drops its cache and re-reads the file, so removed records disappear too (a hosts *directory*
watched through inotify only ever adds). Standard library only, so any Python runs it.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import sys
import time
import urllib.parse
from pathlib import Path

POLL_S = 0.25
DOMAIN = "svc.cluster.local"


class Api:
    """GET against the API server with the client certificate of an (admin) kubeconfig, over one connection
    that is kept open between requests and made again after an error."""

    def __init__(self, kubeconfig: Path) -> None:
        config = json.loads(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.server = urllib.parse.urlsplit(cluster["server"])
        self.context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.context.load_cert_chain(user["client-certificate"], user["client-key"])
        self.connection: http.client.HTTPSConnection | None = None

    def items(self, path: str) -> list[dict]:
        if self.connection is None:
            self.connection = http.client.HTTPSConnection(self.server.hostname, self.server.port,
                                                          context=self.context, timeout=10)
        try:
            self.connection.request("GET", path)
            response = self.connection.getresponse()
            body = response.read()
            if response.status != 200:
                raise OSError(f"GET {path}: HTTP {response.status}")
            return json.loads(body)["items"]
        except (OSError, http.client.HTTPException, ValueError) as error:
            self.connection.close()
            self.connection = None
            raise OSError(f"GET {path}: {error}") from error


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
    written = None
    while True:
        try:
            lines = records(api.items("/api/v1/services"), api.items("/api/v1/endpoints"))
        except OSError as error:  # the API server restarting or stopping: keep the last records
            print(f"dns: {error}", file=sys.stderr, flush=True)
            time.sleep(1)
            continue
        if lines != written:
            write_atomically(hosts, "".join(f"{line}\n" for line in lines))
            os.kill(dnsmasq_pid, signal.SIGHUP)
            written = lines
        time.sleep(POLL_S)


def main(argv: list[str]) -> int:
    kubeconfig, hosts, dnsmasq_pid = argv
    serve(Api(Path(kubeconfig)), Path(hosts), int(dnsmasq_pid))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
