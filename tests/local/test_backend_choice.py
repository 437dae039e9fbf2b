"""Which backend the API picks: explicit choice, $TRAINCTL_BACKEND, then a configured cluster, else local."""

from __future__ import annotations

import pytest

from trainctl.errors import CLI, UserError, speaking
from trainctl.sdk.client import Client, choose_backend


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    for variable in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "TRAINCTL_BACKEND"):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path


def test_local_when_no_cluster_is_configured():
    assert choose_backend(None, None, None) == "local"


def test_kubernetes_when_a_kubeconfig_exists(no_cluster, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(no_cluster / "missing.yaml"))
    assert choose_backend(None, None, None) == "local"  # a $KUBECONFIG naming no file is no cluster
    (no_cluster / ".kube").mkdir()
    (no_cluster / ".kube" / "config").write_text("apiVersion: v1\n")
    assert choose_backend(None, None, None) == "kubernetes"


def test_kubernetes_inside_a_pod_or_with_a_context(monkeypatch):
    assert choose_backend(None, "prod", None) == "kubernetes"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert choose_backend(None, None, None) == "kubernetes"


def test_explicit_choice_and_environment_override_detection(monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert choose_backend("local", None, None) == "local"
    monkeypatch.setenv("TRAINCTL_BACKEND", "local")
    assert choose_backend(None, None, None) == "local"
    monkeypatch.setenv("TRAINCTL_BACKEND", "cloud")
    with pytest.raises(UserError, match="TRAINCTL_BACKEND"):
        choose_backend(None, None, None)


def test_local_with_a_context_is_refused():
    with speaking(CLI), pytest.raises(UserError, match="--local cannot be combined with --context"):
        choose_backend("local", "prod", None)
    with pytest.raises(UserError, match="backend='local' cannot be combined with context"):
        choose_backend("local", "prod", None)


def test_local_client_names_its_backend():
    assert Client("local").backend.description == "local"


def test_a_client_that_chose_its_backend_says_which_and_why(no_cluster, capsys):
    client = Client()
    said = capsys.readouterr().err
    assert said == "trainctl: Client() runs jobs on this machine (the local backend): no kubeconfig found\n", said
    assert repr(client) == "<trainctl Client: local backend (no kubeconfig found)>"
    (no_cluster / ".kube").mkdir()
    (no_cluster / ".kube" / "config").write_text("apiVersion: v1\n")
    assert repr(Client()) == f"<trainctl Client: kubernetes backend (kubeconfig {no_cluster / '.kube' / 'config'})>"
    assert "Client() runs jobs on Kubernetes" in capsys.readouterr().err


def test_a_client_told_its_backend_is_silent(capsys):
    assert repr(Client("local")) == "<trainctl Client: local backend (asked for)>"
    assert capsys.readouterr().err == ""
