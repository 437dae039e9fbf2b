"""Fuzzing the YAML ways in: ``--set PATH=VALUE``, values files (``submit -f``) and ``apply -f``.

Documents are built as data, then written as YAML and damaged as text: hostile snippets
(anchors, aliases, tags JSON lacks, deep brackets, YAML line breaks, NUL), truncation and
other encodings. Apply documents are mutations of the shipped examples (examples/*/job.yaml).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import EXAMPLES, fuzz, json_documents, private_state, run, shape, text_values
from trainctl.core.validation import validate
from trainctl.submit.options import SubmitOptions

pytestmark = pytest.mark.fuzz

SNIPPETS = ["&a ", "*a", "&a [*a]", "<<: *a", "!!binary aGk=", "!!set {a}", "!!omap [a: 1]", "2024-01-01",
            "2001-12-14t21:59:43.10-05:00", ".inf", ".nan", "9" * 5000, "[" * 300, "{a: " * 80, "\t", "\x85",
            "\u2028", "\x00", "\ufeff", "? ", "- ", ": ", "---\n", "...\n", "%YAML 1.1\n", "'", '"', "#",
            "!!python/object:os.system", "!custom x", "\\", "\n  ", "\r\n"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text_values,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text_values, children, max_size=3),
    max_leaves=8,
)


@st.composite
def damaged(draw, text: str) -> bytes:
    """``text`` as bytes, sometimes with a snippet inserted, cut short, or in another encoding."""
    damage = draw(st.sampled_from(["none", "insert", "insert", "truncate", "encode"]))
    if damage == "insert":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(SNIPPETS)) + text[at:]
    elif damage == "truncate":
        text = text[:draw(st.integers(0, len(text)))]
    elif damage == "encode":
        encoding = draw(st.sampled_from(["latin-1", "utf-16", "utf-16-le", "utf-32", "utf-8-sig", "cp1252"]))
        return text.encode(encoding, errors="replace")
    return text.encode("utf-8", errors="surrogatepass")


# ---- --set ---------------------------------------------------------------------------------

BASE = ["submit", "pytorch", "--name", "set", "--dry-run", "-o", "json"]


def set_path(shape_path: str) -> str:
    """A shape path (``.spec.x[0].y``) in --set syntax, keys with dots or slashes quoted."""
    parts = []
    for key in shape_path.strip(".").replace("[", ".[").split("."):
        if key.startswith("["):
            parts.append(key)
        else:
            parts.append(f'["{key}"]' if "." in key or "/" in key else f".{key}")
    return "".join(parts).lstrip(".")


_paths: list[str] = []


def known_paths() -> list[str]:
    if not _paths:
        Path("train.py").write_text("")  # the dry run checks, as the submit does, that it is there
        job = json_documents(run(*BASE, "--", "python", "train.py"))[0]
        _paths.extend(sorted(set_path(path) for path in shape(job) if path))
    return _paths


@fuzz(200)
@given(data=st.data())
def test_set(data):
    path = data.draw(st.one_of(st.sampled_from(known_paths()), st.sampled_from(known_paths()).map(
        lambda p: p + ".extra"), text_values))
    value = data.draw(st.one_of(text_values, st.sampled_from(SNIPPETS), json_values.map(
        lambda v: yaml.safe_dump(v, default_flow_style=True).strip())))
    Path("train.py").write_text("")
    result = run(*BASE, "--set", f"{path}={value}", "--", "python", "train.py")
    if result.code == 0:
        validate(json_documents(result)[0])


# ---- values files --------------------------------------------------------------------------

OPTION_KEYS = [name for name in SubmitOptions.__dataclass_fields__ if name not in ("command", "template")]
values_mappings = st.dictionaries(
    st.one_of(st.sampled_from(OPTION_KEYS), st.sampled_from(OPTION_KEYS).map(lambda k: k.replace("_", "-")),
              text_values),
    json_values, max_size=4)


@fuzz(200)
@given(data=st.data())
def test_values_files(data):
    values = data.draw(values_mappings)
    text = yaml.safe_dump(values, allow_unicode=True, sort_keys=False)
    content = data.draw(damaged(text))
    with private_state() as (scratch, _):
        path = scratch / "values.yaml"
        path.write_bytes(content)
        (scratch / "train.py").write_text("")
        result = run("submit", "pytorch", "--dry-run", "-o", "json", "-f", str(path), "--", "python", "train.py")
    if result.code == 0:
        validate(json_documents(result)[0])


# ---- apply documents -------------------------------------------------------------------------

@st.composite
def mutated_example(draw) -> str:
    """An example job with one to three random edits anywhere in its tree, as YAML."""
    document = yaml.safe_load(draw(st.sampled_from(EXAMPLES)).read_text())
    for _ in range(draw(st.integers(1, 3))):
        mutate(draw, document)
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


def mutate(draw, node) -> None:
    """Walk down a random way, then delete, replace, add or duplicate at the node reached."""
    while True:
        children = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        containers = [(key, child) for key, child in children if isinstance(child, (dict, list)) and child]
        if not containers or draw(st.integers(0, 3)) == 0:
            break
        _, node = draw(st.sampled_from(containers))
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    operation = draw(st.sampled_from(["delete", "replace", "replace", "add", "duplicate"]))
    if operation == "add" or not keys:
        if isinstance(node, dict):
            node[draw(text_values)] = draw(json_values)
        else:
            node.append(draw(json_values))
        return
    key = draw(st.sampled_from(keys))
    if operation == "delete":
        del node[key]
    elif operation == "replace":
        node[key] = draw(json_values)
    elif isinstance(node, list):  # copies: a shared subtree would be edited twice by later mutations
        node.append(copy.deepcopy(node[key]))
    else:
        node[draw(text_values)] = copy.deepcopy(node[key])


@fuzz(250)
@given(data=st.data())
def test_apply_documents(data):
    text = data.draw(mutated_example())
    if data.draw(st.booleans()):
        text = text + "---\n" + data.draw(mutated_example())
    result = run("apply", "--dry-run", "-o", "json", "-f", "-", stdin=data.draw(damaged(text)))
    if result.code == 0:
        for document in json_documents(result):
            validate(document)
