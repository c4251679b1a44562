"""A kubeconfig that cannot be used is one line naming the file and the problem."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from daemon_helpers import invoke

from asynckubelet import errors
from asynckubelet.cluster.client import KubeClient, load_kubeconfig

# A CA certificate is enough for the client to build its TLS context; it is never used.
CA_PEM = """-----BEGIN CERTIFICATE-----
MIIBdjCCAR2gAwIBAgIUQvTu2l0bi3zBd0xvKDtKxrRxG4UwCgYIKoZIzj0EAwIw
ETEPMA0GA1UEAwwGdGVzdGNhMB4XDTI2MDEwMTAwMDAwMFoXDTM2MDEwMTAwMDAw
MFowETEPMA0GA1UEAwwGdGVzdGNhMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE
-----END CERTIFICATE-----
"""


def kubeconfig(**user: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "node",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "node", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": user or {"token": "secret-token"}}],
    }


def write(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "node.kubeconfig"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return path


def problem(path: Path) -> str:
    with pytest.raises(errors.KubeconfigError) as caught:
        KubeClient.from_kubeconfig(path)
    message = str(caught.value)
    assert message.startswith(f"kubeconfig {path}: ")
    assert "\n" not in message
    assert "secret-token" not in message
    return message.removeprefix(f"kubeconfig {path}: ")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    assert problem(tmp_path / "nope") == "no such file"


def test_text_that_is_not_yaml_says_where(tmp_path: Path) -> None:
    assert problem(write(tmp_path, "clusters: [\n  - a: b\n  c")).startswith(
        "not valid YAML at line"
    )


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda c: c.pop("clusters"), "no clusters"),
        (lambda c: c.pop("current-context"), "no current-context (and none given)"),
        (lambda c: c.update({"current-context": "other"}), "context 'other' not found"),
        (
            lambda c: c["contexts"][0]["context"].update(cluster="gone"),
            "context 'node' names cluster 'gone', which is not there",
        ),
        (
            lambda c: c["clusters"][0]["cluster"].update(server="127.0.0.1:6443"),
            "cluster server '127.0.0.1:6443' is not an https:// URL",
        ),
        (
            lambda c: c["users"][0].update(user={}),
            "context 'node' has no credentials (a client certificate and key, or a token)",
        ),
    ],
)
def test_a_malformed_kubeconfig_names_what_is_wrong(
    tmp_path: Path, edit: object, expected: str
) -> None:
    config = kubeconfig()
    edit(config)  # type: ignore[operator]
    assert problem(write(tmp_path, config)) == expected


def test_a_list_instead_of_a_mapping_is_not_a_kubeconfig(tmp_path: Path) -> None:
    assert problem(write(tmp_path, "- a\n- b\n")).startswith("not a kubeconfig")


def test_a_certificate_without_its_key_is_refused(tmp_path: Path) -> None:
    data = base64.b64encode(CA_PEM.encode()).decode()
    config = kubeconfig(**{"client-certificate-data": data})
    assert problem(write(tmp_path, config)) == (
        "a client certificate needs its key, and a key its certificate"
    )


def test_certificate_data_that_cannot_be_loaded_is_refused(tmp_path: Path) -> None:
    garbage = base64.b64encode(b"not a certificate").decode()
    config = kubeconfig(**{"client-certificate-data": garbage, "client-key-data": garbage})
    assert problem(write(tmp_path, config)).startswith("its certificate or key cannot be used")


def test_a_token_kubeconfig_loads(tmp_path: Path) -> None:
    single = load_kubeconfig(write(tmp_path, kubeconfig()))
    assert single.cluster.server == "https://127.0.0.1:1"


@pytest.fixture
def no_engine_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` makes sure of its engine first; these tests end before the node needs it."""
    from asynckubelet.cli import provision

    monkeypatch.setattr(provision, "ensure_engine", lambda *args, **kwargs: None)


@pytest.mark.usefixtures("no_engine_start")
def test_serve_in_cluster_mode_prints_one_error_line_and_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "gone.kubeconfig"
    code, _, err = invoke(
        tmp_path,
        "serve",
        "--kubeconfig",
        str(missing),
        "--node-name",
        "n1",
        "--nice",
        "0",
        "--listen",
        "127.0.0.1:0",
    )
    assert code == 2
    assert err.strip().splitlines() == [f"error: kubeconfig {missing}: no such file"]


@pytest.mark.usefixtures("no_engine_start")
def test_serve_in_cluster_mode_refuses_labels_a_kubelet_may_not_set(tmp_path: Path) -> None:
    path = write(tmp_path, kubeconfig())
    code, _, err = invoke(
        tmp_path,
        "serve",
        "--kubeconfig",
        str(path),
        "--node-labels",
        "node-role.kubernetes.io/x=y",
        "--nice",
        "0",
    )
    assert code == 2
    assert err.strip() == (
        "error: unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: "
        "node-role.kubernetes.io/x"
    )
