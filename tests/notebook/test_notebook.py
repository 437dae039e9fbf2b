"""A notebook user's first hour, for real: a .ipynb run cell by cell by nbclient in an IPython kernel.

The kernel is what Jupyter starts for a virtualenv: this Python, with ``FORCE_COLOR=1`` (ipykernel sets
it, so pip colours its warnings) and a PATH without this environment's bin, whose first ``python3`` is
another interpreter. It reaches the local backend with a private TRAINCTL_HOME and no kubeconfig, so
``Client()`` picks local and says so. What the cells show is read from the executed notebook: the
HTML a handle and ``client.jobs()`` render, the text of ``job.logs()``, the live line ``job.wait()``
keeps updating in one output, a value returned through noisy output and packages=, the keyword (not
the flag) in an error, and Ctrl-C (the kernel interrupted, as Jupyter's stop button does, once the live
line shows the job running and its first log line) ending ``job.wait()`` with a message while the job
keeps running.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest
from jupyter_core.utils import ensure_async

from tests.conftest import REPO
from tests.local.test_code_local import WHEEL, build_wheel

pytestmark = pytest.mark.timeout(420)
# the cell that waits for a job that never ends: the "stop button" once its live line shows the job running and
# its first log line; nbclient's own interrupt at this bound if that never comes (and the test fails)
INTERRUPT_BY_S = 60

CELLS = [
    # 0: the client, and which backend it chose
    """
import sys
from trainctl import Client

client = Client()
client
""",
    # 1: output without a final newline before the result, returned with the logs streamed
    """
def noisy(steps):
    import sys
    for step in range(1, steps + 1):
        sys.stderr.write(f"\\rstep {step}/{steps}")
        sys.stderr.flush()
    print("epoch done", end="")
    return {"steps": steps}


job = client.run(noisy, args={"steps": 3}, framework="jax", name="noisy")
job.result(follow_logs=True)
""",
    # 2, 3, 4: a handle, the job list, the logs
    "job",
    "client.jobs()",
    "job.logs()",
    # 5: packages= under FORCE_COLOR=1: pip's colour reset ends its output without a newline
    f"""
def uses_package():
    import tinypkg
    return tinypkg.VALUE


client.run(uses_package, framework="jax", packages=["./dist/{WHEEL}"], name="pkg", backoff_limit=0).result()
""",
    # 6: the same name again: the error names replace=True, the Python keyword
    'client.run(noisy, args={"steps": 1}, framework="jax", name="noisy")',
    # 7: waiting for a job that runs on, stopped by an interrupt
    """
nap = client.run([sys.executable, "-c", "import time; print('napping', flush=True); time.sleep(300)"],
                 framework="jax", name="nap")
nap.wait()
""",
    # 8: it kept running
    "print(nap.status)\nnap.delete()",
    # 9: a live wait to the end
    """
short = client.run([sys.executable, "-c", "import time; print('warming up', flush=True); time.sleep(4)"],
                   framework="jax", name="short")
short.wait()
""",
    # 10, 11, 12: a job that reports its steps: the live wait shows a progress bar; its progress; its loss curve
    """
def steps(count):
    import time
    import trainctl

    for step in range(1, count + 1):
        trainctl.report(step=step, total=count, loss=1 / step)
        time.sleep(0.15)
    return count


progressing = client.run(steps, args={"count": 30}, framework="jax", name="progressing")
progressing.wait()
""",
    "progressing.progress()",
    "progressing.plot()",
    # 13: an exception in the function fails the job at once, not after backoffLimit restarts
    """
import time

def diverges():
    raise FloatingPointError("loss is NaN")


started = time.monotonic()
try:
    client.run(diverges, framework="pytorch", workers=2, name="nan").wait()
finally:
    print(f"heard after {time.monotonic() - started:.1f}s, restarts:",
          sum(row.restarts for row in client.get("nan").replicas))
""",
]
RAISES = {6, 7, 13}


@pytest.fixture
def executed(tmp_path_factory, monkeypatch) -> list:
    """The notebook's cells after nbclient ran them all (the notebook is written to disk, as Jupyter has it)."""
    work = tmp_path_factory.mktemp("notebook")
    other = work / "other-python"  # the first python3 on the kernel's PATH, an interpreter without pip
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    build_wheel(work / "dist")
    for variable in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "TRAINCTL_BACKEND"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(work))  # no ~/.kube/config
    monkeypatch.setenv("TRAINCTL_HOME", str(work / "home"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PATH", f"{other / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(source.strip(), metadata={"tags": ["raises-exception"]} if index in RAISES else {})
        for index, source in enumerate(CELLS)])
    path = work / "first-hour.ipynb"
    nbformat.write(notebook, path)
    notebook = nbformat.read(path, as_version=4)
    runner = StopButton(notebook, kernel_name="python3", interrupt_on_timeout=True,
                        timeout_func=lambda cell: INTERRUPT_BY_S if STOPPED in cell.source else 180,
                        resources={"metadata": {"path": str(work)}})
    try:
        runner.execute()
    finally:
        subprocess.run([sys.executable, "-m", "trainctl", "delete", "--all", "--local"], env=os.environ, cwd=work,
                       capture_output=True, timeout=60)
    return notebook.cells


STOPPED = "nap.wait()"


class StopButton(nbclient.NotebookClient):
    """Interrupts the kernel, once, when the live line of the cell waiting on ``nap`` shows it running and napping."""

    pressed: asyncio.Task | None = None

    def process_message(self, msg, cell, cell_index):
        output = super().process_message(msg, cell, cell_index)
        live = STOPPED in cell.source and "napping" in shown(cell) and "Running" in shown(cell)
        if live and self.pressed is None:
            self.pressed = asyncio.ensure_future(ensure_async(self.km.interrupt_kernel()))
        return output


def text(output) -> str:
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":  # what the notebook shows of it: the traceback's lines, or its own
        return "\n".join(output.traceback)
    return output.data.get("text/plain", "")


def shown(cell) -> str:
    return "\n".join(text(output) for output in cell.outputs)


def html(cell) -> str:
    [result] = [output for output in cell.outputs if output.output_type == "execute_result"]
    return result.data["text/html"]


def test_a_notebooks_first_hour(executed):
    cells = executed
    assert "local" in shown(cells[0]), shown(cells[0])  # Client() says where jobs run
    assert "{'steps': 3}" in shown(cells[1]), shown(cells[1])  # the value, through output without a newline
    assert "worker-0 | " in shown(cells[1]) and "epoch done" in shown(cells[1])  # the logs, streamed
    for cell in cells[2], cells[3]:  # a handle and the job list: HTML tables with state, age, duration, replicas
        table = html(cell)
        assert "<table" in table and "noisy" in table and "Succeeded" in table, table
        for column in ("STATE", "REPLICAS", "AGE", "DURATION", "PROGRESS"):
            assert column in table, table
    assert "epoch done" in shown(cells[4]) and "trainctl-result" not in shown(cells[4]), shown(cells[4])
    assert "'tiny 1.0'" in shown(cells[5]), shown(cells[5])  # packages= under FORCE_COLOR=1
    error = shown(cells[6])
    assert "replace=True" in error and "--replace" not in error, error

    stopped = shown(cells[7])  # interrupted during nap.wait()
    assert "keeps running" in stopped and "client.job('nap').delete()" in stopped, stopped
    assert "time.sleep" not in stopped and "Traceback" not in stopped, stopped  # a message, not a traceback
    assert "napping" in stopped and "Running" in stopped, stopped  # the live line: state and latest log line
    assert shown(cells[8]).splitlines()[0] == "Running", shown(cells[8])

    [live] = [output for output in cells[9].outputs if output.output_type == "display_data"]  # one, updated
    assert "Succeeded" in text(live) and "warming up" in text(live), text(live)

    [bar] = [output for output in cells[10].outputs if output.output_type == "display_data"]  # one, updated
    assert "Succeeded" in text(bar) and "30/30 100% loss 0.03333" in text(bar), text(bar)
    assert '<progress value="1.0000" max="1"' in bar.data["text/html"], bar.data["text/html"]
    assert shown(cells[11]).startswith("progress: 30/30 (100%), loss 0.03333"), shown(cells[11])
    [curve] = [output for output in cells[12].outputs if output.output_type == "execute_result"]
    assert base64.b64decode(curve.data["image/png"]).startswith(b"\x89PNG"), curve.data.keys()

    failed = shown(cells[13])  # defect 4: the first exception ends the job; nothing is restarted
    assert "JobFailed" in failed and "raised FloatingPointError: loss is NaN" in failed, failed
    assert "restarts: 0" in failed and "restarted 0 times" in failed, failed
