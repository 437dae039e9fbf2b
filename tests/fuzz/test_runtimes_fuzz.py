"""Fuzzing ``trainctl runtimes print --image RUNTIME=IMAGE`` (issue 41): hostile and near-valid values.

Every run keeps the CLI's promises (exit 0, or exit 2 with one line; harness.py). A run that succeeds printed
every default runtime with, for each, the image its ``--image`` gave (else upstream's), and every image it took
is an image reference by the oracle below; a run that fails names ``--image`` or the runtime. The oracle is
written from distribution's reference grammar (github.com/distribution/reference, regexp.go), apart from
trainctl's code.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import fuzz, json_documents, mostly, run, text_values
from trainctl.frameworks import TRAINER_RUNTIMES

pytestmark = pytest.mark.fuzz

# distribution/reference: [domain[:port]/]path-component[/path-component...][:tag][@digest], a name of <= 255
COMPONENT = r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*"
DOMAIN = r"([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*"
NAME = rf"(({DOMAIN}|\[[a-fA-F0-9:]+\])(:[0-9]+)?/)?{COMPONENT}(/{COMPONENT})*"
REFERENCE = rf"(?P<name>{NAME})(:[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*" \
            r":[0-9a-fA-F]{32,})?"


def image_reference(text: str) -> bool:
    found = re.fullmatch(REFERENCE, text)
    return found is not None and len(found["name"]) <= 255


runtime_names = mostly(st.sampled_from(sorted(TRAINER_RUNTIMES)),
                       st.one_of(st.sampled_from(["torch", "torch-distributed ", "TORCH-DISTRIBUTED", ""]), text_values))
images = mostly(
    st.from_regex(r"([a-z0-9]{1,6}(\.[a-z]{2,3})?(:[0-9]{1,5})?/)?[a-z0-9]{1,6}([._-][a-z0-9]{1,4}){0,2}"
                  r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,8})?", fullmatch=True),
    st.one_of(st.sampled_from(["", "UPPER/x", "x:", "x@sha256:abc", "a b", "-x", "x/", "a" * 256, "x:y:z"]),
              text_values))
values = mostly(st.tuples(runtime_names, images).map("=".join), text_values)


@fuzz(300)
@given(given_values=st.lists(values, max_size=3))
def test_image_values_land_on_their_runtime_or_are_one_line_naming_the_flag(given_values):
    result = run("runtimes", "print", "-o", "json", *[word for value in given_values for word in ("--image", value)])
    if result.code == 2:
        assert "--image" in result.stderr, result.stderr
        return
    wanted = dict(value.partition("=")[::2] for value in given_values)
    assert set(wanted) <= set(TRAINER_RUNTIMES) and all(image_reference(image) for image in wanted.values()), wanted
    printed = json_documents(result)
    assert [document["metadata"]["name"] for document in printed] == list(TRAINER_RUNTIMES)
    for document in printed:
        name = document["metadata"]["name"]
        containers = [container for job in document["spec"]["template"]["spec"]["replicatedJobs"]
                      for container in job["template"]["spec"]["template"]["spec"]["containers"]]
        assert {container["image"] for container in containers} == {wanted.get(name, TRAINER_RUNTIMES[name][1].image)}
