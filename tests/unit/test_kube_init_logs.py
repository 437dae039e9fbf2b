"""Which log tells why a pod never ran: trainctl.kube.pods.failed_init on the pod statuses a
kubelet reports (shapes as in Kubernetes' PodStatus)."""

from __future__ import annotations

import pytest

from trainctl.kube.pods import failed_init


def terminated(code: int) -> dict:
    return {"terminated": {"exitCode": code}}


MAIN_WAITING = [{"name": "pytorch", "state": {"waiting": {"reason": "PodInitializing"}}}]


@pytest.mark.parametrize(("status", "found"), [
    ({"initContainerStatuses": [{"name": "code", "state": terminated(127)}], "containerStatuses": MAIN_WAITING},
     ("code", False, 127)),  # failed for good (restartPolicy Never)
    ({"initContainerStatuses": [{"name": "wait", "state": terminated(0)},
                                {"name": "code", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                 "lastState": terminated(1)}], "containerStatuses": MAIN_WAITING},
     ("code", True, 1)),  # failed and waits to run again: its log is the previous run's
    ({"initContainerStatuses": [{"name": "code", "state": terminated(0)}],
      "containerStatuses": [{"name": "pytorch", "state": {"running": {}}}]}, None),  # the main container ran
    ({"initContainerStatuses": [{"name": "code", "state": terminated(2)}],
      "containerStatuses": [{"name": "pytorch", "state": {"waiting": {}}, "lastState": terminated(1)}]}, None),
    ({"initContainerStatuses": [{"name": "wait", "state": {"running": {}}}], "containerStatuses": MAIN_WAITING},
     None),  # still waiting for the master: nothing failed
    ({}, None),
    (None, None),  # no such pod
])
def test_the_failed_init_container_is_found_only_when_it_kept_the_main_one_from_running(status, found):
    assert failed_init(status) == found
