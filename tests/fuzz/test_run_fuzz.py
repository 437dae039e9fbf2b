"""Fuzzing ``Client.run``'s keywords: hostile Python values of every type for every option, unknown names.

Every SubmitOptions field is a keyword (read from the dataclass, so a new option is fuzzed without
touching this file). The promise, with ``dry_run=True``: a resource that passes validation and
serializes, or one InvalidArgument of one line, or, once every argument passed, the backend's own
refusal in one line (a dry run makes the create's checks: locally that the job can start here; the
cluster here is never there, so its resource is checked as the pipeline renders it); never another
exception, and nothing written.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import (
    COUNTS,
    TOKENS,
    env_names,
    env_values,
    fuzz,
    integer_values,
    kubernetes_env_name,
    kubernetes_label_key,
    kubernetes_label_value,
    label_keys,
    label_values,
    mostly,
    process_text,
    text_values,
)
from trainctl import Client, InvalidArgument, UserError
from trainctl.core.validation import validate
from trainctl.frameworks import CLI_NAMES
from trainctl.sdk.running import NOT_KEYWORDS, RUN_ONLY, planned
from trainctl.submit.options import SubmitOptions

pytestmark = pytest.mark.fuzz

KEYWORDS = [field.name for field in dataclasses.fields(SubmitOptions) if field.name not in NOT_KEYWORDS]


def train(lr: float = 0.1, x=None) -> float:
    return lr


scalars = st.one_of(text_values, integer_values.map(int), st.integers(), st.booleans(), st.none(),
                    st.floats(allow_nan=True, allow_infinity=True), st.binary(max_size=4))
plausible = st.one_of(st.sampled_from(TOKENS), st.integers(-1, 4), st.sampled_from(TOKENS).map(lambda t: [t]),
                      st.dictionaries(st.sampled_from(["A", "team", "k"]), st.sampled_from(TOKENS), max_size=2))
python_values = mostly(plausible, st.one_of(scalars, st.lists(scalars, max_size=3), st.tuples(scalars),
                                            st.dictionaries(text_values, scalars, max_size=3), st.builds(object)))
names = mostly(st.sampled_from(KEYWORDS), st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
keywords = st.dictionaries(names.filter(lambda name: name not in RUN_ONLY), python_values, max_size=4)
# Mostly what gets past the first checks, so the keywords themselves are what is fuzzed.
targets = mostly(st.sampled_from([train, ["python", "train.py"]]),
                 st.one_of(st.lists(scalars, max_size=3), st.sampled_from([print, lambda: 1, "python t.py", None])))
frameworks = mostly(st.sampled_from(CLI_NAMES), st.one_of(text_values, scalars))
good_args = st.one_of(st.none(), st.fixed_dictionaries({"lr": st.floats(0, 1)}))
bad_args = st.one_of(st.dictionaries(st.sampled_from(["lr", "x", "y"]), python_values, max_size=2), scalars)


@st.composite
def calls(draw) -> tuple:
    """(target, args): args a function takes for a function, None for a command, mostly."""
    target = draw(targets)
    good = st.none() if isinstance(target, list) else good_args
    return target, draw(mostly(good, bad_args))


def test_every_option_is_a_keyword():
    assert {"workers", "gpus", "env", "name", "namespace", "backoff_limit", "set", "template"} <= set(KEYWORDS)


@fuzz(500)
@given(call=calls(), framework=frameworks, keywords=keywords, on_cluster=st.booleans())
def test_run_keywords(call, framework, keywords, on_cluster):
    target, args = call
    home = Path(os.environ["TRAINCTL_HOME"])
    COUNTS["cases"] += 1
    # on a cluster a function goes into the code snapshot instead
    client = Client("kubernetes", kubeconfig=str(home.parent / "none")) if on_cluster else Client("local")
    try:
        resource = client.run(target, framework=framework, args=args, dry_run=True, **keywords)
    except InvalidArgument as refused:
        COUNTS["run() refused"] += 1
        assert "\n" not in str(refused) and str(refused).strip(), repr(refused)
    except UserError as checked:  # past every argument check: the backend's own, on the same backend
        COUNTS["run() refused by the backend"] += 1
        backend_refused(checked, on_cluster, home)
        if on_cluster:  # what the unreachable cluster would have been given
            resource = planned(client, target, framework, args, keywords)[0]
            assert validate(json.loads(json.dumps(resource))) == resource
    else:
        COUNTS["run() rendered"] += 1
        assert validate(json.loads(json.dumps(resource))) == resource
    assert not home.exists(), "a dry run wrote something"


def backend_refused(error: UserError, on_cluster: bool, home: Path) -> None:
    """One line; on a cluster the one that is not there (its kubeconfig), locally that the job cannot start here."""
    assert "\n" not in str(error) and str(error).strip(), repr(error)
    assert not isinstance(error, InvalidArgument)
    if on_cluster:
        assert str(home.parent / "none") in str(error), repr(error)


@fuzz(300)
@given(labels=st.dictionaries(label_keys, label_values, max_size=2), env=st.dictionaries(env_names, env_values, max_size=2),
       words=st.lists(env_values, max_size=2), as_list=st.booleans(), on_cluster=st.booleans())
def test_run_labels_env_and_command_follow_kubernetes_rules(labels, env, words, as_list, on_cluster):
    """label= and env= as a dict (or K=V items), the command's words: a resource if and only if Kubernetes would
    take the labels and env names and a process could receive every string; else one InvalidArgument line."""
    home = Path(os.environ["TRAINCTL_HOME"])
    COUNTS["cases"] += 1
    if as_list:  # as K=V items a key holding '=' means another key; the dict form refuses one
        labels = {key: value for key, value in labels.items() if "=" not in key}
        env = {name: value for name, value in env.items() if "=" not in name}
    client = Client("kubernetes", kubeconfig=str(home.parent / "none")) if on_cluster else Client("local")
    given_labels = [f"{key}={value}" for key, value in labels.items()] if as_list else labels
    given_env = [f"{name}={value}" for name, value in env.items()] if as_list else env
    expected = (all(kubernetes_label_key(key) and kubernetes_label_value(value) for key, value in labels.items())
                and all(kubernetes_env_name(name) and process_text(name) and process_text(value)
                        for name, value in env.items())
                and all(process_text(word) for word in words))
    Path("t.py").write_text("")  # a dry run checks, as the create does, that the script is there
    try:
        resource = client.run([sys.executable, "t.py", *words], label=given_labels, env=given_env, dry_run=True)
    except InvalidArgument as refused:
        assert not expected and "\n" not in str(refused), (labels, env, words, str(refused))
    except UserError as unreachable:  # every argument passed: the cluster that is not there
        assert expected and on_cluster, (labels, env, words, str(unreachable))
        backend_refused(unreachable, on_cluster, home)
        resource = planned(client, [sys.executable, "t.py", *words], "pytorch", None,
                           {"label": given_labels, "env": given_env})[0]
        assert resource["metadata"].get("labels", {}) == labels
    else:
        assert expected, (labels, env, words)
        assert resource["metadata"].get("labels", {}) == labels
    assert not home.exists(), "a dry run wrote something"


def upstream_train(parameters):
    return parameters


compat_keywords = st.fixed_dictionaries({
    "name": mostly(st.sampled_from(["ok-name", "job-1"]), st.one_of(text_values, scalars)),
    "train_func": mostly(st.just(upstream_train), st.sampled_from([None, print, lambda p: p, "train"])),
    "parameters": mostly(st.fixed_dictionaries({"lr": st.floats(0, 1)}), python_values),
}, optional={
    "job_kind": mostly(st.sampled_from(["PyTorchJob", "TFJob"]), st.one_of(text_values, scalars)),
    "num_workers": python_values, "num_procs_per_worker": python_values, "num_chief_replicas": python_values,
    "num_ps_replicas": python_values, "base_image": mostly(st.none(), python_values),
    "packages_to_install": mostly(st.none(), python_values),
    "resources_per_worker": mostly(st.dictionaries(st.sampled_from(["cpu", "memory", "gpu", "tpu"]), python_values,
                                                   max_size=3), python_values),
    "env_vars": mostly(st.dictionaries(st.sampled_from(["A", "B C"]), python_values, max_size=2), python_values),
    "labels": mostly(st.dictionaries(st.sampled_from(["team", "a/b"]), python_values, max_size=2), python_values),
    "annotations": mostly(st.dictionaries(text_values, python_values, max_size=2), python_values),
    "queue_name": mostly(st.sampled_from(["team-a", " "]), python_values),
    "pip_index_url": mostly(st.just("https://pypi.org/simple"), python_values),
    "volumes": mostly(st.none(), python_values),
    "job": mostly(st.none(), st.one_of(python_values, st.just({"apiVersion": "kubeflow.org/v1"}))),
})


@fuzz(300)
@given(keywords=compat_keywords)
def test_compat_create_job(keywords):
    """Every call ends in one line: refused, or (having passed every check) the cluster that is not there."""
    from trainctl.compat import TrainingClient
    from trainctl.errors import UserError

    home = Path(os.environ["TRAINCTL_HOME"])
    COUNTS["cases"] += 1
    client = TrainingClient(config_file=str(home.parent / "no-such-kubeconfig"), backend="kubernetes")
    try:
        client.create_job(**keywords)
    except InvalidArgument as refused:
        COUNTS["create_job refused"] += 1
        assert "\n" not in str(refused) and str(refused).strip(), repr(refused)
    except UserError as unreachable:
        COUNTS["create_job reached the cluster step"] += 1
        assert "no-such-kubeconfig" in str(unreachable), repr(unreachable)
    else:
        raise AssertionError("no cluster, yet a job was created")
    assert not home.exists(), "create_job wrote local state"


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=6)
finetune_keywords = st.fixed_dictionaries({}, optional={
    "workers": mostly(st.integers(1, 4), python_values),
    "text_column": mostly(st.sampled_from(["text", "sentence", "-x", "a b"]), st.one_of(text_values, scalars)),
    "output_dir": mostly(st.sampled_from(["out", "/ckpt/run 1", "--x"]), st.one_of(text_values, scalars)),
    "lora": mostly(st.dictionaries(st.sampled_from(["r", "lora_alpha", "target_modules"]), json_values, max_size=3),
                   st.one_of(python_values, st.dictionaries(text_values, json_values, max_size=2))),
    "training_args": mostly(st.dictionaries(st.sampled_from(["max_steps", "save_steps", "output_dir", "lr"]),
                                            json_values, max_size=3), python_values),
    "max_length": mostly(st.integers(1, 4096), python_values),
    "merge": mostly(st.booleans(), python_values),
    "deepspeed": mostly(st.sampled_from([None, "ds.json"]), st.one_of(text_values, scalars)),
    "recipe": mostly(st.none(), st.one_of(text_values, scalars)),
    # out/checkpoint-3 is another run's: "auto" refuses it, "never" and a checkpoint's path go on
    "resume": mostly(st.sampled_from(["auto", "never", "ckpt", "out/checkpoint-3", "/ckpt/checkpoint-1", "~/c"]),
                     st.one_of(text_values, scalars)),
    **{keyword: mostly(st.none(), python_values) for keyword in ("gpus", "env", "name", "volume")},
})
sources = mostly(st.sampled_from(["model", "data.jsonl", "org/name", "/abs/model"]), st.one_of(text_values, scalars))


@fuzz(400)
@given(model=sources, dataset=sources, keywords=finetune_keywords, on_cluster=st.booleans())
def test_finetune_keywords(model, dataset, keywords, on_cluster, tmp_path_factory):
    """Client.finetune: a resource whose recipe flags carry each value back unchanged, or one line refused."""
    home = Path(os.environ["TRAINCTL_HOME"])
    project = tmp_path_factory.mktemp("project")
    for name in ("model", "data.jsonl", "ds.json", "ckpt/trainer_state.json", "out/checkpoint-3/trainer_state.json"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).mkdir() if name == "model" else (project / name).write_text("{}")
    COUNTS["cases"] += 1
    client = Client("kubernetes", kubeconfig=str(home.parent / "none")) if on_cluster else Client("local")
    cwd = os.getcwd()
    os.chdir(project)
    try:
        resource = client.finetune(model, dataset, dry_run=True, **keywords)
    except InvalidArgument as refused:
        COUNTS["finetune() refused"] += 1
        assert "\n" not in str(refused) and str(refused).strip(), repr(refused)
        return
    except UserError as checked:  # past every argument check: the backend's own (a cluster: the one not there)
        COUNTS["finetune() refused by the backend"] += 1
        backend_refused(checked, on_cluster, home)
        return
    finally:
        os.chdir(cwd)
    COUNTS["finetune() rendered"] += 1
    assert validate(json.loads(json.dumps(resource))) == resource
    command = resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    flags = dict(word[2:].split("=", 1) for word in command if word.startswith("--") and "=" in word)
    assert flags["model"] == str(model) and flags["dataset"] == str(dataset)
    assert json.loads(flags["lora"]) == json.loads(json.dumps(keywords.get("lora") or {}))
    assert json.loads(flags["training-args"]) == json.loads(json.dumps(keywords.get("training_args") or {}))
    assert "output_dir" not in json.loads(flags["training-args"])
    assert flags["resume"] == os.fspath(keywords.get("resume", "auto"))
    assert flags["run-name"] == resource["metadata"]["name"]  # only this job's restarts continue its checkpoints
    assert command[0] == sys.executable  # locally (on a cluster the recipe travels: tests/k8s)
    assert not home.exists(), "a dry run wrote something"
