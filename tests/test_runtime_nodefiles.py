"""Pod cgroup parents and pod log links in the kubelet's layout."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from asynckubelet.errors import UnsafePath
from asynckubelet.runtime import nodefiles
from asynckubelet.runtime.qos import BEST_EFFORT, BURSTABLE, GUARANTEED


@pytest.mark.parametrize(
    ("driver", "qos", "expected"),
    [
        ("cgroupfs", GUARANTEED, "/akl/podu-1"),
        ("cgroupfs", BURSTABLE, "/akl/burstable/podu-1"),
        ("cgroupfs", BEST_EFFORT, "/akl/besteffort/podu-1"),
        ("systemd", GUARANTEED, "akl-podu_1.slice"),
        ("systemd", BURSTABLE, "akl-burstable-podu_1.slice"),
        ("systemd", BEST_EFFORT, "akl-besteffort-podu_1.slice"),
    ],
)
def test_pod_cgroups_are_grouped_by_qos_class_as_the_kubelet_groups_them(
    driver: str, qos: str, expected: str
) -> None:
    assert nodefiles.pod_cgroup_parent(root="/akl", driver=driver, qos=qos, uid="u-1") == expected


def test_cgroup_mounts_are_read_from_mountinfo() -> None:
    mountinfo = (
        "30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
        "31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
        "32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "40 22 8:1 / / rw - ext4 /dev/vda rw\n"
    )
    assert nodefiles.cgroup_mounts(mountinfo) == [
        Path("/sys/fs/cgroup/memory"),
        Path("/sys/fs/cgroup/cpu,cpuacct"),
        Path("/sys/fs/cgroup/unified"),
    ]


def test_container_logs_are_linked_per_restart_and_removed_with_the_pod(tmp_path: Path) -> None:
    target = tmp_path / "engine" / "c1-json.log"
    target.parent.mkdir()
    target.write_text('{"log":"hi\\n"}\n')
    root = tmp_path / "pods"
    ident = {"namespace": "team", "name": "web", "uid": "u-1"}
    link = nodefiles.link_container_log(
        root, **ident, container="app", restart_count=2, log_path=str(target)
    )
    assert link == root / "team_web_u-1" / "app" / "2.log"
    assert link.read_text() == target.read_text()
    again = nodefiles.link_container_log(
        root, **ident, container="app", restart_count=2, log_path=str(target)
    )
    assert again == link
    nodefiles.unlink_container_log(root, **ident, container="app", restart_count=2)
    assert not link.is_symlink()
    nodefiles.remove_pod_logs(root, **ident)
    assert not (root / "team_web_u-1").exists()


@pytest.mark.parametrize(
    "ident",
    [
        {"namespace": "team", "name": "web", "uid": "../../../outside"},
        {"namespace": "..", "name": "x/..", "uid": "/outside"},
    ],
)
def test_pod_log_names_that_are_not_one_directory_name_are_refused(
    tmp_path: Path, ident: dict[str, str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("host")
    root = tmp_path / "logs" / "pods"
    with pytest.raises(UnsafePath):
        nodefiles.link_container_log(root, **ident, container="app", restart_count=0, log_path="/x")
    with pytest.raises(UnsafePath):
        nodefiles.remove_pod_logs(root, **ident)
    assert [p.name for p in outside.iterdir()] == ["keep"]


def test_a_link_planted_as_the_pod_log_directory_is_not_written_through_nor_emptied(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    (outside / "app").mkdir(parents=True)
    (outside / "app" / "0.log").write_text("host")
    root = tmp_path / "pods"
    root.mkdir()
    (root / "team_web_u-1").symlink_to(outside)
    ident = {"namespace": "team", "name": "web", "uid": "u-1"}
    with pytest.raises(UnsafePath):
        nodefiles.link_container_log(root, **ident, container="app", restart_count=0, log_path="/x")
    with pytest.raises(UnsafePath):
        nodefiles.unlink_container_log(root, **ident, container="app", restart_count=0)
    nodefiles.remove_pod_logs(root, **ident)
    assert (outside / "app" / "0.log").read_text() == "host"
    assert not (root / "team_web_u-1").is_symlink()


def test_pod_log_directories_are_closed_to_other_users(tmp_path: Path) -> None:
    root = tmp_path / "pods"
    nodefiles.link_container_log(
        root, namespace="ns", name="p", uid="u", container="c", restart_count=0, log_path="/x"
    )
    assert stat.S_IMODE((root / "ns_p_u").stat().st_mode) == 0o750
    assert stat.S_IMODE((root / "ns_p_u" / "c").stat().st_mode) == 0o750


def test_a_cgroup_parent_that_climbs_out_of_the_hierarchy_is_not_removed(tmp_path: Path) -> None:
    if not nodefiles.cgroup_mounts(Path("/proc/self/mountinfo").read_text()):
        pytest.skip("no cgroup hierarchy is mounted here")
    victim = tmp_path / "victim"
    victim.mkdir()
    parent = "/../../../../../.." + str(victim)
    assert nodefiles.remove_pod_cgroup(parent) == []
    assert victim.is_dir()
