"""Kubernetes label selectors (``-l/--selector``), parsed once and used by every backend.

The syntax is Kubernetes' own, so a selector means the same locally and on a cluster::

    team=nlp            team==nlp        the label is there with this value
    team!=nlp                            absent, or another value
    tier in (a,b)       tier notin (a,b) one of / none of the values (notin: absent matches too)
    gpu                 !gpu             the label is there / is not there
    priority>5          priority<5       an integer label above / below the number

Requirements separated by commas must all hold. The local backend calls
:meth:`Selector.matches`; the Kubernetes backend sends :meth:`Selector.text` to the API
server, after parsing here so that a bad selector is the same one-line error on both.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from trainctl.errors import UserError, option

SYNTAX = "e.g. team=nlp,env!=dev,tier in (a,b),tier notin (c),gpu,!spot"
TOKEN = r"\s*(?:(?P<symbol>==|!=|=|\(|\)|,|!|<|>)|(?P<word>[^\s=!(),<>]+))"  # compiled when a selector is given
SET_OPERATORS = ("in", "notin")


class Requirement(NamedTuple):
    key: str
    operator: str  # exists, !, =, !=, in, notin, >, <
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present, value = self.key in labels, labels.get(self.key)
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return value not in self.values if present else True
        if not (present and re.fullmatch(r"-?\d+", value or "")):
            return False  # > and < match only integer labels, as on the API server
        return int(value) > int(self.values[0]) if self.operator == ">" else int(value) < int(self.values[0])

    def text(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "!":
            return f"!{self.key}"
        if self.operator in SET_OPERATORS:
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        return f"{self.key}{self.operator}{self.values[0]}"


class Selector(NamedTuple):
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: dict[str, str] | None) -> bool:
        return all(requirement.matches(labels or {}) for requirement in self.requirements)

    def text(self) -> str:
        """The canonical form, as the API server's ``labelSelector`` parameter."""
        return ",".join(requirement.text() for requirement in self.requirements)


def parse(text: str | None) -> Selector:
    """Parse a selector; None or blank selects everything. Raises a one-line UserError naming the option as the
    caller knows it (``-l/--selector``, ``selector``: errors.option)."""
    if not text or not text.strip():
        return Selector()
    return _Parser(text).selector()


class _Parser:
    """Recursive descent over tokens: symbols (= == != ( ) , ! < >) and words (keys, values, in, notin)."""

    def __init__(self, text: str) -> None:
        self.text, self.tokens = text, tokenize(text)
        self.position = 0

    def fail(self, problem: str) -> UserError:
        return UserError(f"{option('selector')} {self.text!r}: {problem} ({SYNTAX})")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> tuple[str, str] | None:
        token = self.peek()
        self.position += token is not None
        return token

    def expect_word(self, what: str) -> str:
        token = self.take()
        if token is None or token[0] != "word":
            raise self.fail(f"expected {what}, found {repr(token[1]) if token else 'the end'}")
        return token[1]

    def selector(self) -> Selector:
        requirements = [self.requirement()]
        while self.peek() is not None:
            if self.take() != ("symbol", ","):
                raise self.fail(f"expected ',' between requirements, found {self.tokens[self.position - 1][1]!r}")
            requirements.append(self.requirement())
        return Selector(tuple(requirements))

    def requirement(self) -> Requirement:
        if self.peek() == ("symbol", "!"):
            self.take()
            return Requirement(self.key(), "!")
        key = self.key()
        token = self.peek()
        if token is None or token == ("symbol", ","):
            return Requirement(key, "exists")
        self.take()
        if token[0] == "word" and token[1] in SET_OPERATORS:
            return Requirement(key, token[1], self.value_set(key, token[1]))
        if token[1] in ("=", "==", "!="):
            return Requirement(key, "!=" if token[1] == "!=" else "=", (self.value(),))
        if token[1] in ("<", ">"):
            number = self.expect_word(f"an integer after {token[1]!r}")
            if not re.fullmatch(r"-?\d+", number):
                raise self.fail(f"{key}{token[1]}{number}: {token[1]!r} needs an integer")
            return Requirement(key, token[1], (number,))
        raise self.fail(f"unexpected {token[1]!r} after {key!r}: use =, ==, !=, in, notin, <, >")

    def key(self) -> str:
        key = self.expect_word("a label key")
        from trainctl.kube.names import label_key_problem

        if problem := label_key_problem(key):
            raise UserError(f"{option('selector')} {key!r}: {problem}")
        return key

    def value(self) -> str:
        token = self.peek()
        if token is None or token[0] == "symbol":
            return ""  # key= selects an empty value, as in Kubernetes
        value = self.take()[1]
        from trainctl.kube.names import label_value_problem

        if problem := label_value_problem(value):
            raise self.fail(f"{value!r} is {problem}")
        return value

    def value_set(self, key: str, operator: str) -> tuple[str, ...]:
        if self.take() != ("symbol", "("):
            raise self.fail(f"{key} {operator}: the values go in parentheses, e.g. {key} {operator} (a,b)")
        values = [self.value()]
        while (token := self.take()) == ("symbol", ","):
            values.append(self.value())
        if token != ("symbol", ")"):
            raise self.fail(f"{key} {operator} (...: expected ',' or ')'")
        if values == [""]:
            raise self.fail(f"{key} {operator} (): give at least one value")
        return tuple(values)


def tokenize(text: str) -> list[tuple[str, str]]:
    """Every character is a symbol, part of a word or space, so the matches cover the whole text."""
    return [("symbol", m.group("symbol")) if m.group("symbol") else ("word", m.group("word"))
            for m in re.finditer(TOKEN, text)]
