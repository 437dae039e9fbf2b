"""Project templates: `templates show > file` round trip, and every broken template is one line naming file and line."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture
def project(cli):
    directory = cli.cwd / ".trainctl" / "templates"
    directory.mkdir(parents=True)
    return directory


def submit_dry_run(cli) -> subprocess.CompletedProcess:
    (cli.cwd / "train.py").write_text("")  # a dry run checks, as the submit does, that the script is there
    return cli("submit", "pytorch", "--name", "t", "--dry-run", "--", "python", "train.py")


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_show_redirected_into_the_project_template_writes_the_builtin_one(cli, project):
    target = project / "pytorchjob.yaml.j2"
    with open(target, "w") as stdout:  # what the shell does for `> target`: truncate, then run
        shown = subprocess.run([sys.executable, "-m", "trainctl", "templates", "show", "pytorch"], cwd=cli.cwd,
                               env=cli.env, stdout=stdout, stderr=subprocess.PIPE, text=True)
    assert shown.returncode == 0, shown.stderr
    assert 'extends "_job.yaml.j2"' in target.read_text()
    assert "PyTorchJob" in submit_dry_run(cli).stdout
    assert str(target) in cli("templates", "list").stdout


def test_an_empty_project_template_is_refused_naming_the_file(cli, project):
    (project / "pytorchjob.yaml.j2").write_text("")
    assert_one_line_error(submit_dry_run(cli), str(project / "pytorchjob.yaml.j2"), "is empty")


def test_a_template_that_renders_no_mapping_is_refused_naming_the_file(cli, project):
    (project / "pytorchjob.yaml.j2").write_text("- just\n- a list\n")
    assert_one_line_error(submit_dry_run(cli), str(project / "pytorchjob.yaml.j2"), "not a mapping")


def test_an_undefined_variable_names_the_file_and_line(cli, project):
    (project / "pytorchjob.yaml.j2").write_text(
        '{%- extends "_job.yaml.j2" %}\n{%- block kind_spec %}\n  extra: {{ no_such_value }}\n{%- endblock %}\n')
    assert_one_line_error(submit_dry_run(cli), f"{project / 'pytorchjob.yaml.j2'}:3", "no_such_value")


@pytest.mark.parametrize("text, line, problem", [
    ("kind: x\nname: {{ name }\n", 2, "TemplateSyntaxError"),
    ("kind: x\n\nname: {{ name | no_such_filter }}\n", 3, "no_such_filter"),
    ('{% extends "missing.yaml.j2" %}\n', 1, "missing.yaml.j2"),
    ("kind: x\nname: {{ name.__class__ }}\n", 2, "unsafe"),
])
def test_any_template_error_names_the_file_and_line(cli, project, text, line, problem):
    (project / "pytorchjob.yaml.j2").write_text(text)
    assert_one_line_error(submit_dry_run(cli), f"{project / 'pytorchjob.yaml.j2'}:{line}", problem)


def test_an_error_in_a_given_template_file_names_it(cli, tmp_path):
    given = tmp_path / "mine.yaml.j2"
    given.write_text("kind: {{ kind }}\nbroken: {% if %}\n")
    result = cli("submit", "pytorch", "--template", str(given), "--dry-run", "--", "python", "train.py")
    assert_one_line_error(result, f"{given}:2")
