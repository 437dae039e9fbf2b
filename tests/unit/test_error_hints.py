"""Every error hint names only options the command that printed it has.

Shared layers (backends, the kubeconfig reader, validation) raise the same message for many
commands, so a hint such as ``pick another --name`` is right for submit and wrong for apply.
This test makes each command fail in every way a shared layer can report, and checks each
option the one-line error names against the real command's options (the user's own options,
quoted back, excepted).
"""

import re

import pytest
import typer.main

from trainctl.cli.app import app

OPTION = re.compile(r"(?<![\w/.-])(--[a-z][-a-z]*|-[a-zA-Z])(?![\w-])")
JOB_YAML = """apiVersion: kubeflow.org/v1
kind: JAXJob
metadata: {name: held}
spec:
  jaxReplicaSpecs:
    Worker:
      template: {spec: {containers: [{name: jax, image: i, command: [sleep, "60"], resources: {limits: {nvidia.com/gpu: 4}}}]}}
"""
UNREACHABLE = """apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]
users: [{name: u, user: {token: t}}]
"""
JOB_COMMANDS = [["status", "nosuch"], ["get", "tfjob/nosuch"], ["list"], ["logs", "nosuch"], ["wait", "nosuch"],
                ["delete", "nosuch"], ["suspend", "nosuch"], ["resume", "nosuch"]]
CLUSTER_COMMANDS = [*JOB_COMMANDS, ["crds", "install"], ["controller", "install", "--image", "i"],
                    ["runtimes", "install"], ["runtimes", "list"]]


def options_of(path: list[str]) -> set[str]:
    command = typer.main.get_command(app)
    for word in path:
        command = command.commands[word]
    return {option for param in command.params for option in param.opts + param.secondary_opts} | {"-h", "--help"}


def command_path(args: list[str]) -> list[str]:
    return args[:2] if args[0] in ("crds", "runtimes", "controller", "templates") else args[:1]


def assert_hints_are_real(cli, args, **kwargs):
    result = cli(*args, **kwargs)
    assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
    named = set(OPTION.findall(result.stderr)) - set(args)
    missing = named - options_of(command_path(args))
    assert not missing, f"trainctl {' '.join(args)} printed {result.stderr.strip()!r}: it has no {sorted(missing)}"


@pytest.fixture
def held(cli):
    """A job named 'held' (for 'already exists' and replica errors)."""
    cli.env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"
    assert cli("apply", "-f", "-", input=JOB_YAML).returncode == 0
    yield
    cli("delete", "held")


def test_local_errors(cli, held):
    for args in JOB_COMMANDS[:1] + JOB_COMMANDS[3:]:
        assert_hints_are_real(cli, args)
    assert_hints_are_real(cli, ["submit", "jax", "--name", "held", "--", "sleep", "1"])
    assert_hints_are_real(cli, ["apply", "-f", "-"], input=JOB_YAML)
    assert_hints_are_real(cli, ["logs", "held", "--replica", "chief-9"])
    assert_hints_are_real(cli, ["get", "pytorchjob/held"])
    for args in (["list", "-l", "a in b"], ["delete", "--all", "-l", "a in b"], ["delete", "held", "-l", "a=b"]):
        assert_hints_are_real(cli, args)
    cli.env["CUDA_VISIBLE_DEVICES"] = ""
    assert_hints_are_real(cli, ["apply", "-f", "-"], input=JOB_YAML.replace("held", "gpus"))
    assert_hints_are_real(cli, ["submit", "jax", "--gpus", "1", "--", "sleep", "1"])


def test_backend_choice_errors(cli):
    cli.env["TRAINCTL_BACKEND"] = "bogus"
    for args in JOB_COMMANDS:
        assert_hints_are_real(cli, args)
    cli.env.pop("TRAINCTL_BACKEND")
    assert_hints_are_real(cli, ["list", "--local", "--context", "x"])


@pytest.mark.parametrize("kubeconfig", [UNREACHABLE, UNREACHABLE.replace("current-context: c\n", ""), None],
                         ids=["unreachable", "no-current-context", "missing-file"])
def test_cluster_errors(cli, tmp_path, kubeconfig):
    path = tmp_path / "kubeconfig"
    if kubeconfig is not None:
        path.write_text(kubeconfig)
    cli.env.pop("TRAINCTL_BACKEND")
    for args in CLUSTER_COMMANDS:
        assert_hints_are_real(cli, [*args, "--kubeconfig", str(path)])
