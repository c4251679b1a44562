"""What a pod leaves on the node beside Docker: its cgroup parent and its log directory.

Both follow the kubelet's layout so node tooling finds them where it looks on a cluster:

- **cgroups**: every container of a pod (pause included) runs under one pod cgroup, grouped
  by QoS class as the kubelet's pod container manager does (``<root>/pod<uid>`` for
  Guaranteed, ``<root>/burstable/pod<uid>``, ``<root>/besteffort/pod<uid>``; as systemd
  slices ``<root>-burstable-pod<uid>.slice`` under the systemd driver). Docker creates the
  directories; with the cgroupfs driver nobody removes them, so the node does when the pod
  goes.
- **logs**: ``<dir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log``, a symlink to
  the engine's log file of that instance, as cri-dockerd makes them under /var/log/pods.

Both need the engine's files on this machine: they are off for a remote engine.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from asynckubelet import hostfs
from asynckubelet.runtime.qos import BEST_EFFORT, BURSTABLE

_QOS_DIRS = {BURSTABLE: "burstable", BEST_EFFORT: "besteffort"}


def pod_cgroup_parent(*, root: str, driver: str, qos: str, uid: str) -> str:
    """The ``CgroupParent`` of every container of the pod."""
    qos_dir = _QOS_DIRS.get(qos)
    if driver == "systemd":
        base = root.strip("/").replace("/", "-").removesuffix(".slice") or "asynckubelet"
        parts = [base, *([qos_dir] if qos_dir else []), f"pod{uid.replace('-', '_')}"]
        return "-".join(parts) + ".slice"
    path = "/" + root.strip("/")
    if qos_dir:
        path += f"/{qos_dir}"
    return f"{path}/pod{uid}"


def cgroup_mounts(mountinfo: str) -> list[Path]:
    """Mount points of cgroup v1 hierarchies and the cgroup v2 tree, from mountinfo text."""
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line:
            continue
        fstype = line.split(" - ", 1)[1].split()[0]
        if fstype in ("cgroup", "cgroup2"):
            found.append(Path(fields[4]))
    return found


def remove_pod_cgroup(parent: str) -> list[Path]:
    """Remove the pod's (now empty) cgroup directories in every hierarchy; returns them.

    Only for the cgroupfs layout (a path); systemd removes its empty slices itself. A
    parent that would lead out of a hierarchy is left alone.
    """
    if parent.endswith(".slice"):
        return []
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return []
    removed = []
    for mount in cgroup_mounts(mountinfo):
        try:
            hostfs.parts_under(mount, parent.lstrip("/"))
        except hostfs.UnsafePath:
            continue
        target = mount / parent.lstrip("/")
        if target.is_dir() and hostfs.remove_dir(mount, parent.lstrip("/")):
            removed.append(target)
    return removed


def _pod_log_name(*, namespace: str, name: str, uid: str) -> str:
    return hostfs.single_name(f"{namespace}_{name}_{uid}", what="pod log directory")


def pod_log_dir(root: Path, *, namespace: str, name: str, uid: str) -> Path:
    return root / _pod_log_name(namespace=namespace, name=name, uid=uid)


def _log_rel(*, namespace: str, name: str, uid: str, container: str) -> str:
    folder = _pod_log_name(namespace=namespace, name=name, uid=uid)
    return f"{folder}/{hostfs.single_name(container, what='container name')}"


def link_container_log(
    root: Path,
    *,
    namespace: str,
    name: str,
    uid: str,
    container: str,
    restart_count: int,
    log_path: str,
) -> Path:
    """Point ``<pod dir>/<container>/<restartCount>.log`` at the engine's log file.

    The directories are made 0750 and nothing under ``root`` is reached through a link.
    """
    rel = _log_rel(namespace=namespace, name=name, uid=uid, container=container)
    hostfs.symlink(root, f"{rel}/{restart_count}.log", log_path)
    return root / rel / f"{restart_count}.log"


def unlink_container_log(
    root: Path, *, namespace: str, name: str, uid: str, container: str, restart_count: int
) -> None:
    rel = _log_rel(namespace=namespace, name=name, uid=uid, container=container)
    with contextlib.suppress(FileNotFoundError):
        hostfs.remove_file(root, f"{rel}/{restart_count}.log")


def remove_pod_logs(root: Path, *, namespace: str, name: str, uid: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        hostfs.remove_tree(root, _pod_log_name(namespace=namespace, name=name, uid=uid))
