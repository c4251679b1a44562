"""Resource usage of the node's pods, read from the engine's stats API.

What ``kubectl top``, metrics-server and Prometheus read of a kubelet: per container the
cumulative CPU time, the CPU rate and the memory working set, summed per pod and per node.
The engine may be remote, so the numbers come from Docker's
``GET /containers/{id}/stats?stream=false`` (the container's cgroup counters), never from
the local cgroup files.

The working set is cAdvisor's: memory usage minus the inactive file cache
(``total_inactive_file`` on cgroup v1, ``inactive_file`` on v2), never below zero. The
CPU rate needs two samples; the engine takes them itself when asked without
``one-shot`` (``precpu_stats`` is its sample of about a second before), so nothing
samples while nobody asks: the node's idle cost is nil, a read of rates costs about a
second of waiting (all containers concurrently). Cumulative counters alone (the
Prometheus endpoint) are read ``one-shot``, at once.

A local engine answers empty counters for containers whose network namespace it did not
make (the pod containers of the bridge and CNI backends): those are read from their
cgroup files (:mod:`~asynckubelet.node.cgroupstats`), two samples a second apart.

The node's own figures are the kubelet's: those of the cgroup root, the whole machine
(or the container the node runs in), read from the files when the engine is local, so
``kubectl top nodes`` shows what the machine uses, the pods and everything else. A remote
engine's host is not this one and reports no host-wide counters: its node's figures are
the sums of its pods'.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from asynckubelet import errors
from asynckubelet.docker import DockerAPI
from asynckubelet.node import cgroupstats
from asynckubelet.runtime import naming

MAX_CONCURRENT_READS = 16
"""Stats requests in flight at once towards the engine."""
_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{1,9})?(Z|[+-]\d\d:\d\d)")


# -- conversions (pure) ---------------------------------------------------------------------


def parse_time(text: object) -> float | None:
    """Seconds since the epoch of an engine timestamp (RFC 3339 with up to nanoseconds);
    None for the zero time or anything unreadable."""
    if not isinstance(text, str):
        return None
    match = _TIMESTAMP.fullmatch(text)
    if match is None or text.startswith("0001-01-01"):
        return None
    whole, fraction, zone = match.groups()
    try:
        moment = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone))
    except ValueError:
        return None
    return moment.timestamp() + (float(fraction) if fraction else 0.0)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def working_set(memory: Mapping[str, Any]) -> int:
    """cAdvisor's working set: usage minus the inactive file cache, at least zero."""
    usage = _int(memory.get("usage"))
    stats = memory.get("stats") or {}
    inactive = _int(stats.get("total_inactive_file", stats.get("inactive_file")))
    return max(usage - inactive, 0)


def rss(memory: Mapping[str, Any]) -> int:
    """Anonymous memory and swap cache: ``total_rss`` (cgroup v1), ``anon`` (v2)."""
    stats = memory.get("stats") or {}
    return _int(stats.get("total_rss", stats.get("rss", stats.get("anon"))))


def cpu_rate(stats: Mapping[str, Any]) -> int | None:
    """Nanocores (CPU nanoseconds per second) between the engine's two samples; None
    when there is no earlier sample or no time passed between them."""
    now = _int((stats.get("cpu_stats") or {}).get("cpu_usage", {}).get("total_usage"))
    before_stats = stats.get("precpu_stats") or {}
    before = _int((before_stats.get("cpu_usage") or {}).get("total_usage"))
    read, preread = parse_time(stats.get("read")), parse_time(stats.get("preread"))
    if read is None or preread is None or read <= preread or not before:
        return None
    return max(round((now - before) / (read - preread)), 0)


def window(stats: Mapping[str, Any]) -> float | None:
    """Seconds between the engine's two samples."""
    read, preread = parse_time(stats.get("read")), parse_time(stats.get("preread"))
    if read is None or preread is None or read <= preread:
        return None
    return read - preread


def cpu_quantity(nano_cores: int) -> str:
    """A CPU amount as the API server serializes it (``12m``, ``1500u``, ``2``)."""
    for divisor, suffix in ((10**9, ""), (10**6, "m"), (10**3, "u")):
        if nano_cores % divisor == 0:
            return f"{nano_cores // divisor}{suffix}"
    return f"{nano_cores}n"


def memory_quantity(size: int) -> str:
    """Bytes as a binary quantity (``3456Ki``, ``12Mi``), else plain bytes."""
    if size == 0:
        return "0"
    for power, suffix in ((4, "Ti"), (3, "Gi"), (2, "Mi"), (1, "Ki")):
        if size % 1024**power == 0:
            return f"{size // 1024**power}{suffix}"
    return str(size)


def duration(seconds: float) -> str:
    """A duration as Go prints one (``1s``, ``1.004s``, ``30s``)."""
    millis = round(seconds * 1000)
    whole, part = divmod(millis, 1000)
    return f"{whole}.{part:03d}".rstrip("0").rstrip(".") + "s"


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- records --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerUsage:
    """One running container's counters at ``timestamp``."""

    name: str
    start_time: float
    timestamp: float
    cpu_seconds: float
    """Cumulative CPU time, in core-seconds."""
    nano_cores: int | None
    """CPU rate between two samples (None when read ``one-shot``)."""
    window: float | None
    usage_bytes: int
    working_set_bytes: int
    rss_bytes: int


def container_usage(name: str, stats: Mapping[str, Any], *, start_time: float) -> ContainerUsage:
    """``stats`` (one ``/containers/{id}/stats`` answer) of the container ``name``."""
    memory = stats.get("memory_stats") or {}
    total = _int((stats.get("cpu_stats") or {}).get("cpu_usage", {}).get("total_usage"))
    return ContainerUsage(
        name=name,
        start_time=start_time,
        timestamp=parse_time(stats.get("read")) or start_time,
        cpu_seconds=total / 1e9,
        nano_cores=cpu_rate(stats),
        window=window(stats),
        usage_bytes=_int(memory.get("usage")),
        working_set_bytes=working_set(memory),
        rss_bytes=rss(memory),
    )


def _sum_rates(containers: Sequence[ContainerUsage]) -> int | None:
    rates = [c.nano_cores for c in containers]
    return None if any(r is None for r in rates) else sum(r or 0 for r in rates)


@dataclass(frozen=True)
class PodUsage:
    """A pod's running containers."""

    namespace: str
    name: str
    uid: str
    containers: tuple[ContainerUsage, ...]

    @property
    def start_time(self) -> float:
        return min(c.start_time for c in self.containers)

    @property
    def timestamp(self) -> float:
        return max(c.timestamp for c in self.containers)

    @property
    def cpu_seconds(self) -> float:
        return sum(c.cpu_seconds for c in self.containers)

    @property
    def nano_cores(self) -> int | None:
        return _sum_rates(self.containers)

    @property
    def window(self) -> float | None:
        windows = [c.window for c in self.containers if c.window is not None]
        return max(windows) if windows else None

    @property
    def usage_bytes(self) -> int:
        return sum(c.usage_bytes for c in self.containers)

    @property
    def working_set_bytes(self) -> int:
        return sum(c.working_set_bytes for c in self.containers)

    @property
    def rss_bytes(self) -> int:
        return sum(c.rss_bytes for c in self.containers)


@dataclass(frozen=True)
class NodeUsage:
    """The node's pods at ``timestamp``, and the node's own figures: its ``host``'s (the
    cgroup root it sees) when it was read, else the sums of its pods'."""

    node_name: str
    timestamp: float
    pods: tuple[PodUsage, ...]
    host: ContainerUsage | None = None

    @property
    def cpu_seconds(self) -> float:
        if self.host is not None:
            return self.host.cpu_seconds
        return sum(p.cpu_seconds for p in self.pods)

    @property
    def nano_cores(self) -> int | None:
        if self.host is not None:
            return self.host.nano_cores
        return _sum_rates([c for p in self.pods for c in p.containers])

    @property
    def window(self) -> float | None:
        if self.host is not None:
            return self.host.window
        windows = [p.window for p in self.pods if p.window is not None]
        return max(windows) if windows else None

    @property
    def usage_bytes(self) -> int:
        if self.host is not None:
            return self.host.usage_bytes
        return sum(p.usage_bytes for p in self.pods)

    @property
    def working_set_bytes(self) -> int:
        if self.host is not None:
            return self.host.working_set_bytes
        return sum(p.working_set_bytes for p in self.pods)

    @property
    def rss_bytes(self) -> int:
        if self.host is not None:
            return self.host.rss_bytes
        return sum(p.rss_bytes for p in self.pods)


# -- reading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _StatsReader:
    """One container's stats: from the engine, or from its cgroup files (``local``)."""

    docker: DockerAPI
    rates: bool
    local: bool
    root: Path
    proc: Path
    interval: float

    async def stats(self, container_id: str) -> dict[str, Any] | None:
        if not self.local:
            return await self.docker.container_stats(container_id, one_shot=not self.rates)
        # One sample at once first: when it is empty, the files are read instead of
        # waiting a second for the engine's second empty sample.
        probe = await self.docker.container_stats(container_id, one_shot=True)
        if parse_time(probe.get("read")) is None:
            return await self.from_files(container_id)
        if self.rates and cpu_rate(probe) is None:
            return await self.docker.container_stats(container_id)
        return probe

    async def from_files(self, container_id: str) -> dict[str, Any] | None:
        inspected = await self.docker.inspect_container(container_id)
        pid = (inspected.get("State") or {}).get("Pid")
        if not isinstance(pid, int) or pid <= 0:
            return None
        first = cgroupstats.read_sample(pid, now=_now(), root=self.root, proc=self.proc)
        if first is None or not self.rates:
            return first
        await anyio.sleep(self.interval)
        second = cgroupstats.read_sample(pid, now=_now(), root=self.root, proc=self.proc)
        return cgroupstats.with_earlier(second, first) if second is not None else None


async def read_usage(
    docker: DockerAPI,
    *,
    node_name: str,
    rates: bool = True,
    local: bool = False,
    cgroup_root: Path = cgroupstats.CGROUP_ROOT,
    proc: Path = Path("/proc"),
    interval: float = 1.0,
    now: float | None = None,
) -> NodeUsage:
    """The running containers of ``node_name``'s pods, read concurrently from the engine;
    ``rates`` waits for a second sample (CPU rates), else one sample each. A ``local``
    engine's container it answers empty counters for is read from its cgroup files
    (:mod:`~asynckubelet.node.cgroupstats`, two samples ``interval`` seconds apart). A
    container that stops meanwhile is left out; an engine that does not answer raises.
    The node's own figures are then the cgroup root's this machine shows
    (:func:`~asynckubelet.node.cgroupstats.read_host`), sampled alongside."""
    rows = await docker.list_containers(
        labels={naming.LABEL_NODE: node_name, naming.LABEL_TYPE: naming.TYPE_CONTAINER},
        all=False,
    )
    limiter = anyio.CapacityLimiter(MAX_CONCURRENT_READS)
    found: dict[str, list[ContainerUsage]] = {}
    owners: dict[str, tuple[str, str]] = {}

    reader = _StatsReader(
        docker, rates=rates, local=local, root=cgroup_root, proc=proc, interval=interval
    )

    async def read(row: Mapping[str, Any]) -> None:
        labels = row.get("Labels") or {}
        uid = labels.get(naming.LABEL_POD_UID, "")
        name = labels.get(naming.LABEL_CONTAINER_NAME, "")
        container_id = str(row.get("Id", ""))
        if not uid or not name:
            return
        async with limiter:
            try:
                stats = await reader.stats(container_id)
            except errors.NotFound:
                return
        if stats is None or parse_time(stats.get("read")) is None:
            return
        created = row.get("Created")
        start = float(created) if isinstance(created, int) else 0.0
        owners[uid] = (
            labels.get(naming.LABEL_POD_NAMESPACE, ""),
            labels.get(naming.LABEL_POD_NAME, ""),
        )
        found.setdefault(uid, []).append(container_usage(name, stats, start_time=start))

    host: list[ContainerUsage] = []

    async def read_host() -> None:
        first = cgroupstats.read_host(now=_now(), root=cgroup_root, proc=proc)
        if first is not None and rates:
            await anyio.sleep(interval)
            second = cgroupstats.read_host(now=_now(), root=cgroup_root, proc=proc)
            first = cgroupstats.with_earlier(second, first) if second is not None else None
        if first is not None:
            host.append(container_usage("", first, start_time=0.0))

    async with anyio.create_task_group() as tg:
        if local:
            tg.start_soon(read_host)
        for row in rows:
            tg.start_soon(read, row)
    pods = tuple(
        PodUsage(
            namespace=owners[uid][0],
            name=owners[uid][1],
            uid=uid,
            containers=tuple(sorted(containers, key=lambda c: c.name)),
        )
        for uid, containers in found.items()
    )
    pods = tuple(sorted(pods, key=lambda p: (p.namespace, p.name)))
    stamp = max((p.timestamp for p in pods), default=now if now is not None else _now())
    return NodeUsage(
        node_name=node_name, timestamp=stamp, pods=pods, host=host[0] if host else None
    )


def _now() -> float:
    return datetime.now(UTC).timestamp()


__all__ = [
    "ContainerUsage",
    "NodeUsage",
    "PodUsage",
    "container_usage",
    "cpu_quantity",
    "cpu_rate",
    "duration",
    "memory_quantity",
    "parse_time",
    "read_usage",
    "rfc3339",
    "rss",
    "window",
    "working_set",
]
