"""Fuzzing restarts and checkpoints: the new options and keywords, the record annotation anyone may edit, the
reconcile of a job whose restart annotations are garbage, and the completion markers of checkpoints."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import fuzz, json_documents, run, text_values
from trainctl import checkpoints
from trainctl.core import checkpoint_volume
from trainctl.core.actions import CreateReplica, DeleteReplica
from trainctl.core.network import ClusterNetwork, LocalNetwork
from trainctl.core.nodes import FRESH_EVIDENCE_S, Evidence, stall_bound
from trainctl.core.observed import ObservedReplica
from trainctl.core.reconcile import reconcile
from trainctl.core.times import rfc3339
from trainctl.core.restarts import (DEFAULT_NODE_LOST_AFTER_S, DEFAULT_SUCCESS_WAIT_S, MAX_COUNT,
                                    MAX_DISRUPTIONS_ANNOTATION, MAX_NODE_LOST_AFTER_S, MAX_SUCCESS_WAIT_S,
                                    NODE_LOSS_EVIDENCE_ANNOTATION, NODE_LOST_AFTER_ANNOTATION, RECORD_ANNOTATION, RESTART_SCOPE_ANNOTATION,
                                    RETRY_EXIT_CODES_ANNOTATION, SUCCESS_WAIT_ANNOTATION, Record, Rules)
from trainctl.errors import InvalidArgument
from tests.unit.test_env_contract import job

pytestmark = pytest.mark.fuzz
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)

code_words = st.one_of(st.integers(-300, 300).map(str), st.integers(1, 255).map(str), text_values,
                       st.sampled_from(["3", "42", "255", "0", "1,2", " 7 "]))
code_lists = st.lists(code_words, min_size=1, max_size=3).map(",".join)


def codes_of(texts: list[str]) -> list[int] | None:
    """What --retry-on-exit-codes should make of its values: None when one of them is no list of codes 1-255."""
    codes = set()
    for text in texts:
        words = [word.strip() for word in text.split(",")]
        if not all(word.isdigit() and 1 <= int(word) <= 255 for word in words):
            return None
        codes.update(int(word) for word in words)
    return sorted(codes)


@fuzz(300)
@given(values=st.lists(code_lists, min_size=1, max_size=3), scope=st.one_of(st.none(), st.sampled_from(
    ["job", "replica", "JOB", "Job"]), text_values))
def test_retry_codes_and_scope_are_accepted_exactly_when_valid(values, scope):
    arguments = [word for value in values for word in ("--retry-on-exit-codes", value)]
    arguments += ["--restart-scope", scope] if scope is not None else []
    # --no-preflight: the scratch directory holds no t.py, and a dry run now checks that as the create does
    result = run("submit", "pytorch", "--dry-run", "--no-preflight", "-o", "json", *arguments, "--", "python", "t.py")
    expected = codes_of(values)
    scope_ok = scope is None or scope.lower() in ("job", "replica")
    if expected is None or not scope_ok:
        assert result.code == 2 and result.stderr.count("\n") == 1, result.stderr
        return
    assert result.code == 0, result.stderr
    (document,) = json_documents(result)
    annotations = document["metadata"]["annotations"]
    assert annotations[RETRY_EXIT_CODES_ANNOTATION] == ",".join(map(str, expected))
    assert annotations.get(RESTART_SCOPE_ANNOTATION) == (scope.lower() if scope else None)


@fuzz(200)
@given(value=st.one_of(text_values, st.builds(lambda path: f"host:{path}", text_values),
                       st.builds(lambda claim: f"pvc:{claim}", text_values),
                       st.sampled_from(["10Gi", "host:/data", "pvc:x", "host:/a/./b", "1"])))
def test_checkpoints_are_accepted_exactly_when_a_form_and_never_climb_out(value):
    result = run("submit", "pytorch", "--dry-run", "--no-preflight", "-o", "json", "--checkpoints", value, "--",
                 "python", "t.py")
    storage = checkpoint_volume.parse(value)
    if storage is None:
        assert result.code == 2 and result.stderr.count("\n") == 1, result.stderr
        return
    assert result.code == 0, result.stderr
    (document,) = json_documents(result)
    for action in reconcile(document, [], T0, ClusterNetwork()).actions:
        if isinstance(action, CreateReplica):
            (volume,) = [v for v in action.pod["spec"]["volumes"] if v["name"] == checkpoint_volume.VOLUME]
            path = (volume.get("hostPath") or {}).get("path")
            if path is not None:  # the job's own directory, under the given one
                assert os.path.normpath(path) == path and path.startswith(storage.value.rstrip("/") + "/")


@fuzz(300)
@given(keywords=st.fixed_dictionaries({}, optional={
    "restart_scope": st.one_of(st.sampled_from(["job", "replica"]), text_values, st.integers()),
    "retry_on_exit_codes": st.one_of(st.lists(st.one_of(st.integers(-5, 300), code_words), max_size=3),
                                     st.integers(-5, 300), code_words, st.none()),
    "checkpoints": st.one_of(st.sampled_from(["10Gi", "pvc:x", "host:/x"]), text_values)}))
def test_run_keywords_of_restarts(keywords):
    from trainctl import Client

    try:
        resource = Client("local").run(["python", "t.py"], framework="pytorch", dry_run=True, preflight=False,
                                       **keywords)
    except InvalidArgument as error:
        assert "\n" not in str(error)
        return
    annotations = resource["metadata"].get("annotations") or {}
    if keywords.get("restart_scope") is not None:
        assert annotations[RESTART_SCOPE_ANNOTATION] == keywords["restart_scope"].lower()


records = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(), text_values),
                       lambda children: st.one_of(st.lists(children, max_size=4),
                                                  st.dictionaries(text_values, children, max_size=4)), max_leaves=12)
record_objects = st.fixed_dictionaries({}, optional={
    key: records for key in ("attempt", "counted", "disruptions", "preemptions", "history", "inPlace", "replaced")})


@fuzz(400)
@given(text=st.one_of(text_values, records.map(json.dumps), record_objects.map(json.dumps)),
       scope=st.one_of(text_values, st.sampled_from(["job", "replica"])), codes=st.one_of(text_values, code_lists),
       limit=st.one_of(text_values, st.integers(-3, 2**40).map(str)), cluster=st.booleans(),
       exit_code=st.one_of(st.none(), st.integers(-300, 300)), suspend=st.booleans())
def test_any_restart_annotation_is_reconciled_without_a_crash_into_a_readable_record(
        text, scope, codes, limit, cluster, exit_code, suspend):
    resource = job("PyTorchJob", "pt", {"Master": 1, "Worker": 1})
    resource["metadata"]["annotations"] = {RECORD_ANNOTATION: text, RESTART_SCOPE_ANNOTATION: scope,
                                           RETRY_EXIT_CODES_ANNOTATION: codes, MAX_DISRUPTIONS_ANNOTATION: limit}
    resource["spec"]["runPolicy"] = {"backoffLimit": 1, "suspend": suspend}
    resource["status"] = {"conditions": [{"type": "Suspended", "status": "True", "reason": "x"}],
                          "startTime": "2026-11-22T11:00:00Z"}
    observed = [ObservedReplica("Worker", 0, "pt-worker-0", "Failed" if exit_code else "Running", exit_code,
                                attempt=1)]
    plan = reconcile(resource, observed, T0, ClusterNetwork() if cluster else LocalNetwork())
    record = Record.of({"metadata": {"annotations": plan.annotations or {RECORD_ANNOTATION: text}}})
    assert all(0 <= value <= MAX_COUNT + 1 for value in (record.attempt, record.counted, record.disruptions))
    assert json.loads(record.text())  # what is written back is JSON again


@fuzz(300)
@given(wait=st.one_of(st.integers(-5, 5000).map(str), text_values, st.sampled_from(["0", "60", "3600", "3601", "1e3", "²", "٣"])),
       worker=st.sampled_from(["Pending", "Running", "Succeeded"]), after=st.floats(0, 4000))
def test_any_success_wait_annotation_holds_the_success_exactly_its_whole_seconds(wait, worker, after):
    """``trainctl.io/success-wait`` anyone may write: a whole number up to an hour is the wait, anything else 60 s;
    a master that succeeded ``after`` seconds ago with its worker ``worker`` gives Succeeded exactly when the
    worker ended or the wait is over."""
    resource = job("PyTorchJob", "pt", {"Master": 1, "Worker": 1})
    resource["metadata"]["annotations"] = {SUCCESS_WAIT_ANNOTATION: wait}
    expected = int(wait) if wait.isascii() and wait.isdigit() and int(wait) <= MAX_SUCCESS_WAIT_S else DEFAULT_SUCCESS_WAIT_S
    assert Rules.of(resource).success_wait == expected
    ended = datetime.fromtimestamp(T0.timestamp() - after, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    observed = [ObservedReplica("Master", 0, "pt-master-0", "Succeeded", 0, finished_at=ended),
                ObservedReplica("Worker", 0, "pt-worker-0", worker, 0 if worker == "Succeeded" else None)]
    plan = reconcile(resource, observed, T0, ClusterNetwork())
    succeeded = any(c["type"] == "Succeeded" and c["status"] == "True" for c in plan.status["conditions"])
    waited = T0.timestamp() - datetime.strptime(ended, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    assert succeeded == (worker == "Succeeded" or waited >= expected), (wait, worker, after)


@fuzz(300)
@given(worlds=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2), st.integers(0, 4), st.integers(0, 4)),
                       max_size=12),
       junk=st.lists(st.text("step-0123456789x.", min_size=1, max_size=9).filter(lambda name: name not in (".", "..")),
                     max_size=3))
def test_latest_checkpoint_is_the_newest_one_every_rank_of_one_world_marked(tmp_path_factory, worlds, junk):
    """(step, attempt, rank, world) markers, complete or not, and junk in the directories."""
    directory = tmp_path_factory.mktemp("ckpt")
    os.environ[checkpoints.CHECKPOINT_DIR_ENV] = str(directory)
    try:
        complete_steps = set()
        for step, attempt, rank, world in worlds:
            markers = directory / f"step-{step}" / checkpoints.MARKERS
            markers.mkdir(parents=True, exist_ok=True)
            (markers / f"{attempt}-{rank}-of-{world}").write_text("")
        for step in {step for step, *_ in worlds}:
            marked = {(a, w): set() for _, a, _, w in worlds}
            for s, a, r, w in worlds:
                if s == step:
                    marked[(a, w)].add(r)
            if any(w > 0 and ranks == set(range(w)) for (a, w), ranks in marked.items()):
                complete_steps.add(step)
        for name in junk:
            (directory / name).mkdir(exist_ok=True)
        latest = checkpoints.latest_checkpoint()
        assert latest == (directory / f"step-{max(complete_steps)}" if complete_steps else None)
    finally:
        del os.environ[checkpoints.CHECKPOINT_DIR_ENV]



seconds_texts = st.one_of(st.integers(-5, 90000).map(str), text_values,
                          st.sampled_from(["0", "2", "60", "86400", "86401", "1.5", "1e3", "²", "٣", " 30", "30s"]))


def whole_seconds(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and int(text) <= MAX_NODE_LOST_AFTER_S else None


@fuzz(200)
@given(value=seconds_texts)
def test_node_lost_after_is_accepted_exactly_when_whole_seconds(value):
    result = run("submit", "pytorch", "--dry-run", "--no-preflight", "-o", "json", "--node-lost-after", value, "--",
                 "python", "t.py")
    expected = whole_seconds(value)
    if expected is None:
        assert result.code == 2 and result.stderr.count("\n") == 1, result.stderr
        return
    assert result.code == 0, result.stderr
    (document,) = json_documents(result)
    assert document["metadata"]["annotations"][NODE_LOST_AFTER_ANNOTATION] == str(expected)
    assert Rules.of(document).node_lost_after == expected


@fuzz(300)
@given(grace=seconds_texts, down=st.one_of(st.sampled_from(["", "NotReady", "gone"]), text_values),
       ago=st.one_of(st.none(), st.integers(-100, 100_000), text_values.map(lambda t: t[:30])), scope=st.booleans())
def test_a_replica_is_lost_with_its_node_exactly_once_its_grace_is_over(grace, down, ago, scope):
    """``trainctl.io/node-lost-after`` anyone may write, and whatever the runtime says of a node: a whole number up to a
    day is the grace, anything else 60 s; a running replica's pod is deleted with no grace period exactly when its
    node is gone, or not Ready since a time that does not read or is at least the grace ago."""
    resource = job("PyTorchJob", "pt", {"Master": 1, "Worker": 1})
    resource["metadata"]["annotations"] = {NODE_LOST_AFTER_ANNOTATION: grace,
                                           RESTART_SCOPE_ANNOTATION: "job" if scope else "replica"}
    since = ago if not isinstance(ago, int) else datetime.fromtimestamp(T0.timestamp() - ago, timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    observed = [ObservedReplica("Master", 0, "pt-master-0", "Running", attempt=0),
                ObservedReplica("Worker", 0, "pt-worker-0", "Running", node="n2", node_down=down, node_down_since=since,
                                attempt=0)]
    plan = reconcile(resource, observed, T0, ClusterNetwork())
    bound = whole_seconds(grace)
    wait = DEFAULT_NODE_LOST_AFTER_S if bound is None else bound
    lost = bool(down) and (down == "gone" or not isinstance(ago, int) or ago >= wait)
    forced = [a.name for a in plan.actions if isinstance(a, DeleteReplica) and a.force]
    assert forced == (["pt-worker-0"] if lost else []), (grace, down, ago)
    if down and not lost:
        assert plan.requeue_after == wait - ago


@fuzz(300)
@given(heard_ago=st.one_of(st.none(), st.integers(-50, 500)), lease=st.one_of(st.none(), st.integers(-5, 100)),
       down_ago=st.one_of(st.none(), st.integers(0, 500)), quiet=st.floats(0, 1000), read_ago=st.floats(-30, 100),
       cadence=st.one_of(st.none(), st.floats(0, 10_000)), switch=st.one_of(st.sampled_from(["on", "off", ""]),
                                                                            text_values))
def test_a_suspect_node_is_judged_by_the_survivors_output_only_when_there_is_evidence(
        heard_ago, lease, down_ago, quiet, read_ago, cadence, switch):
    """Issue 56 (trainctl/core/nodes.py): whatever the runtime says of a node's Lease and Ready condition and of the
    survivors' output, and whatever ``trainctl.io/node-loss-evidence`` holds: a node neither silent nor NotReady loses
    nothing; with fresh evidence, survivors that wrote within the stall bound are never restarted, however long the
    node is NotReady, and survivors silent for it after the node went quiet lose the node at once; without evidence,
    node-lost-after alone decides."""
    resource = job("PyTorchJob", "pt", {"Master": 1, "Worker": 1})
    resource["metadata"]["annotations"] = {RESTART_SCOPE_ANNOTATION: "job", NODE_LOSS_EVIDENCE_ANNOTATION: switch}
    ago = lambda seconds: None if seconds is None else rfc3339(T0 - timedelta(seconds=seconds))  # noqa: E731
    observed = [ObservedReplica("Master", 0, "pt-master-0", "Running", attempt=0, node="n1", node_heard_at=ago(0)),
                ObservedReplica("Worker", 0, "pt-worker-0", "Running", node="n2", attempt=0,
                                node_down="" if down_ago is None else "NotReady", node_down_since=ago(down_ago),
                                node_heard_at=ago(heard_ago), node_lease_s=lease)]
    read_at = T0 - timedelta(seconds=read_ago)
    evidence = Evidence(read_at, {"pt-master-0": read_at - timedelta(seconds=quiet)}, cadence)
    plan = reconcile(resource, observed, T0, ClusterNetwork(), evidence=evidence)
    forced = [a.name for a in plan.actions if isinstance(a, DeleteReplica) and a.force]
    silent_for = (lease if lease and lease > 0 else 40) * 0.5
    quiet_for = [t for t in (down_ago, heard_ago if heard_ago is not None and heard_ago >= silent_for else None)
                 if t is not None]  # seconds the node has been NotReady, or its kubelet unheard
    if not quiet_for:
        assert forced == [] and not Record.of(resource).held
        return
    quiet_since = max(quiet_for)
    usable = switch != "off" and cadence is not None and abs(read_ago) <= FRESH_EVIDENCE_S
    if usable and quiet < stall_bound(cadence):
        assert forced == [], (down_ago, quiet, cadence)
    elif usable and read_ago <= quiet_since:
        assert forced == ["pt-worker-0"], (heard_ago, down_ago, quiet, cadence)
    elif not usable:
        assert forced == (["pt-worker-0"] if down_ago is not None and down_ago >= DEFAULT_NODE_LOST_AFTER_S else [])
