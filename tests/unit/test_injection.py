"""Rendering is injection-safe: user values end up as literal strings, or are rejected with a clear error."""

import pytest

from tests.fuzz.harness import all_strings
from trainctl.errors import UserError
from trainctl.frameworks import ALL, by_name
from trainctl.submit.options import SubmitOptions
from trainctl.submit.render import render

PAYLOADS = [
    "A=1\n  hostNetwork: true",
    'x"; rm -rf /',
    "{{ 7*7 }}",
    "{% for x in range(3) %}boom{% endfor %}",
    "]: {privileged: true}",
    "$(whoami) `id` ${HOME}",
    "- item\n- other",
    "&anchor *alias !!python/object:os.system",
]


def render_with(kind="pytorch", **options):
    return render(by_name(kind), SubmitOptions(command=["python", "train.py"], name="job", **options))


def assert_harmless(resource):
    """Nothing a payload could smuggle in: no new pod fields, no evaluated template."""
    for framework in ALL:
        for spec in (resource["spec"].get(framework.replica_spec_field) or {}).values():
            pod = spec["template"]["spec"]
            assert "hostNetwork" not in pod and "privileged" not in str(pod.get("securityContext"))
    assert "49" not in resource["metadata"]["name"]
    assert not any("boomboom" in s for s in all_strings(resource))


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("kind", [fw.name for fw in ALL])
def test_env_value_and_command_are_literal(kind, payload):
    job = render(by_name(kind), SubmitOptions(command=["python", payload], name="job", env=[f"SAFE={payload}"]))
    assert_harmless(job)
    framework = by_name(kind)
    for rtype, spec in job["spec"][framework.replica_spec_field].items():
        container = spec["template"]["spec"]["containers"][0]
        assert container["env"] == [{"name": "SAFE", "value": payload}]
        if container.get("command"):
            assert container["command"][-1] == payload


@pytest.mark.parametrize("payload", PAYLOADS)
def test_annotation_values_are_literal(payload):
    job = render_with(annotation=[f"note={payload}"])
    assert job["metadata"]["annotations"] == {"note": payload}
    assert_harmless(job)


@pytest.mark.parametrize("option", ["name", "label", "annotation_key", "env_name", "node_selector", "toleration",
                                    "volume", "priority_class", "queue", "image", "namespace", "cpu", "memory",
                                    "shm_size", "nproc_per_node", "restart_policy", "clean_pod_policy", "set_path"])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_structured_options_reject_or_keep_literal(option, payload):
    """Options whose values have a grammar reject payloads; free-text ones keep them as one literal string."""
    arguments = {
        "name": {"name": payload}, "label": {"label": [f"team={payload}"]},
        "annotation_key": {"annotation": [f"{payload}=x"]}, "env_name": {"env": [f"{payload}=x"]},
        "node_selector": {"node_selector": [f"k={payload}"]}, "toleration": {"toleration": [f"{payload}:NoSchedule"]},
        "volume": {"volume": [f"pvc:{payload}:/data"]}, "priority_class": {"priority_class": payload},
        "queue": {"queue": payload}, "image": {"image": payload}, "namespace": {"namespace": payload},
        "cpu": {"cpu": payload}, "memory": {"memory": payload}, "shm_size": {"shm_size": payload},
        "nproc_per_node": {"nproc_per_node": payload}, "restart_policy": {"restart_policy": payload},
        "clean_pod_policy": {"clean_pod_policy": payload}, "set_path": {"set": [f"{payload}=1"]},
    }[option]
    try:
        job = render(by_name("pytorch"), SubmitOptions(command=["python"], **{"name": "job", **arguments}))
    except UserError as error:
        assert "\n" not in error.message
        return
    assert_harmless(job)
    # KEY=VALUE options split at the first "=": the rest is the value and must appear verbatim
    literal = payload.split("=", 1)[1] if option in ("annotation_key", "env_name") and "=" in payload else payload
    assert any(literal in text for text in all_strings(job)), "a value that is accepted must appear verbatim"


def test_set_value_is_data_under_its_path_only():
    with pytest.raises(UserError, match="metadata.annotations.note: must be a string"):
        render_with(set=["metadata.annotations.note=hostNetwork: true"])
    job = render_with(set=["metadata.annotations.note='hostNetwork: true'"])
    assert job["metadata"]["annotations"] == {"note": "hostNetwork: true"}
    assert_harmless(job)
