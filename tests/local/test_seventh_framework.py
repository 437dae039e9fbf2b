"""Adding a framework is one module in trainctl/frameworks/ plus one template, and nothing else.

The test copies trainctl and its templates, adds ``frameworks/toy.py`` (a ToyJob: a Coordinator and
Workers, with an env of its own, a kind option and a spec field) and ``templates/toyjob.yaml.j2``, and
runs the copy as a user would: the registry finds the module by itself, ``submit --help`` explains
its ``--workers``, ``--dry-run`` renders and validates a ToyJob, another kind refuses its option, and a
2-replica job runs on the local backend, where a toy launcher (``toy_launcher.py``, the part a
framework's own launcher plays) has every worker reach the coordinator at the address the
framework's env gives it. Every other file of the copy is the original's, byte for byte.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

from tests.conftest import CLI, REPO

TOY_FRAMEWORK = '''
"""ToyJob: Coordinator 1 + Worker N-1; each replica finds the coordinator in TOY_COORDINATOR."""

from trainctl.frameworks._schema import STRING
from trainctl.frameworks.base import Framework, FunctionLaunch, KindOption, env_var


class Toy(Framework):
    kind = "ToyJob"
    name = "toy"
    replica_spec_field = "toyReplicaSpecs"
    replica_types = ("Coordinator", "Worker")
    container = "toy"
    port_name = "toy-port"
    port = 7777
    restart_policy = "Never"
    workers_help = "Coordinator 1 + Worker N-1 (a toy)"
    default_image = "docker.io/library/python:3.11-slim"
    spec_properties = {"greeting": STRING}
    leader_types = ("Coordinator",)
    options = (KindOption("greeting", str, "what every replica says first."),)
    function_launch = FunctionLaunch(rank_variables=("TOY_RANK",))

    def topology(self, workers, **options):
        return {"Coordinator": 1, "Worker": workers - 1} if workers > 1 else {"Coordinator": 1}

    def master_role(self, replica_types):
        return "Coordinator"

    def status_role(self, replica_types):
        return "Coordinator"

    def env(self, job, rtype, index, network):
        rank = index if rtype == "Coordinator" else index + 1
        return [env_var("TOY_RANK", rank), env_var("TOY_WORLD", job.total_replicas),
                env_var("TOY_GREETING", job.spec.get("greeting") or "hello"),
                env_var("TOY_COORDINATOR", f"{network.host(job, 'Coordinator', 0)}:"
                                           f"{network.port(job, 'Coordinator', 0)}")]


FRAMEWORK = Toy()
'''

TOY_TEMPLATE = '''\
{#- ToyJob: Coordinator 1 + Worker N-1; the operator adds TOY_RANK, TOY_WORLD, TOY_COORDINATOR. -#}
{%- extends "_job.yaml.j2" %}
{%- block kind_spec %}
{%- if greeting is not none %}
  greeting: {{ greeting }}
{%- endif %}
{%- endblock %}
'''

TOY_LAUNCHER = '''
import os, socket, sys, time

rank, world = int(os.environ["TOY_RANK"]), int(os.environ["TOY_WORLD"])
host, port = os.environ["TOY_COORDINATOR"].rsplit(":", 1)
print(f"{os.environ['TOY_GREETING']} from rank {rank} of {world}", flush=True)
if rank == 0:
    server = socket.create_server((host, int(port)))
    met = sorted(int(server.accept()[0].recv(16)) for _ in range(world - 1))
    print(f"coordinator met ranks {met}", flush=True)
else:
    for _ in range(300):
        try:
            socket.create_connection((host, int(port))).sendall(str(rank).encode())
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit("the coordinator never answered")
'''


def tree_with_a_toy_framework(root: Path) -> Path:
    """A copy of trainctl and its templates with the toy framework's module and template added."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "trainctl", root / "trainctl", ignore=ignore)
    shutil.copytree(REPO / "templates", root / "templates", ignore=ignore)
    (root / "trainctl" / "frameworks" / "toy.py").write_text(textwrap.dedent(TOY_FRAMEWORK))
    (root / "templates" / "toyjob.yaml.j2").write_text(TOY_TEMPLATE)
    return root


def files_of(root: Path, *folders: str) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for folder in folders for path in (root / folder).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


def test_a_seventh_framework_is_one_module_and_one_template(tmp_path):
    tree = tree_with_a_toy_framework(tmp_path / "tree")
    added = set(files_of(tree, "trainctl", "templates")) - set(files_of(REPO, "trainctl", "templates"))
    assert added == {"trainctl/frameworks/toy.py", "templates/toyjob.yaml.j2"}
    assert all(files_of(REPO, "trainctl", "templates")[name] == data
               for name, data in files_of(tree, "trainctl", "templates").items() if name not in added)
    project = tmp_path / "project"
    project.mkdir()
    (project / "toy_launcher.py").write_text(TOY_LAUNCHER)
    cli = CLI(tmp_path / "home", project)
    cli.env["PYTHONPATH"] = str(tree)

    assert "toy: Coordinator 1 + Worker N-1 (a toy)" in " ".join(cli("submit", "--help").stdout.split())
    dry = cli("submit", "toy", "--workers", "2", "--greeting", "ahoy", "--name", "toy", "--dry-run", "-o", "json",
              "--", "python", "toy_launcher.py")
    assert dry.returncode == 0, dry.stderr
    job = json.loads(dry.stdout)
    assert (job["kind"], job["spec"]["greeting"]) == ("ToyJob", "ahoy")
    assert {rtype: spec["replicas"] for rtype, spec in job["spec"]["toyReplicaSpecs"].items()} == \
        {"Coordinator": 1, "Worker": 1}
    other_kind = cli("submit", "pytorch", "--greeting", "ahoy", "--dry-run", "--", "python", "toy_launcher.py")
    assert other_kind.returncode == 2 and "--greeting applies to toy jobs only" in other_kind.stderr

    ran = cli("submit", "toy", "--workers", "2", "--greeting", "ahoy", "--name", "toy", "--wait",
              "--", "python", "toy_launcher.py", timeout=180)
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    logs = cli("logs", "toy").stdout
    assert re.search(r"^coordinator-0 +\| coordinator met ranks \[1\]$", logs, re.M), logs
    assert re.search(r"^worker-0 +\| ahoy from rank 1 of 2$", logs, re.M), logs
    status = cli("status", "toy", "-o", "json")
    assert json.loads(status.stdout)["status"]["conditions"][-1]["type"] == "Succeeded"
