"""The Python API's client on the local backend, as a user's shell would make it."""

from __future__ import annotations

import json

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


#: what a ``submit ... --dry-run -o json`` printed, by its arguments
RENDERED: dict[tuple[str, ...], str] = {}


def dry_run(cli, *args: str) -> dict:
    """The resource ``trainctl ARGS`` (a ``submit ... --dry-run -o json``) renders, parsed afresh for the caller to
    change. Rendered once per ARGS: it names no path of the test's, and a CLI process costs ~0.5 CPU-s, which a
    parametrized test paid again in every case for the same resource."""
    if args not in RENDERED:
        result = cli(*args)
        assert result.returncode == 0, result.stderr
        RENDERED[args] = result.stdout
    return json.loads(RENDERED[args])
