"""In-package fakes of the project's own protocols, for unit tests without Docker or root.

:class:`FakeRoutes` is the host's routing table as :mod:`asynckubelet.cli.instance` reads
it. :class:`FakeDocker` is a :class:`~asynckubelet.docker.api.DockerAPI` over containers,
images, volumes and networks held in memory. It answers as the engine does where the
project depends on it (a taken name is a conflict, an absent container is ``NotFound``,
an absent image ``ImageNotFound``, labels and names filter the container list, a load
reads the archive's tags), counts every call, and lets a test script failures (the next
call, or every call, of a method raises a given error) and hold a call until the test
lets it go, to reach the interleavings a real engine only shows under load.

What it does not do: run processes. A started container runs until it is stopped,
killed or told to exit (:meth:`FakeDocker.exit`); exec answers come from a script; logs
are what the test put there (a followed log gives them, then ends when the container
exits; or a log without end, :attr:`FakeDocker.endless_logs`); event filters are not
applied. It counts the streams (logs, events) open at any moment, so a test can see that
a reader let go of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import ipaddress
import itertools
import json
import re
import tarfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import anyio
import anyio.lowlevel

from asynckubelet import errors
from asynckubelet.docker.api import DockerAPI
from asynckubelet.docker.types import (
    ContainerConfig,
    ContainerInspect,
    ContainerSummary,
    Event,
    ExecResult,
    HostConfig,
    ImageInspect,
    LogLine,
    PullProgress,
)

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_ZERO_TIME = "0001-01-01T00:00:00Z"
_SIGNALS = {"SIGKILL": 9, "SIGTERM": 15, "SIGINT": 2, "SIGHUP": 1, "SIGQUIT": 3}


def _stamp(tick: int) -> str:
    return (_EPOCH + timedelta(seconds=tick)).strftime("%Y-%m-%dT%H:%M:%S.000000000Z")


def _tagged(ref: str) -> str:
    """``busybox`` -> ``busybox:latest``, as the engine names an untagged reference."""
    if "@" in ref or ":" in ref.rsplit("/", 1)[-1]:
        return ref
    return f"{ref}:latest"


@dataclass(frozen=True)
class Call:
    """One call made to a fake: the method, what it was about (a container id or name, an
    image reference; empty for calls about no one thing) and, for exec, the command."""

    method: str
    target: str = ""
    command: tuple[str, ...] = ()


@dataclass
class FakeContainer:
    """A container of :class:`FakeDocker`; a test may change its state directly."""

    id: str
    name: str
    config: ContainerConfig
    image_id: str = ""
    status: str = "created"
    """``created``, ``running`` or ``exited``, as Docker's list shows it."""
    exit_code: int = 0
    pid: int = 0
    created: str = _ZERO_TIME
    started_at: str = _ZERO_TIME
    finished_at: str = _ZERO_TIME
    extra: dict[str, Any] = field(default_factory=dict)
    """More ``inspect`` keys (``Mounts``, ``LogPath``, ``ResolvConfPath``...)."""
    ignores_stop_signal: bool = False
    """The process ignores its stop signal: a stop waits the whole grace period, then
    kills it (exit code 137), as the engine does."""

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.config.get("Labels") or {})

    def inspect(self) -> ContainerInspect:
        info: dict[str, Any] = {
            "Id": self.id,
            "Name": f"/{self.name}",
            "Created": self.created,
            "Image": self.image_id,
            "State": {
                "Status": self.status,
                "Running": self.status == "running",
                "Pid": self.pid if self.status == "running" else 0,
                "ExitCode": self.exit_code,
                "OOMKilled": False,
                "Error": "",
                "StartedAt": self.started_at,
                "FinishedAt": self.finished_at,
            },
            "Config": {**self.config, "Labels": self.labels},
            "HostConfig": dict(self.config.get("HostConfig") or {}),
            "Mounts": [],
            "LogPath": "",
            "ResolvConfPath": "",
            "HostsPath": "",
            **self.extra,
        }
        return cast(ContainerInspect, info)

    def summary(self) -> ContainerSummary:
        return ContainerSummary(
            Id=self.id,
            Names=[f"/{self.name}"],
            Image=str(self.config.get("Image", "")),
            ImageID=self.image_id,
            Created=int(
                datetime.strptime(self.created[:19], "%Y-%m-%dT%H:%M:%S")
                .replace(tzinfo=UTC)
                .timestamp()
            )
            if self.created != _ZERO_TIME
            else 0,
            State=self.status,
            Status=self.status,
            Labels=self.labels,
        )


@dataclass
class _Failure:
    method: str
    error: BaseException
    target: str | None
    times: int | None


class FakeDocker(DockerAPI):
    """A :class:`~asynckubelet.docker.api.DockerAPI` held in memory.

    ``images`` are references present from the start; ``url`` decides whether the engine
    counts as local (``unix://``) or remote (``tcp://``); ``info`` is what ``/info``
    answers; new container ids are ``id_prefix`` followed by a count.
    """

    def __init__(
        self,
        *,
        images: Iterable[str] = (),
        url: str = "unix:///run/fake-docker.sock",
        info: Mapping[str, Any] | None = None,
        id_prefix: str = "c",
    ) -> None:
        self._url = url
        self.info_data: dict[str, Any] = dict(
            info
            if info is not None
            else {
                "ID": "FAKE",
                "DockerRootDir": "/var/lib/docker",
                "CgroupDriver": "cgroupfs",
                "LoggingDriver": "json-file",
                "OperatingSystem": "Fake Engine",
                "SecurityOptions": [],
            }
        )
        self.id_prefix = id_prefix
        self.containers: dict[str, FakeContainer] = {}
        self.images: dict[str, ImageInspect] = {}
        self.volumes: dict[str, dict[str, Any]] = {}
        self.networks: dict[str, dict[str, Any]] = {}
        self.calls: list[Call] = []
        self.exec_results: list[ExecResult | BaseException] = []
        """What the next execs answer, in order (an exception is raised); when empty, an
        exec succeeds with no output."""
        self.event_streams: list[list[Event]] = []
        """Each ``events()`` call serves the next list, then ends as a restarting engine
        ends it (``RuntimeUnavailable``); with none left, it waits for ever."""
        self.pull_stream: list[PullProgress] = []
        """What every pull reports before it succeeds."""
        self.log_lines: dict[str, list[LogLine]] = {}
        self.endless_logs: set[str] = set()
        """Containers whose log never ends: after their ``log_lines`` it gives ``line 1``,
        ``line 2``... for ever, a turn for the other tasks after each (a backlog no reader
        gets to the end of)."""
        self.loaded: list[bytes] = []
        self.stats: dict[str, dict[str, Any]] = {}
        """What ``container_stats`` answers per container id (else counters at zero)."""
        self._open_streams: dict[str, int] = {}
        self._failures: list[_Failure] = []
        self._holds: dict[tuple[str, str | None], anyio.Event] = {}
        self._exits: dict[str, anyio.Event] = {}
        self._ticks = 0
        self._ids = 0
        for ref in images:
            self.add_image(ref)

    # -- scripting ------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        error: BaseException,
        *,
        target: str | None = None,
        times: int | None = 1,
    ) -> None:
        """The next ``times`` calls of ``method`` (about ``target``, when given) raise
        ``error``; ``times=None``: every call until :meth:`recover`."""
        if not hasattr(self, method):
            raise AttributeError(f"FakeDocker has no method {method!r}")
        self._failures.append(_Failure(method, error, target, times))

    def recover(self, method: str | None = None) -> None:
        """Drop the scripted failures (of ``method``, or all)."""
        self._failures = [f for f in self._failures if method is not None and f.method != method]

    def hold(self, method: str, *, target: str | None = None) -> anyio.Event:
        """The next call of ``method`` (about ``target``) waits until the event is set."""
        event = anyio.Event()
        self._holds[(method, target)] = event
        return event

    def open_streams(self, method: str) -> int:
        """How many streams of ``method`` (``logs``, ``events``) are open now."""
        return self._open_streams.get(method, 0)

    def count(self, method: str) -> int:
        """How many calls of ``method`` were made."""
        return sum(1 for c in self.calls if c.method == method)

    def targets(self, method: str) -> list[str]:
        """What each call of ``method`` was about, in order."""
        return [c.target for c in self.calls if c.method == method]

    async def _enter(self, method: str, target: str = "", command: Sequence[str] = ()) -> None:
        self.calls.append(Call(method, target, tuple(command)))
        hold = self._holds.pop((method, target), None) or self._holds.pop((method, None), None)
        if hold is not None:
            await hold.wait()
        for failure in self._failures:
            if failure.method == method and failure.target in (None, target):
                if failure.times is not None:
                    failure.times -= 1
                    if failure.times <= 0:
                        self._failures.remove(failure)
                raise failure.error

    # -- state ----------------------------------------------------------------------------

    def _tick(self) -> str:
        self._ticks += 1
        return _stamp(self._ticks)

    def add_image(
        self, ref: str, *, user: str = "", digest: str | None = None, id: str | None = None
    ) -> ImageInspect:
        """Make ``ref`` present (``user``: the image's ``Config.User``)."""
        tagged = _tagged(ref)
        image_id = id or "sha256:" + hashlib.sha256(tagged.encode()).hexdigest()
        repo = tagged.rsplit(":", 1)[0] if "@" not in tagged else tagged.split("@", 1)[0]
        image = ImageInspect(
            Id=image_id,
            RepoTags=[tagged],
            RepoDigests=[f"{repo}@{digest}"] if digest else [],
            Config={"User": user},
        )
        self.images[tagged] = image
        return image

    def _image(self, ref: str) -> ImageInspect | None:
        found = self.images.get(_tagged(ref))
        if found is not None:
            return found
        return next((i for i in self.images.values() if i.get("Id") == ref), None)

    def add_container(
        self,
        *,
        id: str | None = None,
        name: str | None = None,
        labels: Mapping[str, str] | None = None,
        image: str = "img",
        state: str = "created",
        exit_code: int = 0,
        extra: Mapping[str, Any] | None = None,
    ) -> FakeContainer:
        """A container as if made earlier (by another agent, or before a restart)."""
        cid = id or self._new_id()
        container = FakeContainer(
            id=cid,
            name=name or cid,
            config=ContainerConfig(Image=image, Labels=dict(labels or {})),
            image_id=str((self._image(image) or {}).get("Id", "")),
            status=state,
            exit_code=exit_code,
            created=self._tick(),
            extra=dict(extra or {}),
        )
        if state in ("running", "exited"):
            container.started_at = container.created
            container.pid = 1000 + len(self.containers)
        if state == "exited":
            container.finished_at = self._tick()
        self.containers[cid] = container
        return container

    def exit(self, container_id: str, *, exit_code: int = 0) -> None:
        """The container's process ends with ``exit_code``."""
        container = self._container(container_id)
        container.status = "exited"
        container.exit_code = exit_code
        container.finished_at = self._tick()
        if container_id in self._exits:
            self._exits.pop(container_id).set()

    def _new_id(self) -> str:
        self._ids += 1
        return f"{self.id_prefix}{self._ids}"

    def _container(self, container_id: str) -> FakeContainer:
        found = self.containers.get(container_id)
        if found is None:
            found = next((c for c in self.containers.values() if c.name == container_id), None)
        if found is None:
            raise errors.NotFound(f"No such container: {container_id}")
        return found

    # -- DockerAPI: system ----------------------------------------------------------------

    @property
    def url(self) -> str:
        return self._url

    async def version(self) -> dict[str, Any]:
        await self._enter("version")
        return {"ApiVersion": "1.41", "Version": "20.10.0"}

    async def info(self) -> dict[str, Any]:
        await self._enter("info")
        return dict(self.info_data)

    async def ping(self) -> bool:
        try:
            await self._enter("ping")
        except errors.RuntimeUnavailable:
            return False
        return True

    # -- DockerAPI: containers ------------------------------------------------------------

    async def create_container(self, config: ContainerConfig, *, name: str) -> str:
        await self._enter("create_container", name)
        if any(c.name == name for c in self.containers.values()):
            raise errors.Conflict(f'Conflict. The container name "/{name}" is already in use')
        image = self._image(str(config.get("Image", "")))
        if image is None:
            raise errors.ImageNotFound(
                f"container {name}: image {config.get('Image')!r} is not present"
            )
        cid = self._new_id()
        self.containers[cid] = FakeContainer(
            id=cid,
            name=name,
            config=config,
            image_id=str(image.get("Id", "")),
            created=self._tick(),
        )
        return cid

    async def start_container(self, container_id: str) -> None:
        await self._enter("start_container", container_id)
        container = self._container(container_id)
        if container.status != "running":
            container.status = "running"
            container.pid = 1000 + len(self.containers)
            container.started_at = self._tick()
            container.finished_at = _ZERO_TIME

    async def stop_container(self, container_id: str, *, grace_period: float) -> None:
        """The process honours the stop signal (exit code 0), unless it ignores it: then it
        is killed once the grace period has passed, if it has not exited by then."""
        await self._enter("stop_container", container_id)
        container = self._container(container_id)
        if container.status != "running":
            return
        if container.ignores_stop_signal:
            with anyio.move_on_after(grace_period):
                await self._exits.setdefault(container.id, anyio.Event()).wait()
            if container.status == "running":
                self.exit(container.id, exit_code=137)
            return
        self.exit(container.id, exit_code=0)

    async def kill_container(self, container_id: str, *, signal: str = "SIGKILL") -> None:
        await self._enter("kill_container", container_id)
        if self._container(container_id).status != "running":
            raise errors.Conflict(f"Container {container_id} is not running")
        self.exit(container_id, exit_code=128 + _SIGNALS.get(signal, 9))

    async def update_container(self, container_id: str, resources: HostConfig) -> None:
        """The cgroup settings land in the container's ``HostConfig``, as inspect shows."""
        await self._enter("update_container", container_id)
        config = self._container(container_id).config
        config["HostConfig"] = {**(config.get("HostConfig") or {}), **resources}

    async def remove_container(
        self, container_id: str, *, force: bool = True, missing_ok: bool = True
    ) -> None:
        await self._enter("remove_container", container_id)
        try:
            container = self._container(container_id)
        except errors.NotFound:
            if not missing_ok:
                raise
            return
        if container.status == "running" and not force:
            raise errors.Conflict(f"You cannot remove a running container {container.id}")
        if container.status == "running":
            self.exit(container.id, exit_code=137)
        del self.containers[container.id]

    async def inspect_container(self, container_id: str) -> ContainerInspect:
        await self._enter("inspect_container", container_id)
        return self._container(container_id).inspect()

    async def list_containers(
        self,
        *,
        labels: Mapping[str, str | None] | None = None,
        name: str | None = None,
        all: bool = True,
    ) -> list[ContainerSummary]:
        await self._enter("list_containers")
        rows = []
        for c in self.containers.values():
            own = c.labels
            if not all and c.status != "running":
                continue
            if any(
                k not in own or (v is not None and own[k] != v) for k, v in (labels or {}).items()
            ):
                continue
            if name is not None and not re.search(name, f"/{c.name}"):
                continue
            rows.append(c.summary())
        return rows

    async def wait_container(self, container_id: str) -> int:
        await self._enter("wait_container", container_id)
        container = self._container(container_id)
        if container.status != "exited":
            await self._exits.setdefault(container.id, anyio.Event()).wait()
        return container.exit_code

    async def container_stats(self, container_id: str, *, one_shot: bool = False) -> dict[str, Any]:
        await self._enter("container_stats", container_id)
        self._container(container_id)
        return dict(
            self.stats.get(container_id)
            or {"read": _stamp(self._ticks), "cpu_stats": {}, "memory_stats": {}}
        )

    async def logs(
        self,
        container_id: str,
        *,
        follow: bool = False,
        stdout: bool = True,
        stderr: bool = True,
        tail: int | None = None,
        since: float | None = None,
        timestamps: bool = False,
    ) -> AsyncIterator[LogLine]:
        await self._enter("logs", container_id)
        container = self._container(container_id)
        wanted = {"stdout"} if stdout else set()
        wanted |= {"stderr"} if stderr else set()
        lines = [line for line in self.log_lines.get(container.id, []) if line.stream in wanted]
        with self._stream("logs"):
            for line in lines[-tail:] if tail else ([] if tail == 0 else lines):
                yield line
            if container.id in self.endless_logs:
                for count in itertools.count(1):
                    yield LogLine(stream="stdout", text=f"line {count}")
                    await anyio.lowlevel.checkpoint()
            if follow and container.status == "running":
                await self._exits.setdefault(container.id, anyio.Event()).wait()

    async def exec_run(
        self,
        container_id: str,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        user: str = "",
        workdir: str | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        await self._enter("exec_run", container_id, cmd)
        if self._container(container_id).status != "running":
            raise errors.Conflict(f"Container {container_id} is not running")
        if not self.exec_results:
            return ExecResult(exit_code=0, stdout=b"", stderr=b"")
        answer = self.exec_results.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def events(
        self, *, filters: Mapping[str, Sequence[str]] | None = None, since: float | None = None
    ) -> AsyncIterator[Event]:
        await self._enter("events")
        with self._stream("events"):
            if not self.event_streams:
                await anyio.sleep_forever()
            for event in self.event_streams.pop(0):
                yield event
        raise errors.RuntimeUnavailable("the engine closed the event stream (restarting)")

    @contextlib.contextmanager
    def _stream(self, method: str) -> Iterator[None]:
        self._open_streams[method] = self._open_streams.get(method, 0) + 1
        try:
            yield
        finally:
            self._open_streams[method] -= 1

    # -- DockerAPI: images ----------------------------------------------------------------

    async def inspect_image(self, ref: str) -> ImageInspect:
        await self._enter("inspect_image", ref)
        image = self._image(ref)
        if image is None:
            raise errors.ImageNotFound(f"image {ref!r} is not present")
        return image

    async def image_exists(self, ref: str) -> bool:
        await self._enter("image_exists", ref)
        return self._image(ref) is not None

    async def pull_image(
        self,
        ref: str,
        *,
        auth: Mapping[str, str] | None = None,
        on_progress: Callable[[PullProgress], None] | None = None,
    ) -> None:
        await self._enter("pull_image", ref)
        for progress in self.pull_stream:
            if on_progress is not None:
                on_progress(progress)
        self.add_image(ref)

    async def load_image(self, data: bytes) -> None:
        """Reads the archive's ``manifest.json``: each image is present under its tags."""
        await self._enter("load_image")
        try:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                member = tar.extractfile("manifest.json")
                manifest = json.loads(member.read()) if member is not None else []
        except (tarfile.TarError, KeyError, ValueError) as e:
            raise errors.ImageError(f"loading image failed: {e}") from e
        self.loaded.append(data)
        for entry in manifest:
            image_id = "sha256:" + str(entry.get("Config", "")).removesuffix(".json")
            for tag in entry.get("RepoTags") or []:
                self.add_image(tag, id=image_id)

    # -- DockerAPI: volumes and networks --------------------------------------------------

    async def create_volume(self, name: str, *, labels: Mapping[str, str]) -> dict[str, Any]:
        await self._enter("create_volume", name)
        volume = self.volumes.setdefault(
            name,
            {
                "Name": name,
                "Labels": dict(labels),
                "Mountpoint": f"/var/lib/docker/volumes/{name}/_data",
            },
        )
        return dict(volume)

    async def create_network(
        self, name: str, *, labels: Mapping[str, str], options: Mapping[str, str] | None = None
    ) -> str:
        await self._enter("create_network", name)
        if name in self.networks:
            raise errors.Conflict(f"network with name {name} already exists")
        network_id = hashlib.sha256(name.encode()).hexdigest()
        self.networks[name] = {
            "Id": network_id,
            "Name": name,
            "Labels": dict(labels),
            "Options": dict(options or {}),
        }
        return network_id

    async def inspect_network(self, name: str) -> dict[str, Any]:
        await self._enter("inspect_network", name)
        network = self.networks.get(name) or next(
            (n for n in self.networks.values() if n["Id"] == name), None
        )
        if network is None:
            raise errors.NotFound(f"network {name} not found")
        return dict(network)

    async def remove_network(self, name: str) -> None:
        await self._enter("remove_network", name)
        self.networks.pop(name, None)


@dataclass
class FakeRoutes:
    """A host routing table for :class:`asynckubelet.cli.instance.RouteTable`: the
    destinations a test lists (``"10.138.7.0/24"``), counted each time they are read."""

    destinations: list[str] = field(default_factory=list)
    reads: int = 0

    def routes(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        self.reads += 1
        return [ipaddress.ip_network(d, strict=False) for d in self.destinations]


__all__ = ["Call", "FakeContainer", "FakeDocker", "FakeRoutes"]
