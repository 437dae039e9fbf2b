"""The house rule on function size (README's style, docs/architecture.md): no function in trainctl/ has a cyclomatic
complexity above 20, as radon counts it (every branch, loop, boolean operator and comprehension clause). It crept
back once unseen (controller/pods.py's cached_pod at 22, issue 40); this keeps it seen."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_visit

from tests.conftest import REPO

LIMIT = 20


def test_no_function_in_trainctl_is_more_complex_than_the_house_rule():
    over = [f"{path.relative_to(REPO)}:{block.lineno} {block.fullname} ({block.complexity})"
            for path in sorted((REPO / "trainctl").rglob("*.py"))
            for block in cc_visit(path.read_text())
            if block.complexity > LIMIT]
    assert not over, "split these functions (cyclomatic complexity above 20): " + ", ".join(over)
