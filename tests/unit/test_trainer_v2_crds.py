"""trainctl's own Trainer v2 CRDs and default runtimes against upstream's (read from ../shared/kubeflow-trainer-v2).

Every property path of upstream's TrainJob, TrainingRuntime and ClusterTrainingRuntime schemas is one of ours
(but the few listed in MISSING, each with its reason), names, scopes, subresources and columns are upstream's,
upstream's runtimes and the SDK's TrainJob validate against ours as a strict JSON schema (an unknown field fails,
where the API server would prune it silently), and trainctl's default runtimes are upstream's files, image for image.
"""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from tests.compat.test_upstream import openapi_to_jsonschema, structural_problems
from tests.conftest import REPO
from tests.k8s.test_trainer_v2_resources import SDK_BODY
from trainctl.core.trainer_crds import all_trainer_crds, crd_named, project_crds
from trainctl.core.trainer_runtimes import default_runtimes, node_image, parse_images
from trainctl.errors import UserError
from trainctl.frameworks import ALL, TRAINER_RUNTIMES

UPSTREAM = REPO.parent / "shared" / "kubeflow-trainer-v2"
# Upstream's paths ours lack, and why. Each is a field of the pod spec that the Kubernetes client trainctl pins
# (tools/gen_pod_schema.py) does not have; an API server that knows it keeps it in the pod it creates.
MISSING: dict[str, str] = {}
OURS = {document["spec"]["names"]["kind"]: document for document in all_trainer_crds()}


@pytest.fixture(scope="module")
def upstream() -> dict[str, dict]:
    if not UPSTREAM.is_dir():
        pytest.skip(f"the upstream reference data is not beside the clone ({UPSTREAM})")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # 27,000 lines: libyaml's parser is 50 times faster
    documents = [yaml.load(path.read_text(), Loader=loader) for path in sorted((UPSTREAM / "crds").glob("*.yaml"))]
    return {document["spec"]["names"]["kind"]: document for document in documents}


def upstream_runtimes() -> list[dict]:
    if not UPSTREAM.is_dir():
        pytest.skip(f"the upstream reference data is not beside the clone ({UPSTREAM})")
    return [yaml.safe_load(path.read_text()) for path in sorted((UPSTREAM / "runtimes").glob("*.yaml"))]


def schema(document: dict) -> dict:
    return document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def paths(node: dict, path: str = "") -> set[str]:
    """Every property path of a schema: ``.spec.trainer.env[].name``, ``.spec.trainer.resourcesPerNode.limits{}``."""
    found = {path}
    for key, child in (node.get("properties") or {}).items():
        found |= paths(child, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        found |= paths(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found |= paths(node["additionalProperties"], f"{path}{{}}")
    return found


@pytest.mark.parametrize("kind", ["TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"])
def test_every_upstream_property_path_is_one_of_ours(upstream, kind):
    lacking = paths(schema(upstream[kind])) - paths(schema(OURS[kind]))
    assert sorted(lacking - set(MISSING)) == []


def test_a_path_we_lack_is_found():
    theirs = {"properties": {"spec": {"properties": {"trainer": {"properties": {"env": {"items": {
        "properties": {"name": {}, "valueFrom": {}}}}}}}}}}
    ours = {"properties": {"spec": {"properties": {"trainer": {"properties": {"env": {"items": {
        "properties": {"name": {}}}}}}}}}}
    assert paths(theirs) - paths(ours) == {".spec.trainer.env[].valueFrom"}


@pytest.mark.parametrize("kind", ["TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"])
def test_names_scope_subresources_and_columns_are_upstreams(upstream, kind):
    ours, theirs = OURS[kind], upstream[kind]
    assert ours["metadata"]["name"] == theirs["metadata"]["name"]
    assert ours["spec"]["group"] == theirs["spec"]["group"] and ours["spec"]["scope"] == theirs["spec"]["scope"]
    assert {key: ours["spec"]["names"][key] for key in theirs["spec"]["names"]} == theirs["spec"]["names"]
    ours_version, theirs_version = ours["spec"]["versions"][0], theirs["spec"]["versions"][0]
    for key in ("name", "served", "storage", "subresources", "additionalPrinterColumns"):
        assert ours_version.get(key) == theirs_version.get(key), key
    assert structural_problems(schema(ours)) == []


def strict(kind: str) -> jsonschema.Draft7Validator:
    """Our schema of ``kind`` as a JSON schema that refuses unknown fields (checked once: it is large)."""
    return jsonschema.Draft7Validator(openapi_to_jsonschema(schema(OURS[kind])))


def test_upstreams_runtimes_and_the_sdks_trainjob_validate_strictly_against_ours():
    runtimes, trainjobs = strict("ClusterTrainingRuntime"), strict("TrainJob")
    for runtime in upstream_runtimes():
        runtimes.validate(runtime)
    trainjobs.validate(SDK_BODY)
    with pytest.raises(jsonschema.ValidationError):  # the check sees an unknown field
        trainjobs.validate({**SDK_BODY, "spec": {**SDK_BODY["spec"], "trainr": {}}})


def test_our_default_runtimes_are_upstreams():
    ours = {runtime["metadata"]["name"]: runtime for runtime in default_runtimes()}
    theirs = {runtime["metadata"]["name"]: runtime for runtime in upstream_runtimes()}
    assert ours == theirs


def test_an_image_given_replaces_every_container_image_of_that_runtime_only():
    image = "registry.local/team/deepspeed:1"
    changed = {runtime["metadata"]["name"]: runtime
               for runtime in default_runtimes(images=parse_images([f"deepspeed-distributed={image}"]))}
    jobs = changed["deepspeed-distributed"]["spec"]["template"]["spec"]["replicatedJobs"]
    assert [c["image"] for job in jobs for c in job["template"]["spec"]["template"]["spec"]["containers"]] == \
        [image, image]
    assert node_image(changed["deepspeed-distributed"]) == image
    assert {name: node_image(runtime) for name, runtime in changed.items() if name != "deepspeed-distributed"} == \
        {name: runtime.image for name, (_, runtime) in TRAINER_RUNTIMES.items() if name != "deepspeed-distributed"}
    assert [r["metadata"]["name"] for r in default_runtimes(["jax-distributed"])] == ["jax-distributed"]


@pytest.mark.parametrize("values, message", [
    (["torch-distributed"], "--image 'torch-distributed': write RUNTIME=IMAGE, e.g. --image torch-distributed="),
    (["=registry.local/x:1"], "no default runtime ''"),
    (["torch-distributed=registry.local/X:1"], "'registry.local/X:1' is not an image reference"),
    (["torch-distributed=a b"], "is not an image reference"),
    (["torch-distributed=x:"], "is not an image reference"),
    (["torch-distributed=a:1", "torch-distributed=b:1"], "--image torch-distributed= given twice ('a:1', 'b:1')"),
])
def test_bad_images_are_one_line_naming_the_flag_and_the_fix(values, message):
    with pytest.raises(UserError) as refused:
        parse_images(values)
    assert message in refused.value.message and "\n" not in refused.value.message


def test_the_same_image_twice_is_one_image():
    assert parse_images(["jax-distributed=a:1", "jax-distributed=a:1"]) == {"jax-distributed": "a:1"}


def test_every_plugin_policy_of_upstream_is_in_the_mlpolicy_schema(upstream):
    policies = schema(OURS["ClusterTrainingRuntime"])["properties"]["spec"]["properties"]["mlPolicy"]
    named = {framework.trainer_v2.policy for framework in ALL if framework.trainer_v2 and framework.trainer_v2.policy}
    named |= {"flux"}
    assert named | {"numNodes"} == set(policies["properties"])
    rule = policies["x-kubernetes-validations"][0]["rule"]
    assert all(f"has(self.{policy})" in rule for policy in named)


def test_kinds_by_any_spelling_and_apis():
    assert crd_named("trainjob") is not None and crd_named("ClusterTrainingRuntimes")["spec"]["scope"] == "Cluster"
    assert crd_named("trainingruntimes.trainer.kubeflow.org")["spec"]["names"]["kind"] == "TrainingRuntime"
    assert crd_named("tfjobs")["spec"]["names"]["kind"] == "TFJob"
    with pytest.raises(UserError, match="or a Trainer v2 kind: trainjob, trainingruntime, clustertrainingruntime"):
        crd_named("trainjobz")
    assert [len(project_crds(api)) for api in ("v1", "v2", "all")] == [len(ALL), 3, len(ALL) + 3]
