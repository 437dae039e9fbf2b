"""submit writes an explicit runPolicy.backoffLimit, so no job it makes restarts a crashing replica forever.

Who decides, highest first: a template that writes its own value, --backoff-limit, a values
file, the default (3). ``apply -f`` leaves a YAML exactly as written, with or without one.
"""

import json
import shlex

import pytest
import yaml

from tests.conftest import CLI, REPO
from trainctl.submit.render import DEFAULT_BACKOFF_LIMIT


def backoff_limit(cli, *args: str):
    (cli.cwd / "train.py").write_text("")  # a dry run checks, as the submit does, that the script is there
    result = cli("submit", "pytorch", "--dry-run", "-o", "json", "--name", "job", *args, "--", "python", "train.py")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["spec"].get("runPolicy", {}).get("backoffLimit")


def test_default_is_explicit_and_finite(cli):
    assert DEFAULT_BACKOFF_LIMIT == 3
    assert backoff_limit(cli) == 3


@pytest.mark.parametrize("value", ["0", "7"])
def test_flag_overrides_the_default(cli, value):
    assert backoff_limit(cli, "--backoff-limit", value) == int(value)


def test_values_file_overrides_the_default_and_the_flag_overrides_it(cli):
    (cli.cwd / "values.yaml").write_text("backoff_limit: 9\n")
    assert backoff_limit(cli, "-f", "values.yaml") == 9
    assert backoff_limit(cli, "-f", "values.yaml", "--backoff-limit", "1") == 1


def test_a_template_with_its_own_backoff_limit_keeps_it(cli):
    builtin = (REPO / "templates" / "_job.yaml.j2").read_text()
    assert "runPolicy: {{ run_policy }}" in builtin
    (cli.cwd / "_job.yaml.j2").write_text(builtin.replace("runPolicy: {{ run_policy }}", "runPolicy: {backoffLimit: 11}"))
    (cli.cwd / "mine.yaml.j2").write_text('{%- extends "_job.yaml.j2" %}\n')
    assert backoff_limit(cli, "--template", str(cli.cwd / "mine.yaml.j2")) == 11


def test_apply_keeps_a_yaml_without_backoff_limit_as_written(cli):
    job = yaml.safe_load((REPO / "examples" / "jax" / "job.yaml").read_text())
    del job["spec"]["runPolicy"]
    result = cli("apply", "-f", "-", "--dry-run", "--no-preflight", "-o", "json", input=yaml.safe_dump(job))
    assert result.returncode == 0, result.stderr
    assert "runPolicy" not in json.loads(result.stdout)["spec"]


@pytest.mark.parametrize("path", sorted((REPO / "examples").glob("*/job.yaml")), ids=lambda p: p.parent.name)
def test_example_job_files_are_what_their_first_line_renders(cli, path):
    """Each examples/*/job.yaml starts with the submit command that renders it; rerunning it (from the repository's
    root, where the dry run finds its script) gives the same file."""
    first, _, body = path.read_text().partition("\n")
    assert first.startswith("# trainctl submit ") and "--dry-run" in first, first
    result = CLI(cli.home, REPO)(*shlex.split(first.removeprefix("# trainctl ")), timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == body
    assert yaml.safe_load(body)["spec"]["runPolicy"]["backoffLimit"] == DEFAULT_BACKOFF_LIMIT
