"""The real node's DNS records (tests/cluster/dns.py): what a pod can resolve for each Service."""

from __future__ import annotations

from tests.cluster.dns import records


def service(name: str, cluster_ip: str, publish_not_ready: bool = False, namespace: str = "ns") -> dict:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": cluster_ip, "publishNotReadyAddresses": publish_not_ready}}


def endpoints(name: str, ready: list[tuple[str, str | None]], not_ready=(), namespace: str = "ns") -> dict:
    def address(ip, hostname):
        return {"ip": ip, **({"hostname": hostname} if hostname else {})}

    return {"metadata": {"name": name, "namespace": namespace},
            "subsets": [{"addresses": [address(*a) for a in ready], "notReadyAddresses": [address(*a) for a in not_ready]}]}


def test_a_service_with_a_cluster_ip_resolves_to_it_not_to_its_pods():
    found = records([service("api", "10.96.0.10")], [endpoints("api", [("10.88.0.5", None)])])
    assert found == ["10.96.0.10 api.ns.svc.cluster.local"]


def test_a_headless_service_resolves_to_its_ready_pods_and_their_hostnames():
    found = records([service("job-master-0", "None")],
                    [endpoints("job-master-0", [("10.88.0.7", "job-master-0")], not_ready=[("10.88.0.8", None)])])
    assert found == ["10.88.0.7 job-master-0.job-master-0.ns.svc.cluster.local",
                     "10.88.0.7 job-master-0.ns.svc.cluster.local"]


def test_not_ready_pods_count_only_where_the_service_publishes_them():
    found = records([service("w", "None", publish_not_ready=True)],
                    [endpoints("w", [], not_ready=[("10.88.0.9", None)])])
    assert found == ["10.88.0.9 w.ns.svc.cluster.local"]


def test_same_names_in_two_namespaces_stay_apart_and_a_service_without_endpoints_has_no_record():
    found = records([service("w", "None", namespace="a"), service("w", "None", namespace="b"), service("x", "None")],
                    [endpoints("w", [("10.88.0.2", None)], namespace="a"),
                     endpoints("w", [("10.88.0.3", None)], namespace="b")])
    assert found == ["10.88.0.2 w.a.svc.cluster.local", "10.88.0.3 w.b.svc.cluster.local"]

