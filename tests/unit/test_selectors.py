"""Label selectors: Kubernetes' syntax and meaning, and a one-line error naming the fix for anything else."""

import pytest

from trainctl.errors import CLI, PYTHON, UserError, speaking
from trainctl.kube.selectors import parse

LABELS = {
    "a": {"team": "nlp", "env": "prod", "gpu": "", "priority": "7"},
    "b": {"team": "vision", "env": "dev"},
    "c": {"team": "nlp", "env": "dev", "spot": "true", "priority": "2"},
    "d": {},
}

SELECTIONS = [
    ("", "abcd"),
    ("team=nlp", "ac"),
    ("team==nlp", "ac"),
    ("team!=nlp", "bd"),  # != matches jobs without the label, as in Kubernetes
    ("team in (nlp, vision)", "abc"),
    ("team notin (vision)", "acd"),
    ("gpu", "a"),
    ("!spot", "abd"),
    ("team=nlp,env=dev", "c"),
    ("team in (nlp),!spot,env!=dev", "a"),
    ("priority>5", "a"),
    ("priority<5", "c"),
    ("gpu=", "a"),  # key= selects the empty value
    ("  team = nlp ,  env in ( prod ) ", "a"),
]


@pytest.mark.parametrize("text, selected", SELECTIONS)
def test_selects_as_kubernetes_does(text, selected):
    selector = parse(text)
    assert "".join(name for name, labels in LABELS.items() if selector.matches(labels)) == selected


@pytest.mark.parametrize("text, canonical", [
    ("team==nlp", "team=nlp"), ("team in ( a , b )", "team in (a,b)"), ("! spot", "!spot"), ("p > 5", "p>5"),
    ("x.io/team notin (a),gpu", "x.io/team notin (a),gpu"),
])
def test_canonical_text_is_what_the_api_server_gets(text, canonical):
    assert parse(text).text() == canonical
    assert parse(canonical).text() == canonical


BAD = [
    ("team nlp", "unexpected 'nlp' after 'team'"),
    ("team in nlp", "the values go in parentheses"),
    ("team in ()", "give at least one value"),
    ("team in (a,b", "expected ',' or ')'"),
    ("=nlp", "expected a label key, found '='"),
    ("team=nlp,", "expected a label key, found the end"),
    ("team=a=b", "expected ',' between requirements"),
    ("team=a b", "expected ',' between requirements, found 'b'"),
    ("priority>high", "'>' needs an integer"),
    ("te am=x", "unexpected 'am'"),
    ("x/y/z=1", "'x/y/z': not a valid key"),
    ("team=" + "v" * 64, "is not a label value"),
    ("team=a|b", "is not a label value"),
]


@pytest.mark.parametrize("text, expected", BAD)
def test_bad_selectors_are_one_line_naming_the_option_and_the_problem(text, expected):
    for front_end, named in ((CLI, "-l/--selector "), (PYTHON, "selector ")):  # the flag, or the keyword
        with speaking(front_end), pytest.raises(UserError) as error:
            parse(text)
        message = error.value.message
        assert message.startswith(named) and expected in message, message
        assert "\n" not in message
