"""The fuzz tier: Hypothesis over submit flags, --set, values files and apply documents.

Settings (fixed seed, example database, case counts) live in tests/fuzz/harness.py. Each test's CLI runs
travel with its report (tests/tiers.py), whose session summary prints how many the fuzz tests made and how
they ended, also when the suite runs in several processes.
"""

from collections import Counter

import pytest

from tests.fuzz.harness import COUNTS, private_state
from tests.tiers import FUZZ_PROPERTY


@pytest.fixture(autouse=True)
def no_cluster_and_a_private_home():
    """Whatever the machine has configured, fuzzing never reaches a cluster or the user's jobs."""
    with private_state():
        yield


@pytest.fixture(autouse=True)
def counted_cli_runs(request):
    before = Counter(COUNTS)
    yield
    request.node.user_properties.append((FUZZ_PROPERTY, dict(COUNTS - before)))
