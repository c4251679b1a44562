"""What a pod can make the volume code do on the host: nothing outside the pod's volumes.

A container writes into its ``emptyDir`` and may leave links there; a manifest names
``items[].path``, modes and the pod's UID. None of these may lead the atomic writer, the
subPath preparation or the pod directory removal out of the volume root.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import cast

import anyio
import builders
import pytest
from lightkube.models.core_v1 import Container, Pod

from asynckubelet import errors
from asynckubelet.node import subpath
from asynckubelet.node.volumes import VolumeManager, write_atomic
from asynckubelet.runtime.env import PodContext


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "host"
    path.mkdir()
    (path / "passwd").write_text("root:x:0:0")
    (path / "sub").mkdir()
    (path / "sub" / "f").write_text("kept")
    return path


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    path = tmp_path / "pods" / "vol"
    path.mkdir(parents=True)
    return path


def _tree(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): p.read_text() if p.is_file() else "<dir>"
        for p in sorted(path.rglob("*"))
    }


HOST = {"passwd": "root:x:0:0", "sub": "<dir>", "sub/f": "kept"}


# -- the atomic writer -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../../host/passwd", "invalid path: must not contain '..': ../../host/passwd"),
        ("a/../../b", "invalid path: must not contain '..': a/../../b"),
        ("/etc/cron.d/x", "invalid path: must be relative path: /etc/cron.d/x"),
        ("..data", "invalid path: must not start with '..': ..data"),
        ("..2026_01_01_00_00_00.0123456789/x", "invalid path: must not start with '..'"),
        ("", "invalid path: must not be empty: ''"),
        ("x" * 256, "invalid path: filenames must be less than or equal to 255 characters"),
    ],
)
def test_a_payload_path_that_could_leave_the_volume_is_refused_and_nothing_is_written(
    volume: Path, outside: Path, path: str, message: str
) -> None:
    with pytest.raises(errors.VolumeError, match=message.replace(".", r"\.")):
        write_atomic(volume, {"ok": (b"1", 0o644), path: (b"owned", 0o644)})
    assert _tree(outside) == HOST
    assert os.listdir(volume) == []


def test_setuid_setgid_and_sticky_bits_never_reach_a_written_file(volume: Path) -> None:
    write_atomic(volume, {"tool": (b"#!/bin/sh", 0o7755), "plain": (b"x", 0o4644)})
    assert stat.S_IMODE((volume / "tool").stat().st_mode) == 0o755
    assert stat.S_IMODE((volume / "plain").stat().st_mode) == 0o644


@pytest.mark.parametrize("link", ["ABSOLUTE", "../../host", "..2026_01_01_00_00_00.0123456789"])
def test_a_swapped_data_link_is_neither_followed_nor_its_target_removed(
    volume: Path, outside: Path, link: str
) -> None:
    write_atomic(volume, {"color": (b"blue", 0o644)})
    own = os.readlink(volume / "..data")
    (volume / "..data").unlink()
    if link.startswith("..20"):
        (volume / link).symlink_to(outside)
    (volume / "..data").symlink_to(outside if link == "ABSOLUTE" else link)
    assert write_atomic(volume, {"color": (b"red", 0o644)})
    assert _tree(outside) == HOST
    assert (volume / "color").read_text() == "red"
    new = os.readlink(volume / "..data")
    assert new not in (own, link)
    assert (volume / new).is_dir()
    assert not (volume / own).exists()


def test_a_visible_name_swapped_for_a_link_to_the_host_is_put_back(
    volume: Path, outside: Path
) -> None:
    write_atomic(volume, {"passwd": (b"mine", 0o644)})
    (volume / "passwd").unlink()
    (volume / "passwd").symlink_to(outside / "passwd")
    write_atomic(volume, {"passwd": (b"changed", 0o644)})
    assert _tree(outside) == HOST
    assert os.readlink(volume / "passwd") == "..data/passwd"


def test_only_the_writers_own_timestamped_directories_are_removed(
    volume: Path, outside: Path
) -> None:
    write_atomic(volume, {"a": (b"1", 0o644)})
    stale = volume / "..2020_01_01_00_00_00.abcdefabcd"
    stale.mkdir()
    (stale / "x").symlink_to(outside / "sub")
    planted = volume / "..2020_01_01_00_00_01.abcdefabcd"
    planted.symlink_to(outside / "sub")
    foreign = volume / "..other"
    foreign.mkdir()
    write_atomic(volume, {"a": (b"2", 0o644)})
    assert not stale.exists()
    assert planted.is_symlink()
    assert foreign.is_dir()
    assert _tree(outside) == HOST


def test_a_data_directory_planted_in_place_of_the_link_stops_the_write_and_stays(
    volume: Path, outside: Path
) -> None:
    write_atomic(volume, {"a": (b"1", 0o644)})
    (volume / "..data").unlink()
    (volume / "..data").mkdir()
    with pytest.raises(errors.VolumeError, match=r"\.\.data is a directory"):
        write_atomic(volume, {"a": (b"2", 0o644)})
    assert (volume / "..data").is_dir()
    assert len([n for n in os.listdir(volume) if n.startswith("..20")]) == 1
    assert _tree(outside) == HOST


def test_the_writer_does_not_reach_its_volume_through_a_linked_directory(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "pods"
    root.mkdir()
    (root / "uid").symlink_to(outside)
    with pytest.raises(errors.UnsafePath, match="is a symbolic link"):
        write_atomic(root / "uid" / "sub", {"a": (b"1", 0o644)}, root=root)
    assert _tree(outside) == HOST


# -- subPath -----------------------------------------------------------------------------


def test_a_sub_path_through_a_link_to_the_host_is_refused_before_anything_is_made(
    volume: Path, outside: Path
) -> None:
    (volume / "link").symlink_to(outside)
    with pytest.raises(errors.ContainerConfigError) as e:
        subpath.prepare_sub_path(str(volume), "link/new/dir", "data", "app")
    assert str(e.value) == 'failed to prepare subPath for volumeMount "data" of container "app"'
    assert _tree(outside) == HOST


def test_a_relative_link_that_climbs_out_of_the_volume_is_refused(
    volume: Path, outside: Path
) -> None:
    (volume / "a").mkdir()
    (volume / "a" / "up").symlink_to("../../../host")
    with pytest.raises(errors.ContainerConfigError):
        subpath.prepare_sub_path(str(volume), "a/up/sub", "data", "app")
    with pytest.raises(errors.ContainerConfigError):
        subpath.prepare_sub_path(str(volume), "a/up/made", "data", "app")
    assert _tree(outside) == HOST


def test_links_that_stay_inside_the_volume_are_followed(volume: Path) -> None:
    (volume / "real").mkdir()
    (volume / "rel").symlink_to("real")
    (volume / "abs").symlink_to(volume / "real")
    (volume / "dots").symlink_to("real/../real")
    for link in ("rel", "abs", "dots"):
        made = subpath.prepare_sub_path(str(volume), f"{link}/x", "data", "app")
        assert made == str(volume.resolve() / "real" / "x")
    assert (volume / "real" / "x").is_dir()


def test_missing_directories_get_the_mode_of_the_volume_directory(volume: Path) -> None:
    os.chmod(volume, 0o777)  # noqa: S103  (the mode under test, on the test's own directory)
    subpath.prepare_sub_path(str(volume), "a/b", "data", "app")
    assert stat.S_IMODE((volume / "a").stat().st_mode) == 0o777
    assert stat.S_IMODE((volume / "a" / "b").stat().st_mode) == 0o777


@pytest.mark.parametrize(
    ("sub", "message"),
    [
        ("/etc", "error SubPath `/etc` must not be an absolute path"),
        ("a/../..", "unable to provision SubPath `a/../..`: must not contain '..'"),
    ],
)
def test_an_absolute_or_backstepping_sub_path_gets_the_kubelets_message(
    volume: Path, sub: str, message: str
) -> None:
    with pytest.raises(errors.ContainerConfigError) as e:
        subpath.prepare_sub_path(str(volume), sub, "data", "app")
    assert str(e.value) == message


def test_a_link_loop_or_a_file_on_the_way_is_refused(volume: Path) -> None:
    (volume / "loop").symlink_to("loop")
    (volume / "file").write_text("x")
    for sub in ("loop/x", "file/x"):
        with pytest.raises(errors.ContainerConfigError):
            subpath.prepare_sub_path(str(volume), sub, "data", "app")


def test_a_file_sub_path_resolves_through_the_data_link_of_a_config_map(volume: Path) -> None:
    write_atomic(volume, {"color": (b"blue", 0o644)})
    path = subpath.prepare_sub_path(str(volume), "color", "cfg", "app")
    assert Path(path).read_text() == "blue"
    assert Path(path).parent.name.startswith("..20")


def test_mount_points_are_read_from_mountinfo_with_escapes_deepest_first(tmp_path: Path) -> None:
    base = str(tmp_path.resolve())
    info = "\n".join(
        [
            f"36 35 98:0 / {base}/pod rw - ext4 /dev/root rw",
            f"37 36 0:5 / {base}/pod/volumes/a\\040b rw - tmpfs tmpfs rw",
            f"38 36 0:5 / {base}/pod-other rw - tmpfs tmpfs rw",
            "39 36 0:5 / /elsewhere rw - tmpfs tmpfs rw",
        ]
    )
    assert subpath.mount_points_under(tmp_path / "pod", mountinfo=info) == [
        f"{base}/pod/volumes/a b",
        f"{base}/pod",
    ]


# -- pod directories ---------------------------------------------------------------------


def _pod(uid: str) -> Pod:
    containers = [builders.container("c", "x")]
    return builders.pod(
        "p", uid=uid, containers=containers, volumes=[{"name": "v", "emptyDir": {}}]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("uid", ["../../host", "a/../../../host", "..", "x/y"])
async def test_a_pod_uid_that_is_not_one_name_gets_no_directory_and_removes_nothing(
    tmp_path: Path, outside: Path, uid: str
) -> None:
    manager = VolumeManager(root=tmp_path / "pods" / "root", node_name="n", use_tmpfs=False)
    with pytest.raises(errors.VolumeError):
        await manager.setup_pod(_pod(uid), context=PodContext(node_name="n"), docker=None)  # type: ignore[arg-type]
    with pytest.raises(errors.UnsafePath):
        await manager.teardown_pod(uid=uid)
    with pytest.raises(errors.UnsafePath):
        await manager.termination_log(_pod(uid), Container(name="c"), restart_count=0)
    assert _tree(outside) == HOST


@pytest.mark.anyio
async def test_pod_directories_are_closed_to_other_users_and_empty_dirs_open_to_containers(
    tmp_path: Path,
) -> None:
    root = tmp_path / "state" / "pods"
    manager = VolumeManager(root=root, node_name="n", use_tmpfs=False)
    await manager.setup_pod(_pod("u1"), context=PodContext(node_name="n"), docker=None)  # type: ignore[arg-type]
    modes = {
        str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode)
        for p in [root.parent, root, *sorted(root.rglob("*"))]
    }
    assert modes == {
        "state": 0o750,
        "state/pods": 0o750,
        "state/pods/u1": 0o750,
        "state/pods/u1/volumes": 0o750,
        "state/pods/u1/volumes/kubernetes.io~empty-dir": 0o750,
        "state/pods/u1/volumes/kubernetes.io~empty-dir/v": 0o777,
    }
    await manager.teardown_pod(uid="u1")
    assert not root.parent.exists()


def test_the_pod_worker_directories_are_not_made_through_a_planted_link(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "pods"
    root.mkdir()
    (root / "u1").symlink_to(outside)
    manager = VolumeManager(root=root, node_name="n", use_tmpfs=False)
    with pytest.raises(errors.UnsafePath):
        anyio.run(lambda: manager.termination_log(_pod("u1"), Container(name="c"), restart_count=0))
    assert _tree(outside) == HOST


# -- the pod's resolv.conf and hosts file ----------------------------------------------------


def _container(**fields: object) -> Container:
    return cast(Container, Container.from_dict({"name": "c", "image": "x", **fields}))


@pytest.mark.anyio
async def test_the_pods_network_files_are_written_in_its_directory_and_mounted(
    tmp_path: Path,
) -> None:
    root = tmp_path / "pods"
    manager = VolumeManager(root=root, node_name="n", use_tmpfs=False)
    pod = _pod("u1")
    assert await manager.network_file_mounts(pod, _container()) == []
    await manager.write_network_files("u1", resolv_conf="nameserver 10.0.0.10\n", hosts="h\n")
    files = {
        p.name: (p.read_text(), stat.S_IMODE(p.stat().st_mode)) for p in (root / "u1").iterdir()
    }
    assert files == {"etc-hosts": ("h\n", 0o644), "resolv.conf": ("nameserver 10.0.0.10\n", 0o644)}
    mounts = await manager.network_file_mounts(pod, _container())
    assert {(m.target, m.source, m.read_only) for m in mounts} == {
        ("/etc/hosts", str(root / "u1" / "etc-hosts"), False),
        ("/etc/resolv.conf", str(root / "u1" / "resolv.conf"), False),
    }
    read_only = _container(securityContext={"readOnlyRootFilesystem": True})
    assert {m.read_only for m in await manager.network_file_mounts(pod, read_only)} == {True}
    own = _container(volumeMounts=[{"name": "v", "mountPath": "/etc/hosts"}])
    assert [m.target for m in await manager.network_file_mounts(pod, own)] == ["/etc/resolv.conf"]
    await manager.teardown_pod(uid="u1")
    assert not root.exists()


@pytest.mark.anyio
@pytest.mark.parametrize("uid", ["../../host", "..", "x/y"])
async def test_a_pod_uid_that_is_not_one_name_gets_no_network_files(
    tmp_path: Path, outside: Path, uid: str
) -> None:
    manager = VolumeManager(root=tmp_path / "pods" / "root", node_name="n", use_tmpfs=False)
    with pytest.raises(errors.UnsafePath):
        await manager.write_network_files(uid, resolv_conf="x", hosts="y")
    with pytest.raises(errors.UnsafePath):
        await manager.network_file_mounts(_pod(uid), _container())
    assert _tree(outside) == HOST


@pytest.mark.anyio
async def test_a_link_planted_as_a_network_file_is_replaced_never_followed_nor_mounted(
    tmp_path: Path, outside: Path
) -> None:
    """A link at the pod's ``etc-hosts`` (say, made by a container through a volume) would
    bind-mount the host file it names into the pod: it is neither mounted nor written
    through."""
    root = tmp_path / "pods"
    manager = VolumeManager(root=root, node_name="n", use_tmpfs=False)
    (root / "u1").mkdir(parents=True)
    os.symlink(outside / "passwd", root / "u1" / "etc-hosts")
    os.symlink(outside / "sub", root / "u1" / "resolv.conf")
    assert await manager.network_file_mounts(_pod("u1"), _container()) == []
    await manager.write_network_files("u1", resolv_conf="r\n", hosts="h\n")
    assert _tree(outside) == HOST
    assert (root / "u1" / "etc-hosts").read_text() == "h\n"
    assert not (root / "u1" / "etc-hosts").is_symlink()
