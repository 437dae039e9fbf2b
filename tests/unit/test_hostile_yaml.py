"""YAML as attackers write it (issue 54, class 5): aliases that amplify bytes rather than values, duplicate
mapping keys, and strings no process can receive (an env entry or argument over Linux's 128 KiB per string).

trainctl/yamlsafe.py bounds the document once aliases are expanded, in values and in characters, and refuses a key
twice in one mapping, both from the parser's events before any Python object is built; trainctl/core/validation.py
and trainctl/core/trainjob.py refuse a command word or env entry longer than MAX_ARG_STRLEN.
"""

from __future__ import annotations

import time

import pytest

from tests.unit.test_bad_input import GOOD_JOB, assert_one_line_error, variant
from trainctl import yamlsafe
from trainctl.core.validation import validate
from trainctl.errors import UserError
from trainctl.kube.names import MAX_ARG_STRLEN

# 1 MB of text that names one 10,000-character string 100 times over in 100 lists: 100 MB once expanded,
# in fewer than 11,000 values, far under the value budget
BYTE_BOMB = ("big: &big " + "x" * 10_000 + "\nlist: &list [" + ", ".join(["*big"] * 100) + "]\n"
             + "".join(f"k{i}: *list\n" for i in range(100)))


def refusal(text: str) -> str:
    with pytest.raises(UserError) as raised:
        yamlsafe.load_all(text, "-f job.yaml")
    message = raised.value.message
    assert "\n" not in message
    return message


# ---- aliases: the expanded document is bounded in characters too ------------------------------------------

def test_aliases_that_amplify_bytes_are_refused_before_anything_is_built():
    started = time.process_time()
    message = refusal(BYTE_BOMB)
    assert time.process_time() - started < 2
    assert message.startswith("-f job.yaml: more than 4 MiB of text once aliases are expanded at line ")
    assert "write the values out or split the file" in message


@pytest.mark.parametrize("text", [
    "a: &a " + "y" * 300_000 + "\nb: [" + ", ".join(["*a"] * 14) + "]\n",  # a scalar anchor: 4.2 MB
    "a: &a {k: " + "y" * 300_000 + "}\nb: [" + ", ".join(["*a"] * 14) + "]\n",  # a mapping anchor
    "a: &a [" + "y" * 300_000 + "]\nb: {" + ", ".join(f"m{i}: *a" for i in range(14)) + "}\n",  # a list one
    "a: &a " + "y" * 300_000 + "\nb: {<<: {k: *a}, " + ", ".join(f"m{i}: *a" for i in range(13)) + "}\n",
])
def test_any_anchor_kind_counts_its_characters_at_each_alias(text):
    assert "once aliases are expanded" in refusal(text)


def test_ordinary_anchors_still_load():
    text = ("base: &base {name: pytorch, image: img, env: [{name: A, value: '1'}]}\n"
            "master: {<<: *base, command: [python]}\nworkers: [*base, *base]\n"
            "long: &long " + "z" * 1_000_000 + "\nagain: *long\n")  # 2 MB expanded, under the 4 MiB bound
    (document,) = yamlsafe.load_all(text, "-f job.yaml")
    assert document["master"] == {"name": "pytorch", "image": "img", "env": [{"name": "A", "value": "1"}],
                                  "command": ["python"]}
    assert document["workers"] == [document["base"]] * 2 and document["again"] == document["long"]


# ---- duplicate keys: refused at any depth, naming the key and its line ---------------------------------------

@pytest.mark.parametrize("text, key, line, first", [
    ("a: 1\nb: 2\na: 3\n", "a", 3, 1),
    ("spec:\n  Master:\n    replicas: 1\n    image: x\n    replicas: 3\n", "replicas", 5, 3),
    ("list:\n- {name: x, name: y}\n", "name", 2, 2),
    ("a: {b: [{c: {d: 1,\n  'd': 2}}]}\n", "d", 2, 1),  # quoted or not, the same string
    ("? a\n: 1\n\"a\": 2\n", "a", 3, 1),
    ("one: 1\n---\ntwo: 1\ntwo: 2\n", "two", 4, 3),  # in a later document: lines count from the file's start
    ("x: &k key\n*k : 1\nkey: 2\n", "key", 3, 2),  # an alias as the key
])
def test_a_key_twice_in_one_mapping_is_refused_naming_it_and_its_lines(text, key, line, first):
    assert refusal(text) == (f"-f job.yaml: key {key!r} at line {line} appears twice in one mapping (first at line "
                             f"{first}): keep one")


@pytest.mark.parametrize("text", [
    "a: {k: 1}\nb: {k: 1}\n",  # the same key in two mappings
    "base: &b {k: 1, j: 2}\nover: {<<: *b, k: 3}\n",  # a merge key's values are overridden, as YAML means them
    "a: 1\n'1': 2\n",
    "m: {1: a, '1': b}\n",  # an integer and a string: two keys (validation refuses the integer in a resource)
])
def test_keys_that_only_look_alike_are_not_duplicates(text):
    assert yamlsafe.load_all(text, "-f job.yaml")


def test_a_duplicate_replicas_in_a_job_is_refused_by_apply(cli):
    text = variant("    Master:\n      replicas: 1\n", "    Master:\n      replicas: 1\n      replicas: 3\n")
    assert_one_line_error(cli("apply", "-f", "-", "--dry-run", input=text),
                          "-f -: key 'replicas' at line 8 appears twice in one mapping (first at line 7): keep one")


def test_a_byte_bomb_in_an_applied_job_is_refused_in_one_line(cli):
    text = variant("name: ok}", "name: ok, annotations: {a: &a " + "x" * 500_000 + "}}") + "  extra: [" + ", ".join(
        ["*a"] * 10) + "]\n"
    assert_one_line_error(cli("apply", "-f", "-", "--dry-run", input=text), "once aliases are expanded")


# ---- strings no process can receive: MAX_ARG_STRLEN ---------------------------------------------------------

def job_with(container_fields: dict) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "big"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "img", **container_fields}]}}}}}}


def test_an_env_entry_up_to_the_kernels_limit_is_accepted():
    fits = "v" * (MAX_ARG_STRLEN - len("DATA=") - 1)  # NAME=value and its terminating NUL
    validate(job_with({"command": ["python", "w" * (MAX_ARG_STRLEN - 1)], "env": [{"name": "DATA", "value": fits}]}))


@pytest.mark.parametrize("fields, culprit", [
    ({"env": [{"name": "A", "value": "1"}, {"name": "DATA", "value": "v" * (MAX_ARG_STRLEN - len("DATA="))}]},
     "containers[0].env[1].value: the variable 'DATA' is 131,072 bytes as DATA=value"),
    ({"command": ["python", "w" * MAX_ARG_STRLEN]}, "containers[0].command[1]: 'wwwwwwww"),
    ({"command": ["python"], "args": ["é" * 70_000]}, "containers[0].args[0]: 'éééé"),  # bytes, not characters
])
def test_a_process_string_over_the_kernels_limit_is_refused(fields, culprit):
    with pytest.raises(UserError) as raised:
        validate(job_with(fields))
    message = raised.value.message
    assert culprit in message and "131,072 bytes" in message and "MAX_ARG_STRLEN" in message
    assert len(message) < 400 and "\n" not in message


def test_a_trainjob_env_value_over_the_kernels_limit_is_refused():
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "big"},
                "spec": {"runtimeRef": {"name": "torch-distributed"},
                         "trainer": {"command": ["python", "t.py"], "env": [{"name": "DATA", "value": "v" * 200_000}]}}}
    with pytest.raises(UserError) as raised:
        validate(trainjob)
    assert "spec.trainer.env[0].value: the variable 'DATA' is 200,005 bytes" in raised.value.message


def test_a_values_file_with_a_huge_env_value_is_refused_by_submit(cli):
    values = cli.cwd / "values.yaml"
    values.write_text("env:\n  - DATA=" + "v" * 200_000 + "\n")
    assert_one_line_error(cli("submit", "pytorch", "--dry-run", "-f", str(values), "--", "python", "t.py"),
                          "--env 'DATA': 200,005 bytes as DATA=value: a process receives at most 131,071")
