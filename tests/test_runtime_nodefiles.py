"""Pod cgroup parents and pod log links in the kubelet's layout."""

from __future__ import annotations

from pathlib import Path

import pytest

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
