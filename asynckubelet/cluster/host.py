"""What this machine says about itself, for the Node: identity, addresses and pressure.

Read from ``/proc``, ``/sys``, ``/etc`` and ``statvfs``, as the kubelet's cAdvisor reads
them: the machine and boot ids, the kernel and OS image, the CPU architecture in Go's
words (``amd64``, ``arm64``), the node's IP (the one given, else the address of the
interface that carries the default route, found by connecting a UDP socket, which sends
nothing), and a :class:`~asynckubelet.cluster.nodestatus.HostSample` of free memory, disk,
inodes and PIDs. Anything unreadable is left out rather than guessed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import platform
import socket
from pathlib import Path

from asynckubelet.cluster.nodestatus import HostSample

_GO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "armv6l": "arm",
    "i386": "386",
    "i686": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}


def go_arch(machine: str | None = None) -> str:
    """The architecture as Go (and the ``kubernetes.io/arch`` label) names it."""
    machine = machine or platform.machine()
    return _GO_ARCH.get(machine, machine)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        key, _, value = line.partition("=")
        if key == "PRETTY_NAME":
            return value.strip().strip('"')
    return "Linux"


def node_info(*, runtime_version: str, kubelet_version: str) -> dict[str, str]:
    """``nodeInfo``: identity of the machine and of the software on it."""
    return {
        "machineID": _read("/etc/machine-id") or _read("/var/lib/dbus/machine-id"),
        "systemUUID": _read("/sys/class/dmi/id/product_uuid").lower(),
        "bootID": _read("/proc/sys/kernel/random/boot_id"),
        "kernelVersion": os.uname().release,
        "osImage": os_image(),
        "containerRuntimeVersion": runtime_version,
        "kubeletVersion": kubelet_version,
        "kubeProxyVersion": kubelet_version,
        "operatingSystem": "linux",
        "architecture": go_arch(),
    }


def default_node_ip(*, toward: str = "192.0.2.1") -> str:
    """The address of the interface the default route leaves by (connecting a UDP socket
    picks it and sends nothing; ``toward`` is a documentation address), else 127.0.0.1."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((toward, 9))
        address = str(s.getsockname()[0])
        if not ipaddress.ip_address(address).is_unspecified:
            return address
    return "127.0.0.1"


def node_addresses(*, node_name: str, node_ip: str | None) -> tuple[tuple[str, str], ...]:
    return (("InternalIP", node_ip or default_node_ip()), ("Hostname", node_name))


def _statvfs(path: Path | None) -> os.statvfs_result | None:
    if path is None:
        return None
    try:
        return os.statvfs(path)
    except OSError:
        return None


def sample_host(*, nodefs: Path, imagefs: Path | None = None) -> HostSample:
    """Free memory, disk space and inodes of ``nodefs`` and ``imagefs``, and PIDs, now."""
    memory: int | None = None
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            memory = int(line.split()[1]) * 1024
    node = _statvfs(nodefs)
    image = _statvfs(imagefs)
    pids_max: int | None = None
    running: int | None = None
    with contextlib.suppress(ValueError):
        pids_max = int(_read("/proc/sys/kernel/pid_max"))
    with contextlib.suppress(ValueError, IndexError):
        running = int(_read("/proc/loadavg").split()[3].split("/")[1])
    return HostSample(
        memory_available=memory,
        nodefs_available=node.f_bavail * node.f_frsize if node else None,
        nodefs_capacity=node.f_blocks * node.f_frsize if node else None,
        nodefs_inodes_free=node.f_favail if node and node.f_files else None,
        nodefs_inodes=node.f_files if node and node.f_files else None,
        imagefs_available=image.f_bavail * image.f_frsize if image else None,
        imagefs_capacity=image.f_blocks * image.f_frsize if image else None,
        pids_max=pids_max,
        pids_running=running,
    )


__all__ = ["default_node_ip", "go_arch", "node_addresses", "node_info", "sample_host"]
