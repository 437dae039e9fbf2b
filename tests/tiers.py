"""Where the suite's time goes: a line per tier at the end of every run (docs/test-cluster.md, "Budget").

A tier is the directory under tests/ that holds the test (unit, local, frameworks, k8s, controller, realnode,
notebook, fuzz, integration, compat). Its time is the sum of its tests' set-up, call and teardown, as each
report says: with the suite spread over processes (scripts/test.sh runs pytest-xdist), the reports reach
the process that prints this summary from every worker, so the table covers the whole run. The sum of a
tier's times is what the tier costs a core; the run's wall time is printed by scripts/test.sh.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import pytest


@dataclass
class Tier:
    seconds: float = 0.0
    outcomes: dict = field(default_factory=lambda: defaultdict(int))


TIERS: dict[str, Tier] = defaultdict(Tier)
# what the fuzz tests counted (tests/fuzz/conftest.py), sent with each test's report as a user property so
# that a worker's counts reach the summary
FUZZ_COUNTS: Counter = Counter()
FUZZ_PROPERTY = "fuzz CLI runs"


def tier_of(nodeid: str) -> str:
    """``tests/local/test_api.py::test_x`` -> ``local``; a module directly under tests/ is its own tier."""
    parts = PurePosixPath(nodeid.split("::", 1)[0]).parts
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else PurePosixPath(parts[-1]).stem


def outcome_of(report) -> str | None:
    """The one outcome a test is counted under: its call's, or its set-up's or teardown's when that failed or
    skipped it (as pytest's own summary counts)."""
    if report.when == "call":
        return "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
    if report.failed:
        return "error"
    if report.skipped and report.when == "setup":
        return "skipped"
    return None


def pytest_runtest_logreport(report):
    tier = TIERS[tier_of(report.nodeid)]
    tier.seconds += report.duration
    for name, value in report.user_properties:
        if name == FUZZ_PROPERTY:
            FUZZ_COUNTS.update(value)
    outcome = outcome_of(report)
    if outcome:
        tier.outcomes[outcome] += 1


def pytest_terminal_summary(terminalreporter):
    if FUZZ_COUNTS["cases"]:
        outcomes = ", ".join(f"{key}: {value}" for key, value in sorted(FUZZ_COUNTS.items()) if key != "cases")
        terminalreporter.write_line(f"fuzz: {FUZZ_COUNTS['cases']} generated CLI runs ({outcomes})")
    if not TIERS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per tier (sum of the tests' set-up, call and teardown)")
    for name, tier in sorted(TIERS.items(), key=lambda item: -item[1].seconds):
        counts = ", ".join(f"{count} {outcome}" for outcome, count in sorted(tier.outcomes.items()))
        write(f"tier {name:<12} {tier.seconds:8.1f} s  {counts}")
    write(f"tier {'(all)':<12} {sum(t.seconds for t in TIERS.values()):8.1f} s")


# ---- spreading the suite over two processes (pytest-xdist, --dist loadscope) ------------------------------------

#: the tests that share one real node (a network namespace, /var/lib/kubelet, the host's cgroups) run in one
#: process, one after another
REAL_NODE_GROUP = "realnode"
#: the tests on the session's API server (tests/cluster's ``k8s_cluster``: the k8s and controller tiers and the
#: modules below) run in one process too: each process that uses it starts its own kube-apiserver and etcd and
#: installs the CRDs, some 60 s of CPU over a run. A module elsewhere that uses it is still correct, only dearer.
API_SERVER_GROUP = "api-server"
API_SERVER_TIERS = ("k8s", "controller")
API_SERVER_MODULES = ("tests/integration/test_cluster_smoke.py", "tests/unit/test_run_arguments.py",
                      "tests/unit/test_finetune_arguments.py")
#: the order in which groups are handed out: the longest first (the real node's, some 15 minutes; the API
#: server's, some 8), tiers of long modules next, the many short modules of the unit tier last, to even out the
#: end of the run
TIER_ORDER = ("realnode", API_SERVER_GROUP, "frameworks", "notebook", "local", "compat", "integration", "fuzz")


def group_of(nodeid: str) -> str:
    """The tests of one module run in one process, as in a serial run (its fixtures are made once); the real
    node's tests all in the same one, and the API server's in another."""
    module, tier = nodeid.split("::", 1)[0], tier_of(nodeid)
    if tier == REAL_NODE_GROUP:
        return REAL_NODE_GROUP
    if tier in API_SERVER_TIERS or module in API_SERVER_MODULES:
        return API_SERVER_GROUP
    return module


def handed_out(nodeid: str) -> int:
    group = group_of(nodeid)
    key = group if group in (REAL_NODE_GROUP, API_SERVER_GROUP) else tier_of(nodeid)
    return TIER_ORDER.index(key) if key in TIER_ORDER else len(TIER_ORDER)


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: handed_out(item.nodeid))  # stable: within a tier, the order stays


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` with :func:`group_of` as the scope, handed out in collection order."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return ByGroup(config, log)
