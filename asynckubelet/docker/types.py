"""Typed shapes of the raw Docker Engine API JSON (API 1.41 and later) that we read or send.

Only the keys the project uses are declared; Docker sends more. ``total=False`` because
the daemon omits empty values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict


class HostConfig(TypedDict, total=False):
    NetworkMode: str
    IpcMode: str
    PidMode: str
    UTSMode: str
    Binds: list[str]
    Mounts: list[dict[str, Any]]
    PortBindings: dict[str, list[dict[str, str]]]
    CapAdd: list[str]
    CapDrop: list[str]
    Privileged: bool
    ReadonlyRootfs: bool
    SecurityOpt: list[str]
    GroupAdd: list[str]
    MaskedPaths: list[str]
    ReadonlyPaths: list[str]
    Memory: int
    MemorySwap: int
    NanoCpus: int
    CpuShares: int
    CpuQuota: int
    CpuPeriod: int
    CgroupParent: str
    OomScoreAdj: int
    Sysctls: dict[str, str]
    ShmSize: int
    Tmpfs: dict[str, str]
    ExtraHosts: list[str]
    Dns: list[str]
    DnsSearch: list[str]
    DnsOptions: list[str]
    Init: bool
    AutoRemove: bool
    RestartPolicy: dict[str, Any]
    Ulimits: list[dict[str, Any]]
    LogConfig: dict[str, Any]


class ContainerConfig(TypedDict, total=False):
    """Body of ``POST /containers/create``."""

    Image: str
    Cmd: list[str] | None
    Entrypoint: list[str] | None
    Env: list[str]
    WorkingDir: str
    User: str
    Hostname: str
    Domainname: str
    Labels: dict[str, str]
    Tty: bool
    OpenStdin: bool
    StdinOnce: bool
    AttachStdin: bool
    AttachStdout: bool
    AttachStderr: bool
    ExposedPorts: dict[str, dict[str, Any]]
    StopSignal: str
    StopTimeout: int
    NetworkDisabled: bool
    HostConfig: HostConfig


class ContainerStateJSON(TypedDict, total=False):
    Status: str
    Running: bool
    Paused: bool
    Restarting: bool
    OOMKilled: bool
    Dead: bool
    Pid: int
    ExitCode: int
    Error: str
    StartedAt: str
    FinishedAt: str


class ContainerInspect(TypedDict, total=False):
    """``GET /containers/{id}/json``."""

    Id: str
    Name: str
    Created: str
    Image: str
    State: ContainerStateJSON
    Config: ContainerConfig
    HostConfig: HostConfig
    NetworkSettings: dict[str, Any]
    Mounts: list[dict[str, Any]]
    RestartCount: int
    LogPath: str
    ResolvConfPath: str
    HostsPath: str


class ContainerSummary(TypedDict, total=False):
    """One row of ``GET /containers/json``."""

    Id: str
    Names: list[str]
    Image: str
    ImageID: str
    Created: int
    State: str
    Status: str
    Labels: dict[str, str]


class ImageInspect(TypedDict, total=False):
    Id: str
    RepoTags: list[str]
    RepoDigests: list[str]
    Config: dict[str, Any]
    Size: int


class Event(TypedDict, total=False):
    """One message of ``GET /events``."""

    Type: str
    Action: str
    Actor: dict[str, Any]
    status: str
    id: str
    time: int
    timeNano: int


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a command run with ``exec``, waited for to the end."""

    exit_code: int
    stdout: bytes
    stderr: bytes

    @property
    def output(self) -> str:
        return (self.stdout + self.stderr).decode(errors="replace")


@dataclass(frozen=True)
class LogLine:
    """One line of a container's output; ``stream`` is ``stdout`` or ``stderr``.

    ``newline`` is False for output that ended without one (the last thing a container
    wrote before it exited, say), so the exact bytes can be put back together.
    """

    stream: str
    text: str
    newline: bool = True


@dataclass(frozen=True)
class PullProgress:
    """One message of Docker's pull stream.

    ``layer`` is the short layer id (empty for messages about the whole image, such as
    ``Pulling from ...`` or ``Digest: ...``); ``status`` is Docker's word for the layer's
    state (``Pulling fs layer``, ``Waiting``, ``Downloading``, ``Verifying Checksum``,
    ``Download complete``, ``Extracting``, ``Pull complete``, ``Already exists``);
    ``current``/``total`` are bytes, when Docker reports them.
    """

    layer: str
    status: str
    current: int | None = None
    total: int | None = None

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> PullProgress:
        detail = item.get("progressDetail") or {}
        current, total = detail.get("current"), detail.get("total")
        return cls(
            layer=str(item.get("id") or "") if "progressDetail" in item else "",
            status=str(item.get("status") or ""),
            current=int(current) if isinstance(current, int) else None,
            total=int(total) if isinstance(total, int) and total > 0 else None,
        )
