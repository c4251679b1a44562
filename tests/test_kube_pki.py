"""The Kubernetes API's credentials and kubeconfig: a CA kept across starts, private keys
and the kubeconfig 0600 and written whole, a merge into ~/.kube/config that keeps the
user's entries, and links planted in the state dir or at ~/.kube/config never followed."""

from __future__ import annotations

import base64
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from asynckubelet import errors
from asynckubelet.api.kube import kubeconfigs, pki

SERVER = "https://127.0.0.1:6443"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def node_kubeconfig(state: Path) -> Path:
    credentials = pki.ensure_credentials(state, hosts=["127.0.0.1"])
    return kubeconfigs.write_kubeconfig(state, kubeconfigs.kubeconfig(credentials, server=SERVER))


def test_private_keys_are_0600_in_a_0700_directory(tmp_path: Path) -> None:
    pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    directory = tmp_path / pki.PKI_DIR
    assert mode(directory) == 0o700
    for name in ("ca.key", "apiserver.key", "admin.key"):
        assert mode(directory / name) == 0o600


def test_the_ca_and_client_certificate_are_kept_across_starts(tmp_path: Path) -> None:
    first = pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    second = pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    assert second == first


def test_another_listen_host_gets_a_new_serving_certificate_only(tmp_path: Path) -> None:
    first = pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    second = pki.ensure_credentials(tmp_path, hosts=["127.0.0.2"])
    assert (second.ca_cert, second.client_cert) == (first.ca_cert, first.client_cert)
    assert second.server_cert != first.server_cert


def test_kept_credentials_are_checked_without_making_anything(tmp_path: Path) -> None:
    made = pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    assert pki.load_current(tmp_path, hosts=["127.0.0.1"]) == made
    assert pki.load_current(tmp_path, hosts=["10.0.0.1"]) is None
    year = 365 * 24 * 3600
    assert pki.load_current(tmp_path, hosts=["127.0.0.1"], now=time.time() + year) is None


def test_a_serving_certificate_of_another_ca_is_not_taken_as_current(tmp_path: Path) -> None:
    pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    stranger = tmp_path / "stranger"
    pki.ensure_credentials(stranger, hosts=["127.0.0.1"])
    for name in ("apiserver.crt", "apiserver.key"):
        (tmp_path / pki.PKI_DIR / name).write_bytes((stranger / pki.PKI_DIR / name).read_bytes())
    assert pki.load_current(tmp_path, hosts=["127.0.0.1"]) is None
    remade = pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    assert pki.load_current(tmp_path, hosts=["127.0.0.1"]) == remade


@pytest.mark.anyio
async def test_the_daemon_has_its_credentials_made_by_a_process_of_their_own(
    tmp_path: Path,
) -> None:
    made = await pki.credentials(tmp_path, hosts=["127.0.0.1"])
    assert pki.load_current(tmp_path, hosts=["127.0.0.1"]) == made
    files = {p.name: p.stat().st_mtime_ns for p in (tmp_path / pki.PKI_DIR).iterdir()}
    assert await pki.credentials(tmp_path, hosts=["127.0.0.1"]) == made
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / pki.PKI_DIR).iterdir()} == files


@pytest.mark.anyio
async def test_credentials_that_cannot_be_made_name_the_directory(tmp_path: Path) -> None:
    (tmp_path / "pki").write_text("a file where a directory goes")
    with pytest.raises(errors.DaemonError, match="pki/apiserver"):
        await pki.credentials(tmp_path, hosts=[])


def test_a_ca_that_cannot_be_read_is_made_anew_with_a_new_client_certificate(
    tmp_path: Path,
) -> None:
    first = pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    (tmp_path / pki.PKI_DIR / "ca.crt").write_text("not a certificate")
    second = pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    assert second.ca_cert != first.ca_cert
    assert second.client_fingerprint != first.client_fingerprint
    ca = x509.load_pem_x509_certificate(second.ca_cert)
    x509.load_pem_x509_certificate(second.client_cert).verify_directly_issued_by(ca)


def test_the_serving_certificate_names_loopback_and_the_listen_host(tmp_path: Path) -> None:
    credentials = pki.ensure_credentials(tmp_path, hosts=["10.1.2.3", "node.example"])
    cert = x509.load_pem_x509_certificate(credentials.server_cert)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(credentials.ca_cert))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    addresses = {str(a) for a in names.get_values_for_type(x509.IPAddress)}
    assert addresses == {"127.0.0.1", "::1", "10.1.2.3"}
    assert set(names.get_values_for_type(x509.DNSName)) == {"localhost", "node.example"}


def test_the_client_certificate_is_an_admin_for_client_auth_only(tmp_path: Path) -> None:
    credentials = pki.ensure_credentials(tmp_path, hosts=[])
    cert = x509.load_pem_x509_certificate(credentials.client_cert)
    subject = {a.oid._name: a.value for a in cert.subject}
    assert subject == {"commonName": "asynckubelet-admin", "organizationName": "system:masters"}
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert [u._name for u in usage] == ["clientAuth"]


def test_the_kubeconfig_is_0600_and_reaches_the_api_with_the_client_pair(tmp_path: Path) -> None:
    credentials = pki.ensure_credentials(tmp_path, hosts=["127.0.0.1"])
    path = kubeconfigs.write_kubeconfig(
        tmp_path, kubeconfigs.kubeconfig(credentials, server=SERVER)
    )
    assert path == tmp_path / "kubeconfig"
    assert mode(path) == 0o600
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "asynckubelet"
    [cluster] = config["clusters"]
    assert cluster["cluster"]["server"] == SERVER
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == credentials.ca_cert
    [user] = config["users"]
    assert base64.b64decode(user["user"]["client-key-data"]) == credentials.client_key
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_link_planted_at_the_kubeconfig_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("theirs")
    state = tmp_path / "state"
    state.mkdir()
    (state / "kubeconfig").symlink_to(outside)
    node_kubeconfig(state)
    assert outside.read_text() == "theirs"
    assert stat.S_ISREG((state / "kubeconfig").lstat().st_mode)


def test_a_linked_pki_directory_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    state = tmp_path / "state"
    (state / "pki").mkdir(parents=True)
    (state / "pki" / "apiserver").symlink_to(outside)
    with pytest.raises(errors.DaemonError, match="credentials"):
        pki.ensure_credentials(state, hosts=[])
    assert list(outside.iterdir()) == []


USERS_CONFIG: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [
        {"name": "prod", "cluster": {"server": "https://prod:6443"}},
        {"name": "asynckubelet", "cluster": {"server": "https://old:1"}},
    ],
    "users": [{"name": "me", "user": {"token": "secret-token"}}],
    "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "me"}}],
    "current-context": "prod",
    "preferences": {"colors": True},
}


def test_merge_adds_the_nodes_context_and_keeps_every_other_entry(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    node_kubeconfig(state)
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(yaml.safe_dump(USERS_CONFIG))
    path = kubeconfigs.merge_kubeconfig(state, home=home)
    assert path == home / ".kube" / "config"
    assert mode(path) == 0o600
    merged = yaml.safe_load(path.read_text())
    assert [c["name"] for c in merged["clusters"]] == ["prod", "asynckubelet"]
    assert merged["clusters"][1]["cluster"]["server"] == SERVER
    assert [u["name"] for u in merged["users"]] == ["me", "asynckubelet"]
    assert merged["users"][0] == USERS_CONFIG["users"][0]
    assert [c["name"] for c in merged["contexts"]] == ["prod", "asynckubelet"]
    assert merged["current-context"] == "prod"
    assert merged["preferences"] == {"colors": True}


def test_merge_into_no_kubeconfig_makes_one_with_the_context_current(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    node_kubeconfig(state)
    path = kubeconfigs.merge_kubeconfig(state, home=home)
    merged = yaml.safe_load(path.read_text())
    assert merged["current-context"] == "asynckubelet"
    assert mode(path) == 0o600


def test_merge_refuses_a_linked_kube_config_and_leaves_its_target_alone(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    node_kubeconfig(state)
    target = tmp_path / "elsewhere"
    target.write_text(yaml.safe_dump(USERS_CONFIG))
    before = target.read_text()
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").symlink_to(target)
    with pytest.raises(errors.KubeconfigError, match="symbolic link"):
        kubeconfigs.merge_kubeconfig(state, home=home)
    assert target.read_text() == before
    assert (home / ".kube" / "config").is_symlink()


@pytest.mark.parametrize("text", ["[1, 2]", "clusters: {a: 1}", "a: [", "\xff"])
def test_merge_refuses_a_kubeconfig_it_cannot_read_and_changes_nothing(
    tmp_path: Path, text: str
) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    node_kubeconfig(state)
    (home / ".kube").mkdir(parents=True)
    config = home / ".kube" / "config"
    config.write_bytes(text.encode("latin-1"))
    with pytest.raises(errors.KubeconfigError, match=str(config)):
        kubeconfigs.merge_kubeconfig(state, home=home)
    assert config.read_bytes() == text.encode("latin-1")


def test_merge_without_a_running_node_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(errors.KubeconfigError, match="asynckubelet serve"):
        kubeconfigs.merge_kubeconfig(tmp_path / "state", home=tmp_path / "home")
    assert not (tmp_path / "home").exists()


def test_a_kubeconfig_too_large_is_refused_not_cut(tmp_path: Path) -> None:
    (tmp_path / "config").write_bytes(b"#" * (kubeconfigs.MAX_KUBECONFIG_BYTES + 1))
    with pytest.raises(errors.KubeconfigError, match="larger than"):
        kubeconfigs.read_kubeconfig(tmp_path, "config")
    assert os.path.getsize(tmp_path / "config") == kubeconfigs.MAX_KUBECONFIG_BYTES + 1


def test_the_kubeconfig_command_prints_the_path_and_merges_when_asked(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from asynckubelet.cli.app import app

    state, home = tmp_path / "state", tmp_path / "home"
    runner = CliRunner()
    env = {"HOME": str(home), "ASYNCKUBELET_STATE_DIR": str(state)}
    missing = runner.invoke(app, ["kubeconfig"], env=env)
    assert missing.exit_code == 1
    assert "asynckubelet serve" in missing.output
    node_kubeconfig(state)
    printed = runner.invoke(app, ["kubeconfig"], env=env)
    assert (printed.exit_code, printed.stdout) == (0, f"{state / 'kubeconfig'}\n")
    assert not (home / ".kube").exists()
    merged = runner.invoke(app, ["kubeconfig", "--merge"], env=env)
    assert merged.exit_code == 0, merged.output
    assert "use-context asynckubelet" in merged.stdout
    config = yaml.safe_load((home / ".kube" / "config").read_text())
    assert [c["name"] for c in config["contexts"]] == ["asynckubelet"]
