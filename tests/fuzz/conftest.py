"""The fuzz tier: Hypothesis over submit flags, --set, values files and apply documents.

Settings (fixed seed, example database, case counts) live in tests/fuzz/harness.py. The
session summary prints how many CLI runs the fuzz tests made and how they ended.
"""

import pytest

from tests.fuzz.harness import COUNTS, private_state


def pytest_terminal_summary(terminalreporter):
    if COUNTS["cases"]:
        outcomes = ", ".join(f"{key}: {value}" for key, value in sorted(COUNTS.items()) if key != "cases")
        terminalreporter.write_line(f"fuzz: {COUNTS['cases']} generated CLI runs ({outcomes})")


@pytest.fixture(autouse=True)
def no_cluster_and_a_private_home():
    """Whatever the machine has configured, fuzzing never reaches a cluster or the user's jobs."""
    with private_state():
        yield
