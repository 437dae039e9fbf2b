"""trainctl.checkpoints: where checkpoints go, which one is complete, and the notice of a stop, as a replica's
script sees them (also through the stand-in package of an image without trainctl); and the fine-tuning
recipe's checkpoints on it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO
from trainctl import checkpoints
from trainctl.code.pods import replica_library
from trainctl.recipes import finetune as recipe


@pytest.fixture
def in_job(tmp_path, monkeypatch):
    monkeypatch.setenv(checkpoints.CHECKPOINT_DIR_ENV, str(tmp_path / "ckpt"))
    for name in ("RANK", "WORLD_SIZE", checkpoints.ATTEMPT_ENV):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "ckpt"


def save(step: int, rank: int, world: int = 2, whole: bool = True) -> Path:
    path = checkpoints.checkpoint_path(step, rank=rank)
    (path / f"rank-{rank}.pt").write_bytes(b"state" if whole else b"sta")
    if whole:
        checkpoints.checkpoint_complete(path, rank=rank, world_size=world)
    return path


def test_the_newest_checkpoint_every_rank_completed_is_the_latest(in_job):
    assert checkpoints.latest_checkpoint() is None
    for step in (10, 20):
        save(step, 0)
        save(step, 1)
    save(30, 0)
    save(30, 1, whole=False)  # rank 1 died while writing it: no marker
    assert checkpoints.latest_checkpoint() == in_job / "step-20"
    assert checkpoints.checkpoint_step(checkpoints.latest_checkpoint()) == 20
    save(30, 1)
    assert checkpoints.latest_checkpoint() == in_job / "step-30"


def test_a_checkpoint_rewritten_on_a_later_attempt_is_complete_only_when_every_rank_marked_it_again(in_job,
                                                                                                monkeypatch):
    save(30, 0)
    save(30, 1)
    monkeypatch.setenv(checkpoints.ATTEMPT_ENV, "1")
    save(30, 1)  # rank 1 wrote it again; rank 0 is still writing (checkpoint_path took its old marker away)
    checkpoints.checkpoint_path(30, rank=0)
    assert checkpoints.latest_checkpoint() is None
    save(30, 0)
    assert sorted(p.name for p in (in_job / "step-30" / checkpoints.MARKERS).iterdir()) == ["1-0-of-2", "1-1-of-2"]
    assert checkpoints.latest_checkpoint() == in_job / "step-30"


def test_markers_of_two_attempts_do_not_add_up(in_job):
    path = checkpoints.checkpoint_path(40, rank=0)
    (path / checkpoints.MARKERS / "0-0-of-2").write_text("")
    (path / checkpoints.MARKERS / "1-1-of-2").write_text("")  # rank 0's is the old attempt's: not complete
    assert checkpoints.latest_checkpoint() is None


def test_rank_and_world_come_from_the_launchers_env(in_job, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    path = checkpoints.checkpoint_path(5)
    checkpoints.checkpoint_complete(path)
    assert [p.name for p in (path / checkpoints.MARKERS).iterdir()] == ["0-1-of-2"]
    with pytest.raises(ValueError, match="rank 3 is not one of a world of 2"):
        checkpoints.checkpoint_complete(path, rank=3)
    with pytest.raises(ValueError):
        checkpoints.checkpoint_path(-1)
    with pytest.raises(ValueError, match="not a checkpoint directory"):
        checkpoints.checkpoint_step(in_job)


def test_outside_a_job_checkpoints_go_to_the_working_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(checkpoints.CHECKPOINT_DIR_ENV, raising=False)
    monkeypatch.delenv(checkpoints.JOB_ENV, raising=False)
    assert checkpoints.checkpoint_dir() == Path("checkpoints") and (tmp_path / "checkpoints").is_dir()
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(checkpoints.JOB_ENV, "a-job-with-no-storage")  # a pod submitted without --checkpoints
    monkeypatch.setattr(checkpoints, "_warned", set())
    checkpoints.checkpoint_dir()
    checkpoints.checkpoint_dir()
    assert capsys.readouterr().err.count("submit with --checkpoints") == 1


PREEMPTED = textwrap.dedent("""
    import os, signal, sys, time
    import trainctl
    print(trainctl.preempting(), trainctl.restart_attempt(), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)  # armed: a notice, not the end
    time.sleep(0.1)
    print(trainctl.preempting(), flush=True)
    sys.exit(trainctl.PREEMPTED_EXIT)
""")


@pytest.mark.parametrize("stand_in", [False, True])
def test_preempting_turns_sigterm_into_a_notice_with_or_without_trainctl_installed(tmp_path, stand_in):
    for name, data in replica_library("lib").items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    script = tmp_path / "script.py"
    script.write_text(PREEMPTED)
    # -S: no site-packages, where an editable install would be found; the stand-in alone, or trainctl's checkout
    path = str(tmp_path / "lib") if stand_in else str(REPO)
    done = subprocess.run([sys.executable, "-S", str(script)], env={"PATH": "/usr/bin:/bin", "PYTHONPATH": path,
                                                                    checkpoints.ATTEMPT_ENV: "2"},
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stdout.split() == ["False", "2", "True"]


def test_the_local_runtimes_notice_file_is_a_notice_too(tmp_path, monkeypatch):
    notice = tmp_path / "worker-0.preempting"
    monkeypatch.setenv(checkpoints.PREEMPTING_ENV, str(notice))
    monkeypatch.setitem(checkpoints._notice, "since", None)
    assert checkpoints.preempting() is False
    notice.write_text("Suspend\n")
    assert checkpoints.preempting() is True


def test_the_recipe_resumes_only_checkpoints_every_rank_marked(tmp_path):
    out = tmp_path / "out"
    for step in (16, 32):
        path = out / f"checkpoint-{step}"
        path.mkdir(parents=True)
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        checkpoints.checkpoint_complete(path, rank=0, world_size=2)
    checkpoints.checkpoint_complete(out / "checkpoint-16", rank=1, world_size=2)
    assert recipe.complete_checkpoints(out) == {16}  # rank 1 never said checkpoint-32 was whole
    legacy = out / "checkpoint-48"  # written before the markers, or by a recipe copy without trainctl
    legacy.mkdir()
    (legacy / "trainer_state.json").write_text("{}")
    assert recipe.complete_checkpoints(out) == {16, 48}


def test_the_stand_in_exports_the_checkpoint_api():
    library = replica_library("lib")
    assert library["lib/trainctl/checkpoints.py"] == (REPO / "trainctl" / "checkpoints.py").read_bytes()
    assert os.path.basename(checkpoints.__file__) == "checkpoints.py"


def test_two_writers_of_one_marker_both_succeed_and_a_link_there_is_replaced_not_followed(in_job, tmp_path):
    """A save hook and a callback may mark the same checkpoint at once (the fine-tuning recipe under DeepSpeed did):
    neither may fail because the other's marker appeared between its removal and its creation."""
    import threading

    path = checkpoints.checkpoint_path(3, rank=0)
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    (path / checkpoints.MARKERS / "0-0-of-1").symlink_to(outside)
    errors = []

    def mark() -> None:
        try:
            for _ in range(200):
                checkpoints.checkpoint_complete(path, rank=0, world_size=1)
        except OSError as error:
            errors.append(error)

    writers = [threading.Thread(target=mark) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=60)
    assert not errors
    assert outside.read_text() == "untouched\n"
    marker = path / checkpoints.MARKERS / "0-0-of-1"
    assert marker.is_file() and not marker.is_symlink()
    assert checkpoints.latest_checkpoint() == path
