"""The Python API's client on the local backend, as a user's shell would make it."""

from __future__ import annotations

import pytest

from trainctl import Client


@pytest.fixture
def client(cli, monkeypatch) -> Client:
    """Client("local") with the test's private state directory, from the test's working directory, with this
    environment's bin first on PATH (as when it is activated: mpirun, the frameworks' launchers)."""
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.setenv("PATH", cli.env["PATH"])
    monkeypatch.chdir(cli.cwd)
    return Client("local")
