"""Compatibility with the Kubeflow Training Operator's own CRDs and examples (read from ../shared)."""

import functools
import itertools
import json

import jsonschema
import pytest
import yaml

from trainctl.core.crds import all_crds, crd
from trainctl.core.validation import validate
from trainctl.frameworks import ALL, by_kind
from trainctl.submit.options import SubmitOptions
from trainctl.submit.render import render


def upstream_schema(upstream, framework):
    return _upstream_crd(upstream, framework.plural)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@functools.cache
def _upstream_crd(upstream, plural: str) -> dict:
    # libyaml's loader: the pure-Python one takes half a second of CPU for each of these 1 MB files
    return yaml.load((upstream / "crds" / f"kubeflow.org_{plural}.yaml").read_text(), Loader=yaml.CSafeLoader)


def upstream_validator(upstream, framework):
    """A validator for the upstream CRD's schema, made once: ``jsonschema.validate`` checks the whole schema
    against its meta-schema on every call, about 0.4 s of CPU for these."""
    return _validator(("upstream", upstream, framework.plural),
                      lambda: openapi_to_jsonschema(upstream_schema(upstream, framework)))


def ours_validator(framework):
    return _validator(("ours", framework.plural), lambda: openapi_to_jsonschema(
        crd(framework)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]))


_VALIDATORS: dict[tuple, jsonschema.protocols.Validator] = {}


def _validator(key: tuple, schema_of) -> jsonschema.protocols.Validator:
    if key not in _VALIDATORS:
        schema = schema_of()
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _VALIDATORS[key] = cls(schema)
    return _VALIDATORS[key]


def openapi_to_jsonschema(node):
    """CRD schemas are OpenAPI v3: int-or-string has no type, nullable etc. Enough for jsonschema."""
    if isinstance(node, dict):
        converted = {k: openapi_to_jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
        if node.get("x-kubernetes-int-or-string"):
            converted["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            converted.pop("pattern", None)
        if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node \
                and not node.get("x-kubernetes-preserve-unknown-fields"):
            converted["additionalProperties"] = False
        converted.pop("format", None)
        return converted
    if isinstance(node, list):
        return [openapi_to_jsonschema(item) for item in node]
    return node


OPTION_MATRIX = [
    dict(workers=1), dict(workers=4, gpus=1), dict(workers=3, cpu="500m", memory="2Gi", env=["A=1", "B=two"]),
    dict(workers=2, volume=["pvc:data:/data:ro", "host:/tmp:/scratch"], shm_size="1Gi"),
    dict(workers=2, node_selector=["pool=gpu"], toleration=["gpu:NoSchedule", "team=ml:NoExecute"],
         priority_class="high", queue="research", gang=True),
    dict(workers=2, restart_policy="ExitCode", backoff_limit=3, active_deadline=60, ttl_after_finished=30,
         clean_pod_policy="All", suspend=True, label=["team=nlp"], annotation=["note=x"]),
]
KIND_OPTIONS = {"TFJob": [dict(ps=1), dict(chief=1, evaluator=1)], "MPIJob": [dict(slots_per_worker=2)],
                "PyTorchJob": [dict(nproc_per_node="2")]}


@pytest.mark.parametrize("framework", ALL, ids=[fw.kind for fw in ALL])
def test_rendered_resources_satisfy_the_upstream_crd(upstream, framework):
    schema = upstream_validator(upstream, framework)
    extras = KIND_OPTIONS.get(framework.kind, [{}]) + [{}]
    for options, extra in itertools.product(OPTION_MATRIX, extras):
        resource = render(framework, SubmitOptions(command=["python", "train.py"], name="job", **options, **extra))
        schema.validate(resource)


def upstream_examples(upstream):
    for path in sorted((upstream / "examples").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                yield path, document


def test_our_crds_accept_every_upstream_example(upstream):
    for path, document in upstream_examples(upstream):
        framework = by_kind(document["kind"])
        ours_validator(framework).validate(document)
        validate(document, source=path.name)


def test_our_crds_match_upstream_names_and_subresources(upstream):
    for ours in all_crds():
        framework = by_kind(ours["spec"]["names"]["kind"])
        theirs = _upstream_crd(upstream, framework.plural)
        assert ours["metadata"]["name"] == theirs["metadata"]["name"]
        assert ours["spec"]["group"] == theirs["spec"]["group"]
        assert ours["spec"]["names"]["plural"] == theirs["spec"]["names"]["plural"]
        ours_v1, theirs_v1 = ours["spec"]["versions"][0], theirs["spec"]["versions"][0]
        assert ours_v1["subresources"] == theirs_v1["subresources"]
        assert {c["jsonPath"] for c in ours_v1["additionalPrinterColumns"]} == \
               {c["jsonPath"] for c in theirs_v1["additionalPrinterColumns"]}


def structural_problems(node, path="$"):
    """Kubernetes' structural-schema rule: every node says its type (int-or-string excepted)."""
    if not isinstance(node, dict):
        return []
    problems = [] if "type" in node or node.get("x-kubernetes-int-or-string") else [path]
    for key, child in (node.get("properties") or {}).items():
        problems += structural_problems(child, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            problems += structural_problems(node[key], f"{path}.{key}")
    return problems


def test_our_crds_are_structural():
    for document in all_crds():
        schema = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert structural_problems(schema) == []


def test_pod_schema_is_current():
    pytest.importorskip("kubernetes")
    import subprocess
    import sys

    from tests.conftest import REPO

    result = subprocess.run([sys.executable, str(REPO / "tools" / "gen_pod_schema.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def integer_formats(node, path="$", *, skip=("template", "metrics")):
    """{path: format} of every integer node that names one, outside the pod templates and the HPA
    metrics (both kept opaque or format-free in ours: the API server validates pods and HPAs)."""
    if not isinstance(node, dict):
        return {}
    found = {path: node["format"]} if node.get("type") == "integer" and "format" in node else {}
    for key, child in (node.get("properties") or {}).items():
        if key not in skip:
            found.update(integer_formats(child, f"{path}.{key}"))
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            found.update(integer_formats(node[key], f"{path}.{key}"))
    return found


@pytest.mark.parametrize("framework", ALL, ids=[fw.kind for fw in ALL])
def test_our_integer_formats_are_upstreams_and_bounded_by_them(upstream, framework):
    """The API server does not enforce int32's range, so our CRDs state it as minimum/maximum (int64 has
    none: the server's decoder enforces it, and a stated 2**63 - 1 would wrap to -2**63 there)."""
    ours = crd(framework)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    theirs = integer_formats(upstream_schema(upstream, framework))
    assert {path: fmt for path, fmt in integer_formats(ours).items() if path in theirs} == theirs

    def check(node):
        if isinstance(node, dict):
            if node.get("format") == "int32":
                assert (node["minimum"], node["maximum"]) == (-2**31, 2**31 - 1), node
            elif node.get("format") == "int64":
                assert "maximum" not in node, node
            for child in node.values():
                check(child)
    check(ours)
    assert ours["properties"]["spec"]["properties"]["runPolicy"]["properties"]["ttlSecondsAfterFinished"][
        "maximum"] == 2**31 - 1


def test_managed_by_allows_exactly_what_upstreams_webhooks_allow():
    for document in all_crds():
        run_policy = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
            "properties"]["runPolicy"]
        managed_by = run_policy["properties"]["managedBy"]
        assert managed_by["enum"] == ["kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"]
        assert managed_by["x-kubernetes-validations"] == [
            {"rule": "self == oldSelf", "message": "spec.runPolicy.managedBy is immutable"}]


@pytest.mark.parametrize("scope", ["replica", "job"])
def test_what_restarts_leave_in_a_job_satisfies_the_upstream_crd(upstream, scope):
    """Counts, attempts and their causes live in an annotation: a status with a field of trainctl's own would be
    pruned (or refused) under upstream's schema, which lists every field of replicaStatuses."""
    from tests.unit.test_restarts import Runtime, pytorch

    run = Runtime(pytorch("ExitCode", scope=scope, retry="3", backoffLimit=2))
    run.step()
    run.exit("pt-worker-0", 3)
    run.step()
    run.step()
    run.resource["spec"]["runPolicy"]["suspend"] = True
    run.step(60)
    run.resource["spec"]["runPolicy"]["suspend"] = False
    run.step(60)
    assert run.record().counted == 1 and run.record().preemptions == 1
    upstream_validator(upstream, by_kind(run.resource["kind"])).validate(run.resource)
