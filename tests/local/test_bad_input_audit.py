"""Issue 22's bad input (the audit's class 4), as the CLI and the Python API meet it: a NUL byte on every way
in is refused before anything exists (it used to kill the local supervisor at exec), and what the API server
would refuse of labels, annotations, ports, env names, container and volume names and resources is refused
here in one line first. The cases run like tests/unit/test_bad_input.py's, with its helpers."""

import pytest
import yaml

from tests.unit.test_bad_input import assert_one_line_error, command_line_refused, variant, yaml_refused

AUDIT_SUBMIT_CASES = [
    # a NUL reaches no process; labels and ports by Kubernetes' rules
    (["submit", "pytorch", "--set", 'spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command[0]="a\\0"',
      "--", "x"], "containers[0].command[0]: 'a\\x00' contains a NUL character"),
    (["submit", "pytorch", "--label", "/team=x", "--", "x"], "the prefix before '/' is empty"),
    (["submit", "pytorch", "--set", "metadata.labels.team=" + "v" * 64, "--", "x"], "metadata.labels.team: 'vvv"),
    (["submit", "pytorch", "--set", "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].ports[0]"
      ".containerPort=70000", "--", "x"], "ports[0].containerPort: 70000 is not a port number: 1 to 65535"),
]

AUDIT_APPLY_CASES = [
    # what a process receives holds no NUL (YAML's "\\0" is one)
    (variant("command: [python]", 'command: [python, -c, pass], env: [{name: A, value: "a\\0b"}]'),
     "Master.template.spec.containers[0].env[0].value: 'a\\x00b' contains a NUL character"),
    (variant("command: [python]", 'command: [python, "x\\0"]'), "containers[0].command[1]: 'x\\x00' contains a NUL"),
    (variant("command: [python]", 'command: [python], args: ["\\0"]'), "containers[0].args[0]"),
    (variant("command: [python]", 'command: [python], workingDir: "/a\\0"'), "containers[0].workingDir"),
    # the API server's rules for what a pod (and any object's metadata) carries
    *[(variant("command: [python]", f"ports: [{{containerPort: {port}}}]"),
       f"ports[0].containerPort: {port} is not a port number: 1 to 65535") for port in (-1, 0, 65536, 2**40)],
    (variant("command: [python]", "ports: [{containerPort: 80, hostPort: 65536}]"), "hostPort: 65536 is not a port"),
    (variant("command: [python]", "ports: [{name: a}]"), "ports[0].containerPort: required"),
    (variant("command: [python]", "ports: [{containerPort: 80, name: sixteen-letters-x}]"), "not a port name"),
    (variant("command: [python]", "ports: [{containerPort: 80, name: a--b}]"), "no '--'"),
    (variant("command: [python]", "ports: [{containerPort: 80, name: '8080'}]"), "at least one letter"),
    (variant("command: [python]", "ports: [{containerPort: 80, name: web}, {containerPort: 81, name: web}]"),
     "ports[1].name: 'web' names another port"),
    (variant("command: [python]", "ports: [{containerPort: 80, protocol: HTTP}]"), "protocol: unsupported value 'HTTP'"),
    (variant("name: ok}", "name: ok, labels: {team: " + "v" * 64 + "}}"), "metadata.labels.team: 'vvvv"),
    (variant("name: ok}", "name: ok, labels: {team: -x}}"), "not a label value"),
    (variant("name: ok}", "name: ok, labels: {tëam: x}}"), "metadata.labels: 'tëam' is not a valid key"),
    (variant("name: ok}", "name: ok, labels: {a/b/c: x}}"), "'a/b/c' is not a valid key: [prefix/]name has at most one '/'"),
    (variant("name: ok}", "name: ok, labels: {/team: x}}"), "the prefix before '/' is empty"),
    (variant("name: ok}", "name: ok, labels: {Example.com/team: x}}"), "its prefix 'Example.com' is not a DNS-1123"),
    (variant("name: ok}", "name: ok, labels: {" + "k" * 64 + ": x}}"), "the name at most 63"),
    (variant("name: ok}", "name: ok, annotations: {bad key: x}}"), "metadata.annotations: 'bad key' is not a valid key"),
    (variant("name: ok}", "name: ok, annotations: {big: " + "x" * (256 * 1024) + "}}"), "more than the 262,144"),
    (variant("{spec: {containers", "{metadata: {labels: {a/b/c: x}}, spec: {containers"),
     "Master.template.metadata.labels: 'a/b/c'"),
    (variant("command: [python]", "env: [{name: '..x', value: a}]"), "env[0].name: '..x' is not a valid variable name"),
    (variant("command: [python]", "env: [{name: A, value: a, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]"),
     "env[0].valueFrom: must not be given with a non-empty value"),
    (variant("{spec: {containers: [{name: pytorch, image: img, command: [python]}]}}",
             "{spec: {containers: [{name: pytorch, image: img, command: [python]}, {name: Side_Car, image: i}]}}"),
     "containers[1].name: 'Side_Car' is not a DNS-1123 label"),
    (variant("{spec: {containers: [{name: pytorch, image: img, command: [python]}]}}",
             "{spec: {initContainers: [{name: pytorch, image: i}], containers: [{name: pytorch, image: img}]}}"),
     "containers[0].name: 'pytorch' names another container of the pod too"),
    (variant("command: [python]", "volumeMounts: [{name: data, mountPath: /data}]"),
     "volumeMounts[0].name: 'data' is no volume of the pod"),
    (variant("{spec: {containers", "{spec: {volumes: [{name: Data, emptyDir: {}}], containers"),
     "volumes[0].name: 'Data' is not a DNS-1123 label"),
    (variant("command: [python]", "resources: {requests: {cpu: '2'}, limits: {cpu: 1500m}}"),
     "requests.cpu: 2 must be at most its limit 1500m"),
    (variant("command: [python]", "resources: {requests: {nvidia.com/gpu: 1}}"), "limits.nvidia.com/gpu: required"),
]


@pytest.mark.parametrize("args, expected", AUDIT_SUBMIT_CASES,
                         ids=[" ".join(c[0])[:60] for c in AUDIT_SUBMIT_CASES])
def test_bad_command_line(cli, args, expected):
    command_line_refused(cli, args, expected)


@pytest.mark.parametrize("text, expected", AUDIT_APPLY_CASES, ids=[c[1][:40] for c in AUDIT_APPLY_CASES])
def test_bad_yaml(cli, text, expected):
    yaml_refused(cli, text, expected)


# ---- a NUL byte, on every way in, is refused before anything exists -----------------------------

NUL_JOB = variant("command: [python]", 'command: [python, -c, pass], env: [{name: A, value: "a\\0b"}]')


def assert_nothing_created(cli) -> None:
    listed = cli("list", "-A")
    assert listed.returncode == 0 and listed.stdout.startswith("no jobs"), listed.stdout
    assert not list(cli.home.rglob("job.json"))


@pytest.mark.parametrize("values, culprit", [
    ("env: {A: \"a\\0b\"}\n", "env[0].value: 'a\\x00b' contains a NUL"),
    ("command: [python, -c, pass, \"\\0\"]\n", "command[3]: '\\x00' contains a NUL"),
])
def test_a_nul_in_a_values_file_is_refused_and_creates_nothing(cli, values, culprit):
    """A shell argument cannot hold a NUL, so a values file (or --set) is how one reaches submit's options; it
    used to make the replica's exec fail inside the supervisor, which died ('supervisor (pid None) is gone')."""
    (cli.cwd / "values.yaml").write_text(values)
    command = [] if values.startswith("command") else ["--", "python", "-c", "pass"]
    assert_one_line_error(cli("submit", "pytorch", "--name", "nul", "-f", "values.yaml", *command), culprit)
    assert_nothing_created(cli)


@pytest.mark.parametrize("old, new, culprit", [
    ("command: [python]", 'command: [python, -c, pass], env: [{name: A, value: "a\\0b"}]', "env[0].value"),
    ("command: [python]", 'command: [python, -c, pass, "\\0"]', "command[3]"),
])
def test_apply_of_a_job_with_a_nul_creates_nothing(cli, old, new, culprit):
    assert_one_line_error(cli("apply", "-f", "-", input=variant(old, new)), culprit)
    assert_nothing_created(cli)


def test_the_python_api_refuses_a_nul_before_anything_exists(cli, monkeypatch):
    from trainctl.errors import InvalidArgument, UserError
    from trainctl.sdk.client import Client

    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.chdir(cli.cwd)
    client = Client(backend="local")
    calls = [(lambda: client.run(["python", "-c", "pass"], env={"A": "a\0b"}), "env[0].value"),
             (lambda: client.run(["python", "-c", "pass", "x\0"]), "command[3]"),
             (lambda: client.run(["python", "-c", "pass"], label=["team=a\0"]), "label team='a\\x00'"),
             (lambda: client.run(["python", "-c", "pass"], env={"A=B": "c"}), "the key 'A=B' holds '='"),
             (lambda: client.submit(yaml.safe_load(NUL_JOB)), "env[0].value")]
    for call, culprit in calls:
        with pytest.raises(UserError) as refused:
            call()
        assert culprit in str(refused.value) and "\n" not in str(refused.value), str(refused.value)
        assert isinstance(refused.value, InvalidArgument) or call is calls[-1][0]
    assert_nothing_created(cli)
