"""The kubeconfig context a command used is kept parsed for the next one (trainctl/kube/kubeconfig_cache.py):
privately, for that very file only, and never at the price of a wrong or a leaked credential."""

import json
import os
import stat
import subprocess
import sys

import pytest

from trainctl.kube import config, kubeconfig_cache

KUBECONFIG = """apiVersion: v1
kind: Config
current-context: one
clusters:
- {name: a, cluster: {server: "https://a.example:6443", insecure-skip-tls-verify: true}}
- {name: b, cluster: {server: "https://b.example:6443", insecure-skip-tls-verify: true}}
users:
- {name: ua, user: {token: secret-a}}
- {name: ub, user: {token: secret-b}}
contexts:
- {name: one, context: {cluster: a, user: ua, namespace: team-a}}
- {name: two, context: {cluster: b, user: ub}}
"""


@pytest.fixture
def kubeconfig(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINCTL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRAINCTL_KUBECONFIG_CACHE", raising=False)
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    path.chmod(0o600)
    return path


def entries(path) -> list:
    folder = kubeconfig_cache.cache_dir()
    return sorted(folder.glob("*.json")) if folder.exists() else []


def test_the_context_is_kept_privately_and_only_that_context(kubeconfig):
    first = config.from_kubeconfig(None, str(kubeconfig))
    [entry] = entries(kubeconfig)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and stat.S_IMODE(entry.parent.stat().st_mode) == 0o700
    text = entry.read_text()
    assert "secret-a" in text and "secret-b" not in text and "b.example" not in text  # one context's entries
    again = config.from_kubeconfig(None, str(kubeconfig))
    assert (again.server, again.namespace, again.token) == (first.server, first.namespace, first.token)
    assert (again.server, again.namespace, again.token) == ("https://a.example:6443", "team-a", "secret-a")
    other = config.from_kubeconfig("two", str(kubeconfig))
    assert (other.server, other.token) == ("https://b.example:6443", "secret-b") and len(entries(kubeconfig)) == 2


def test_an_edited_or_replaced_kubeconfig_is_read_again(kubeconfig):
    config.from_kubeconfig(None, str(kubeconfig))
    kubeconfig.write_text(KUBECONFIG.replace("secret-a", "rotated-a"))
    assert config.from_kubeconfig(None, str(kubeconfig)).token == "rotated-a"
    replacement = kubeconfig.with_name("new")
    replacement.write_text(KUBECONFIG.replace("current-context: one", "current-context: two"))
    os.replace(replacement, kubeconfig)
    assert config.from_kubeconfig(None, str(kubeconfig)).token == "secret-b"


def test_an_entry_that_is_not_private_or_not_ours_is_not_trusted(kubeconfig):
    config.from_kubeconfig(None, str(kubeconfig))
    [entry] = entries(kubeconfig)
    forged = json.loads(entry.read_text())
    forged["chosen"]["user"]["token"] = "forged"
    entry.write_text(json.dumps(forged))
    entry.chmod(0o644)  # anyone could have written it
    assert config.from_kubeconfig(None, str(kubeconfig)).token == "secret-a"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600  # and it was written anew, privately
    entry.unlink()
    entry.symlink_to(kubeconfig.parent / "elsewhere.json")
    assert config.from_kubeconfig(None, str(kubeconfig)).token == "secret-a"


def test_a_shared_cache_directory_is_not_written(kubeconfig):
    folder = kubeconfig_cache.cache_dir()
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    assert config.from_kubeconfig(None, str(kubeconfig)).token == "secret-a"
    assert list(folder.iterdir()) == []


def test_it_can_be_turned_off_and_a_yaml_only_value_is_never_kept(kubeconfig, monkeypatch):
    monkeypatch.setenv("TRAINCTL_KUBECONFIG_CACHE", "off")
    config.from_kubeconfig(None, str(kubeconfig))
    assert entries(kubeconfig) == []
    monkeypatch.delenv("TRAINCTL_KUBECONFIG_CACHE")
    kubeconfig.write_text(KUBECONFIG.replace("namespace: team-a", "namespace: team-a, since: 2001-01-01"))
    config.from_kubeconfig(None, str(kubeconfig))  # a date JSON would turn into text
    assert entries(kubeconfig) == []


def test_a_command_with_the_context_kept_does_not_import_yaml(kubeconfig):
    probe = ("import json, sys; from trainctl.kube import config; config.from_kubeconfig(None, sys.argv[1]); "
             "print(json.dumps('yaml' in sys.modules))")
    env = {**os.environ, "TRAINCTL_HOME": os.environ["TRAINCTL_HOME"]}
    runs = [subprocess.run([sys.executable, "-c", probe, str(kubeconfig)], capture_output=True, text=True, env=env,
                           timeout=60) for _ in range(2)]
    assert [json.loads(run.stdout) for run in runs] == [True, False], [run.stderr for run in runs]


def test_entries_not_written_for_a_week_are_removed_when_another_is_written(kubeconfig):
    config.from_kubeconfig(None, str(kubeconfig))
    [old] = entries(kubeconfig)
    week_ago = old.stat().st_mtime - kubeconfig_cache.STALE_S - 60
    os.utime(old, (week_ago, week_ago))
    config.from_kubeconfig("two", str(kubeconfig))
    assert old not in entries(kubeconfig) and len(entries(kubeconfig)) == 1
