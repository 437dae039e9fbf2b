"""Fuzzing ``trainctl submit``: every flag the command has, with hostile and near-valid values.

The flag list is read from the Typer command itself, so a flag added to submit is fuzzed
without touching this file; only flags that pick where output goes or what runs (not
what is built) are driven by the tests instead.
"""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import (
    COUNTS,
    all_strings,
    env_names,
    env_values,
    fuzz,
    files_under,
    integer_values,
    json_documents,
    kubernetes_env_name,
    kubernetes_label_key,
    kubernetes_label_value,
    kubernetes_port,
    kubernetes_port_name,
    label_keys,
    label_values,
    port_names,
    port_numbers,
    private_state,
    process_text,
    run,
    shape,
    text_values,
)
from trainctl.code import pods
from trainctl.core.validation import validate
from trainctl.frameworks import ALL, CLI_NAMES, by_kind

pytestmark = pytest.mark.fuzz

DRIVEN = {"dry_run", "output", "values", "replace", "wait", "follow", "local", "context", "kubeconfig"}


def submit_options() -> list:
    from typer.main import get_command

    from trainctl.cli import submit as submit_module
    from trainctl.cli.app import app

    command = get_command(app).commands["submit"]
    hints = typing.get_type_hints(submit_module.submit)
    options = []
    for param in command.params:
        if param.param_type_name != "option" or param.name in DRIVEN:
            continue
        is_integer = int in (typing.get_args(hints.get(param.name)) or (hints.get(param.name),))
        options.append((param, integer_values if is_integer else text_values))
    return options


OPTIONS = submit_options()
kinds = st.one_of(st.sampled_from(CLI_NAMES), st.sampled_from(CLI_NAMES), text_values)


@st.composite
def option_arguments(draw) -> list[str]:
    """A few of submit's options, each with one to three values."""
    arguments = []
    for param, values in draw(st.lists(st.sampled_from(OPTIONS), max_size=5, unique_by=lambda o: o[0].name)):
        for _ in range(draw(st.integers(1, 3 if param.multiple else 1))):
            flag = draw(st.sampled_from(param.opts))
            arguments += [flag] if param.is_flag else [flag, draw(values)]
    return arguments


commands = st.lists(text_values, max_size=3).map(lambda words: ["python", *words])


def test_every_submit_option_is_fuzzed():
    names = {param.name for param, _ in OPTIONS}
    assert {"env", "workers", "set_", "namespace", "name", "active_deadline", "stall_timeout", "template"} <= names


@fuzz(400)
@given(kind=kinds, options=option_arguments(), command=commands)
def test_submit_options(kind, options, command):
    result = run("submit", kind, "--dry-run", "-o", "json", *options, "--", *command)
    if result.code:
        return
    *config_maps, job = json_documents(result)  # --workdir: the snapshot's ConfigMaps come first
    assert {document["kind"] for document in config_maps} <= {"ConfigMap"}
    validate(job)
    env_values = [value.partition("=")[2] for flag, value in zip(options, options[1:]) if flag in ("-e", "--env")]
    strings = set(all_strings(job))
    assert all(value in strings for value in env_values), env_values
    replica_specs = job["spec"][by_kind(job["kind"]).replica_spec_field].values()
    containers = [c for replica in replica_specs for c in replica["template"]["spec"]["containers"]]
    assert any(c.get("command", [])[-len(command):] == command for c in containers)


@fuzz(100)
@given(kind=kinds, pip=st.lists(st.one_of(st.sampled_from(["numpy", "einops==0.8", "x[y]>=1"]), text_values),
                                min_size=1, max_size=3),
       workdir=st.booleans(), command=commands)
def test_the_abridged_dry_run_is_the_job_but_for_its_programs(kind, pip, workdir, command):
    """Without -o, a job with packages (and code) dry-runs abridged: one YAML document, the same job as -o json
    prints but for each program's source, which stands as one line that names it."""
    Path("train.py").write_text("print(1)\n")
    arguments = ["--name", "fuzz", *(word for spec in pip for word in ("--pip", spec)),
                 *(["--workdir", "."] if workdir else []), "--", *command]
    shown = run("submit", kind, "--dry-run", *arguments)
    if shown.code:
        return
    *_, job = json_documents(run("submit", kind, "--dry-run", "-o", "json", *arguments))
    assert shown.stdout.startswith("# dry run, nothing created: ")
    (abridged,) = yaml.safe_load_all(shown.stdout)
    for short, whole in zip(pods.script_containers(abridged), pods.script_containers(job)):
        assert pods.ABRIDGED in short["command"][4] and pods.ABRIDGED not in whole["command"][4]
        short["command"][4] = whole["command"][4]
    assert abridged == job
    COUNTS["abridged dry runs"] += 1


FREE_TEXT = {  # where a user's free text lands, as (arguments before, template for the value)
    "env value": ("-e", "V={}"),
    "annotation value": ("--annotation", "note={}"),
    "image": ("--image", "{}"),
    "queue": ("--queue", "{}"),
    "priority class": ("--priority-class", "{}"),
    "command word": ("--", "{}"),
}
_baselines: dict[tuple[str, str], set[str]] = {}


def free_text_run(kind: str, slot: str, value: str):
    flag, template = FREE_TEXT[slot]
    arguments = [flag, template.format(value)]
    if flag != "--":
        arguments += ["--", "python"]
    return run("submit", kind, "--name", "shape", "--dry-run", "--no-preflight", "-o", "json", *arguments)


@fuzz(250)
@given(kind=st.sampled_from(CLI_NAMES), slot=st.sampled_from(sorted(FREE_TEXT)), value=text_values)
def test_free_text_lands_as_one_string_and_never_changes_structure(kind, slot, value):
    result = free_text_run(kind, slot, value)
    if result.code:
        return
    if (kind, slot) not in _baselines:
        _baselines[kind, slot] = shape(json_documents(free_text_run(kind, slot, "v"))[0])
    (job,) = json_documents(result)
    assert shape(job) == _baselines[kind, slot], (slot, value)
    assert value in set(all_strings(job)), (slot, value)


@fuzz(100)
@given(kind=st.sampled_from(CLI_NAMES), options=option_arguments(), command=commands)
def test_a_rejected_submit_leaves_nothing_behind(kind, options, command):
    """Real submits (local backend, suspended so nothing runs): exit 2 changes no file, in
    TRAINCTL_HOME or beside it (where a namespace like ../../x would have written)."""
    with private_state() as (scratch, _):
        before = files_under(scratch)
        result = run("submit", kind, "--name", "fuzz", "--suspend", *options, "--", *command)
        if result.code == 2:
            assert files_under(scratch) == before, result.stderr
        else:
            from trainctl.sdk.client import Client

            client = Client(backend="local")
            for job in client.list(all_namespaces=True):
                client.delete(job["metadata"]["name"], job["metadata"]["namespace"])


queue_names = st.one_of(text_values, st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,70}[a-z0-9])?", fullmatch=True))


@fuzz(200)
@given(kind=st.sampled_from(CLI_NAMES), queue=queue_names)
def test_local_queue_is_refused_or_labels_the_job_suspended(kind, queue):
    """Kueue reads the label and admits by unsuspending: a queued job is both, or not made at all. Locally it is
    never made (no Kueue admits it there), the dry run as the submit: what a cluster would get is rendered here."""
    from trainctl.core.job import KUEUE_QUEUE_LABEL
    from trainctl.frameworks import by_name
    from trainctl.submit.options import SubmitOptions
    from trainctl.submit.pipeline import prepare

    result = run("submit", kind, "--dry-run", "-o", "json", "--no-workdir", "--local-queue", queue, "--", "python")
    assert result.code == 2, result.stdout
    if "--local-queue" in result.stderr:  # not a LocalQueue's name
        return
    assert f"waits for Kueue (label {KUEUE_QUEUE_LABEL}={queue}, runPolicy.suspend: true)" in result.stderr
    job = prepare(by_name(kind), SubmitOptions(command=["python"], no_workdir=True, local_queue=queue),
                  "kubernetes").resource
    assert job["metadata"]["labels"][KUEUE_QUEUE_LABEL] == queue and len(queue) <= 63
    assert job["spec"]["runPolicy"]["suspend"] is True


@fuzz(200)
@given(replicas=st.dictionaries(st.sampled_from(["Master", "Worker"]), st.integers(0, 50), min_size=1),
       min_available=st.one_of(st.none(), st.integers(0, 120)),
       cpu=st.sampled_from(["1", "250m", "1.5", "2k"]))
def test_yunikorn_task_groups_count_min_available_members_and_each_pods_requests(replicas, min_available, cpu):
    import json as json_module
    from decimal import Decimal

    from trainctl.controller.gang import GangScheduler, YUNIKORN_TASK_GROUPS
    from trainctl.core.job import Job
    from trainctl.kube.quantities import parse_quantity

    specs = {rtype: {"replicas": count, "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}}
        for rtype, count in replicas.items()}
    policy = {} if min_available is None else {"schedulingPolicy": {"minAvailable": min_available}}
    job = Job({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "n"},
               "spec": {"runPolicy": policy, "pytorchReplicaSpecs": specs}})
    pod = {"metadata": {}, "spec": {}}
    GangScheduler("yunikorn").decorate(job, next(iter(replicas)), pod)
    groups = json_module.loads(pod["metadata"]["annotations"][YUNIKORN_TASK_GROUPS])
    total = sum(replicas.values())
    assert sum(group["minMember"] for group in groups) == (total if min_available is None else min(min_available,
                                                                                                   total))
    assert all(parse_quantity(group["minResource"]["cpu"]) == parse_quantity(cpu) > Decimal(0) for group in groups)


# ---- Kubernetes' rules on every way in: flags, apply documents (the Python API: test_run_fuzz.py) ----------

@fuzz(300)
@given(flag=st.sampled_from(["--label", "--node-selector"]), key=label_keys.filter(lambda key: "=" not in key),
       value=label_values)
def test_label_flags_accept_exactly_what_kubernetes_accepts(flag, key, value):
    result = run("submit", "pytorch", "--dry-run", "-o", "json", flag, f"{key}={value}", "--", "python")
    expected = kubernetes_label_key(key) and kubernetes_label_value(value)
    assert (result.code == 0) == expected, (flag, key, value, result.stderr)


@fuzz(300)
@given(name=env_names.filter(lambda name: "=" not in name), value=env_values, word=env_values)
def test_env_flags_and_command_words_accept_exactly_what_a_process_can_receive(name, value, word):
    """In this process an argument can hold a NUL, as a values file or --set can put one in an option."""
    result = run("submit", "pytorch", "--dry-run", "--no-preflight", "-o", "json", "-e", f"{name}={value}", "--",
                 "python", word)  # the word as text, not as a script to find
    expected = kubernetes_env_name(name) and process_text(name) and process_text(value) and process_text(word)
    assert (result.code == 0) == expected, (name, value, word, result.stderr)


GOOD_DOCUMENT = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "rules"},
                 "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                     {"name": "pytorch", "image": "img", "command": ["python"]}]}}}}}}


@fuzz(300)
@given(labels=st.dictionaries(label_keys, label_values, max_size=2), pod_labels=st.dictionaries(label_keys, label_values,
                                                                                               max_size=1),
       port=port_numbers, host_port=st.one_of(st.none(), port_numbers), port_name=st.one_of(st.none(), port_names),
       env=st.lists(st.tuples(env_names, env_values), max_size=2))
def test_apply_accepts_exactly_what_kubernetes_accepts(labels, pod_labels, port, host_port, port_name, env):
    """Labels of the job and of its pods, a container's port, its env: the document applies (dry run) if and only
    if the API server would take it and its process could receive every string."""
    import copy

    import yaml

    document = copy.deepcopy(GOOD_DOCUMENT)
    document["metadata"]["labels"] = labels
    template = document["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    template["metadata"] = {"labels": pod_labels}
    container = template["spec"]["containers"][0]
    container["ports"] = [{"containerPort": port, **({"hostPort": host_port} if host_port is not None else {}),
                           **({"name": port_name} if port_name is not None else {})}]
    container["env"] = [{"name": name, "value": value} for name, value in env]
    result = run("apply", "-f", "-", "--dry-run", "-o", "json",
                 stdin=yaml.safe_dump(document, allow_unicode=True).encode("utf-8", "surrogatepass"))
    expected = (all(kubernetes_label_key(k) and kubernetes_label_value(v) for k, v in {**labels, **pod_labels}.items())
                and kubernetes_port(port) and (host_port is None or kubernetes_port(host_port, zero_means_none=True))
                and (not port_name or kubernetes_port_name(port_name))  # an empty name is no name
                and all(kubernetes_env_name(name) and process_text(name) and process_text(value) for name, value in env))
    assert (result.code == 0) == expected, (labels, pod_labels, port, host_port, port_name, env, result.stderr)


# ---- --api v2: a TrainJob on the kind's default runtime, or one line --------------------------------------

def not_v2_flags() -> set[str]:
    from trainctl.submit.options import OPTIONS as TABLE

    return {flag for option in TABLE if option.not_v2 for flag in option.cli_flags}


V2_KINDS = [framework.name for framework in ALL if framework.trainer_v2 and framework.trainer_v2.runtime]


@fuzz(300)
@given(kind=st.one_of(st.sampled_from(V2_KINDS), kinds), options=option_arguments(), command=commands)
def test_submit_api_v2_renders_a_trainjob_valid_under_the_generated_crd_or_refuses_in_one_line(kind, options,
                                                                                                command):
    """Every combination of v1 submit flags with ``--api v2``: a TrainJob that validates strictly (an unknown field
    fails) against trainctl's generated TrainJob CRD, on the kind's default runtime, running the command (under the
    runtime's launcher), with every env value; or exit 2 with one line (the harness checks it), always for a flag
    a TrainJob cannot say."""
    from tests.unit.test_trainer_v2_crds import strict
    from trainctl.frameworks import by_name

    if "--api" in options:  # the flag under test is given once, last
        return
    result = run("submit", kind, "--dry-run", "-o", "json", "--no-preflight", *options, "--api", "v2", "--", *command)
    if any(word in not_v2_flags() for word in options):
        assert result.code == 2, (options, result.stdout)
    if result.code:
        return
    (job,) = json_documents(result)  # no code travels with a TrainJob
    strict("TrainJob").validate(job)
    validate(job)
    assert job["spec"]["runtimeRef"]["name"] == by_name(kind).trainer_v2.runtime
    words = job["spec"]["trainer"]["command"]  # the interpreter, maybe a launcher, the command's words
    assert words[0] == command[0] and words[len(words) - len(command) + 1:] == command[1:], (words, command)
    env_values = [value.partition("=")[2] for flag, value in zip(options, options[1:]) if flag in ("-e", "--env")]
    assert set(env_values) <= set(all_strings(job)), env_values
    COUNTS["TrainJobs rendered"] += 1
