"""Volume rules that need no Docker: hostPath checks, the atomic writer, payloads, subPath."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.payloads import volume_payload
from asynckubelet.node.tokens import TokenRequest
from asynckubelet.node.volumes import (
    VolumeManager,
    check_host_path,
    prepare_sub_path,
    write_atomic,
)
from asynckubelet.runtime.env import PodContext


@pytest.mark.parametrize(
    ("kind", "make", "message"),
    [
        ("Directory", "file", "hostPath type check failed: {p} is not a directory"),
        ("Directory", None, "hostPath type check failed: {p} is not a directory"),
        ("File", "dir", "hostPath type check failed: {p} is not a file"),
        ("File", None, "hostPath type check failed: {p} is not a file"),
        ("Socket", "file", "hostPath type check failed: {p} is not a socket file"),
        ("CharDevice", "file", "hostPath type check failed: {p} is not a character device"),
        ("BlockDevice", "file", "hostPath type check failed: {p} is not a block device"),
        ("DirectoryOrCreate", "file", "hostPath type check failed: {p} is not a directory"),
        ("FileOrCreate", "dir", "hostPath type check failed: {p} is not a file"),
        ("Nonsense", "file", "Nonsense is an invalid volume type"),
    ],
)
def test_a_host_path_of_the_wrong_kind_is_refused_with_the_kubelets_message(
    tmp_path: Path, kind: str, make: str | None, message: str
) -> None:
    path = tmp_path / "thing"
    if make == "file":
        path.write_text("")
    elif make == "dir":
        path.mkdir()
    with pytest.raises(errors.VolumeError) as e:
        check_host_path(str(path), kind)
    assert str(e.value) == message.format(p=path)


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("", "/dev/null"),
        ("CharDevice", "/dev/null"),
        ("Directory", "/"),
        ("File", "/etc/hostname"),
    ],
)
def test_a_host_path_of_the_right_kind_passes(kind: str, path: str) -> None:
    check_host_path(path, kind)


def test_a_unix_socket_passes_the_socket_check(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        check_host_path(str(path), "Socket")


def test_directory_or_create_makes_the_directory_with_mode_0755(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b"
    check_host_path(str(path), "DirectoryOrCreate")
    assert path.is_dir()
    assert (path.stat().st_mode & 0o777) == 0o755 & ~_umask()


def test_file_or_create_makes_an_empty_file_but_not_its_parent(tmp_path: Path) -> None:
    check_host_path(str(tmp_path / "f"), "FileOrCreate")
    assert (tmp_path / "f").read_bytes() == b""
    with pytest.raises(errors.VolumeError, match="no such file or directory"):
        check_host_path(str(tmp_path / "missing" / "f"), "FileOrCreate")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_atomic_writer_links_visible_names_through_the_data_link(tmp_path: Path) -> None:
    write_atomic(tmp_path, {"a": (b"1", 0o644), "dir/b": (b"2", 0o600)})
    assert os.readlink(tmp_path / "a") == "..data/a"
    assert os.readlink(tmp_path / "dir") == "..data/dir"
    assert os.readlink(tmp_path / "..data").startswith("..20")
    assert (tmp_path / "dir" / "b").read_bytes() == b"2"
    assert ((tmp_path / "dir" / "b").stat().st_mode & 0o777) == 0o600


def test_the_atomic_writer_replaces_the_payload_and_removes_what_is_gone(tmp_path: Path) -> None:
    write_atomic(tmp_path, {"a": (b"1", 0o644), "b": (b"2", 0o644)})
    first = os.readlink(tmp_path / "..data")
    assert write_atomic(tmp_path, {"a": (b"new", 0o644)})
    assert (tmp_path / "a").read_bytes() == b"new"
    assert not (tmp_path / "b").is_symlink()
    assert not (tmp_path / first).exists()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("..")) == ["a"]


def test_the_atomic_writer_writes_nothing_when_the_payload_is_unchanged(tmp_path: Path) -> None:
    write_atomic(tmp_path, {"a": (b"1", 0o644)})
    before = os.readlink(tmp_path / "..data")
    assert not write_atomic(tmp_path, {"a": (b"1", 0o644)})
    assert os.readlink(tmp_path / "..data") == before


def _pod_with(volume_yaml: str) -> Pod:
    text = f"""
apiVersion: v1
kind: Pod
metadata: {{name: p, labels: {{b: "2", a: "1"}}}}
spec:
  volumes: [{volume_yaml}]
  containers: [{{name: c, image: x, resources: {{limits: {{cpu: 500m}}}}}}]
"""
    return load_manifests_text(text).pods[0]


CTX = PodContext(
    configmaps={"cm": {"k1": "v1", "k2": "v2"}},
    binary_configmaps={"cm": {"blob": b"\xff\x00\xfe\x01"}},
    secrets={"sec": {"user": b"admin"}},
)


@pytest.mark.parametrize(
    ("volume", "payload"),
    [
        (
            "{name: v, configMap: {name: cm}}",
            {"k1": (b"v1", 0o644), "k2": (b"v2", 0o644), "blob": (b"\xff\x00\xfe\x01", 0o644)},
        ),
        (
            "{name: v, configMap: {name: cm, items: [{key: blob, path: b.bin}]}}",
            {"b.bin": (b"\xff\x00\xfe\x01", 0o644)},
        ),
        (
            "{name: v, projected: {sources: [{configMap: {name: cm, items: "
            "[{key: blob, path: raw}]}}]}}",
            {"raw": (b"\xff\x00\xfe\x01", 0o644)},
        ),
        (
            "{name: v, configMap: {name: cm, defaultMode: 0400, items: [{key: k2, path: x/y}]}}",
            {"x/y": (b"v2", 0o400)},
        ),
        (
            "{name: v, secret: {secretName: sec, items: [{key: user, path: u, mode: 0600}]}}",
            {"u": (b"admin", 0o600)},
        ),
        ("{name: v, configMap: {name: nope, optional: true}}", {}),
        (
            "{name: v, configMap: {name: cm, optional: true, items: [{key: zz, path: z}]}}",
            {},
        ),
        (
            "{name: v, downwardAPI: {items: [{path: l, fieldRef: {fieldPath: metadata.labels}}]}}",
            {"l": (b'a="1"\nb="2"', 0o644)},
        ),
        (
            "{name: v, downwardAPI: {items: [{path: c, resourceFieldRef: "
            "{containerName: c, resource: limits.cpu, divisor: 1m}}]}}",
            {"c": (b"500", 0o644)},
        ),
        (
            "{name: v, projected: {defaultMode: 0440, sources: [{configMap: {name: cm, items: "
            "[{key: k1, path: one}]}}, {secret: {name: sec}}]}}",
            {"one": (b"v1", 0o440), "user": (b"admin", 0o440)},
        ),
    ],
)
def test_volume_payloads_follow_items_modes_and_optional(
    volume: str, payload: dict[str, tuple[bytes, int]]
) -> None:
    pod = _pod_with(volume)
    assert pod.spec is not None
    assert pod.spec.volumes is not None
    assert volume_payload(pod, pod.spec.volumes[0], CTX) == payload


@pytest.mark.parametrize(
    ("volume", "message"),
    [
        ("{name: v, configMap: {name: nope}}", 'configmap "nope" not found'),
        ("{name: v, secret: {secretName: nope}}", 'secret "nope" not found'),
        (
            "{name: v, configMap: {name: cm, items: [{key: zz, path: z}]}}",
            "configmap references non-existent config key: zz",
        ),
        (
            "{name: v, secret: {secretName: sec, items: [{key: zz, path: z}]}}",
            "secret references non-existent secret key: zz",
        ),
    ],
)
def test_missing_sources_that_are_not_optional_fail_with_the_kubelets_message(
    volume: str, message: str
) -> None:
    pod = _pod_with(volume)
    assert pod.spec is not None
    assert pod.spec.volumes is not None
    with pytest.raises(errors.VolumeError) as e:
        volume_payload(pod, pod.spec.volumes[0], CTX)
    assert str(e.value) == message


def test_a_sub_path_is_created_as_a_directory_inside_the_volume(tmp_path: Path) -> None:
    made = prepare_sub_path(str(tmp_path), "a/b", "v", "c")
    assert made == str(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()


def test_a_sub_path_whose_symlink_leads_out_of_the_volume_is_refused(tmp_path: Path) -> None:
    (tmp_path / "vol").mkdir()
    os.symlink("/etc", tmp_path / "vol" / "escape")
    with pytest.raises(errors.ContainerConfigError, match="failed to prepare subPath"):
        prepare_sub_path(str(tmp_path / "vol"), "escape", "v", "c")


def test_only_the_termination_logs_of_the_current_and_previous_instance_are_kept(
    tmp_path: Path,
) -> None:
    pod = _pod_with("{name: v, emptyDir: {}}")
    assert pod.spec is not None
    container = pod.spec.containers[0]
    manager = VolumeManager(root=tmp_path, node_name="n", use_tmpfs=False)

    async def starts() -> list[str]:
        counts = (0, 1, 2, 3, 3)
        return [await manager.termination_log(pod, container, restart_count=n) for n in counts]

    paths = anyio.run(starts)
    assert [Path(p).exists() for p in paths] == [False, False, True, False, True]
    assert all((Path(p).stat().st_mode & 0o777) == 0o666 for p in (paths[2], paths[4]))


def test_a_projected_token_is_written_at_its_path_with_the_volumes_mode() -> None:
    pod = _pod_with(
        "{name: v, projected: {defaultMode: 0440, sources: [{serviceAccountToken: "
        "{path: tok, audience: vault, expirationSeconds: 7200}}]}}"
    )
    assert pod.spec is not None
    assert pod.spec.volumes is not None
    seen: list[TokenRequest] = []

    def tokens(request: TokenRequest) -> str:
        seen.append(request)
        return "header.claims.signature"

    payload = volume_payload(pod, pod.spec.volumes[0], CTX, tokens=tokens)
    assert payload == {"tok": (b"header.claims.signature", 0o440)}
    assert seen == [
        TokenRequest(
            namespace="default",
            service_account="default",
            pod_name="p",
            pod_uid=(pod.metadata.uid or "") if pod.metadata else "",
            audiences=("vault",),
            expiration_seconds=7200,
        )
    ]


@pytest.mark.anyio
async def test_a_projected_token_is_replaced_through_the_atomic_writer_at_80_percent(
    tmp_path: Path,
) -> None:
    pod = _pod_with(
        "{name: v, projected: {sources: "
        "[{serviceAccountToken: {path: tok, expirationSeconds: 1000}}]}}"
    )
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    manager = VolumeManager(root=tmp_path / "pods", node_name="n", use_tmpfs=False)
    manager.tokens.clock = lambda: now[0]
    uid = (pod.metadata.uid or "") if pod.metadata else ""
    directory = manager.volume_dir(uid, "projected", "v")

    async def setup() -> tuple[str, str]:
        await manager.setup_pod(pod, context=CTX, docker=None)  # type: ignore[arg-type]
        return (directory / "tok").read_text(), os.readlink(directory / "..data")

    first = await setup()
    now[0] += timedelta(seconds=700)
    assert await setup() == first
    now[0] += timedelta(seconds=110)
    token, data = await setup()
    assert token != first[0]
    assert data != first[1]
    assert (tmp_path / "serviceaccount" / "signing-key.pub").exists()
