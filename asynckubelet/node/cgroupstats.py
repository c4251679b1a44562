"""A container's cgroup counters read from the cgroup files, in the shape of the engine's
stats answer.

The engine's stats API is the path that works whatever the engine's place, but it answers
empty counters for a container whose network namespace the engine did not make: it reads
the network statistics of the container's network sandbox and fails without one, which is
the case of every pod container of a node whose network backend makes the pod's namespace
itself (the sandbox is ``NetworkDisabled``). Such an engine is local, so its containers'
cgroups are on this machine: this module reads them (``/proc/<pid>/cgroup`` names the
container's cgroup; cgroup v1 ``cpuacct.usage``, ``memory.usage_in_bytes``,
``memory.stat``; v2 ``cpu.stat``, ``memory.current``, ``memory.stat``), every read
bounded and every path kept under the cgroup mount. :func:`read_host` reads the root the
node sees the same way: the node's own figures, as the kubelet reports its root cgroup's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CGROUP_ROOT = Path("/sys/fs/cgroup")
MAX_FILE_BYTES = 64 * 1024
MEMORY_STAT_KEYS = ("total_inactive_file", "total_rss", "inactive_file", "anon", "rss")


def cgroup_paths(text: str) -> dict[str, str]:
    """controller -> cgroup path of a ``/proc/<pid>/cgroup`` text; the cgroup v2 tree is
    the controller ``""``."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _under(root: Path, mount: str, path: str) -> Path | None:
    """``root/mount/path``, None when ``path`` would leave the mount."""
    base = root / mount
    full = Path(os.path.normpath(base / path.lstrip("/")))
    return full if full == base or base in full.parents else None


def _located(root: Path, mount: str, path: str) -> Path | None:
    """The directory of cgroup ``path`` under ``root/mount``. Inside a container (a node
    in Docker-in-Docker) the mount shows only that container's part of the tree, while
    ``/proc/<pid>/cgroup`` names the whole path: the longest end of the path that is a
    directory there is the cgroup. None when ``path`` would leave the mount."""
    parts = [part for part in path.split("/") if part]
    for start in range(len(parts)):
        found = _under(root, mount, "/".join(parts[start:]))
        if found is not None and found.is_dir():
            return found
    return _under(root, mount, path)


def _read(path: Path) -> str:
    with open(path, "rb") as f:
        return f.read(MAX_FILE_BYTES).decode("ascii", "replace")


def _stat_lines(text: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            found[key] = int(value)
    return found


def _v1(root: Path, paths: Mapping[str, str]) -> tuple[int, int, dict[str, int]] | None:
    cpu_dir = memory_dir = None
    for mount in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu"):
        if (root / mount).is_dir():
            cpu_dir = _located(root, mount, paths["cpuacct"])
            break
    if "memory" in paths:
        memory_dir = _located(root, "memory", paths["memory"])
    if cpu_dir is None or memory_dir is None:
        return None
    cpu = int(_read(cpu_dir / "cpuacct.usage").strip() or 0)
    usage = int(_read(memory_dir / "memory.usage_in_bytes").strip() or 0)
    return cpu, usage, _stat_lines(_read(memory_dir / "memory.stat"))


def _v2(root: Path, path: str) -> tuple[int, int, dict[str, int]] | None:
    directory = _located(root, "", path)
    if directory is None:
        return None
    cpu = _stat_lines(_read(directory / "cpu.stat")).get("usage_usec", 0) * 1000
    usage = int(_read(directory / "memory.current").strip() or 0)
    return cpu, usage, _stat_lines(_read(directory / "memory.stat"))


def read_sample(
    pid: int, *, now: float, root: Path = CGROUP_ROOT, proc: Path = Path("/proc")
) -> dict[str, Any] | None:
    """The counters of the cgroup of process ``pid`` as a stats answer (``read``,
    ``cpu_stats``, ``memory_stats``); None when the process or its cgroup is gone or the
    files cannot be read."""
    try:
        paths = cgroup_paths(_read(proc / str(pid) / "cgroup"))
        if "cpuacct" in paths:
            counters = _v1(root, paths)
        elif "" in paths:
            counters = _v2(root, paths[""])
        else:
            counters = None
    except (OSError, ValueError):
        return None
    return None if counters is None else _sample(counters, now=now)


def _meminfo(proc: Path) -> dict[str, int]:
    """``/proc/meminfo`` in bytes, by field."""
    found: dict[str, int] = {}
    for line in _read(proc / "meminfo").splitlines():
        key, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            found[key] = int(words[0]) * (1024 if words[1:] == ["kB"] else 1)
    return found


def _host_v1(root: Path) -> tuple[int, int, dict[str, int]] | None:
    cpu_dir = next(
        (root / m for m in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu") if (root / m).is_dir()),
        None,
    )
    memory_dir = root / "memory"
    if cpu_dir is None or not memory_dir.is_dir():
        return None
    cpu = int(_read(cpu_dir / "cpuacct.usage").strip() or 0)
    usage = int(_read(memory_dir / "memory.usage_in_bytes").strip() or 0)
    return cpu, usage, _stat_lines(_read(memory_dir / "memory.stat"))


def _host_v2(root: Path, proc: Path) -> tuple[int, int, dict[str, int]]:
    cpu = _stat_lines(_read(root / "cpu.stat")).get("usage_usec", 0) * 1000
    stats = _stat_lines(_read(root / "memory.stat")) if (root / "memory.stat").is_file() else {}
    if (root / "memory.current").is_file():
        # The root of a cgroup namespace that is not the machine's (a node in a container).
        return cpu, int(_read(root / "memory.current").strip() or 0), stats
    # The machine's root cgroup has no memory.current: its usage is what the kernel does
    # not hold free, as runc reads it for the root.
    info = _meminfo(proc)
    usage = max(info.get("MemTotal", 0) - info.get("MemFree", 0), 0)
    stats.setdefault("inactive_file", info.get("Inactive(file)", 0))
    stats.setdefault("anon", info.get("AnonPages", 0))
    return cpu, usage, stats


def read_host(
    *, now: float, root: Path = CGROUP_ROOT, proc: Path = Path("/proc")
) -> dict[str, Any] | None:
    """The counters of the cgroup root the node sees (the machine's, or its container's
    when it runs in one) as a stats answer, what the kubelet reports as the node's: CPU
    time, memory usage and its ``memory.stat``; None when they cannot be read."""
    try:
        if (root / "cgroup.controllers").is_file():
            counters: tuple[int, int, dict[str, int]] | None = _host_v2(root, proc)
        else:
            counters = _host_v1(root)
    except (OSError, ValueError):
        return None
    return None if counters is None else _sample(counters, now=now)


def _sample(counters: tuple[int, int, dict[str, int]], *, now: float) -> dict[str, Any]:
    cpu, usage, stats = counters
    return {
        "read": datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z"),
        "cpu_stats": {"cpu_usage": {"total_usage": cpu}},
        "memory_stats": {
            "usage": usage,
            "stats": {k: stats[k] for k in MEMORY_STAT_KEYS if k in stats},
        },
    }


def with_earlier(sample: Mapping[str, Any], earlier: Mapping[str, Any]) -> dict[str, Any]:
    """``sample`` with ``earlier`` as its previous sample (``precpu_stats``, ``preread``),
    as the engine answers without ``one-shot``."""
    return {**sample, "precpu_stats": earlier["cpu_stats"], "preread": earlier["read"]}


__all__ = ["CGROUP_ROOT", "cgroup_paths", "read_host", "read_sample", "with_earlier"]
