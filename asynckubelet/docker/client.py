"""The Docker adapter: the only code in the project that talks to aiodocker.

Each call is typed, maps failures into the project's exception tree
(:mod:`asynckubelet.docker.errors`) and retries only transient failures (daemon
unreachable, connection reset, a busy 5xx) with bounded exponential backoff and jitter.
Calls that are not idempotent are made safe to retry: a create that raced a lost answer
finds the container it made by name instead of failing with a conflict.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager, suppress
from typing import Any, cast

import aiodocker
import aiohttp
import anyio

from asynckubelet import errors
from asynckubelet.docker import logstream
from asynckubelet.docker.connection import EngineConnection, _ping, _streaming
from asynckubelet.docker.errors import is_transient, map_error
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

MAX_LOAD_REPORT_LINES = 4096
"""Lines of an image load's report kept (one per image loaded)."""
MAX_LOAD_ERROR_CHARS = 2048
"""Characters of the engine's refusal of an archive kept."""


def _build_lines(raw: bytes, *, tag: str, step: str) -> list[tuple[str, str]]:
    """One message of the build stream as ``(kind, text)`` items; a reported failure is an
    :class:`~asynckubelet.errors.ImageBuildError` naming ``step``, the last step begun."""
    if not raw.strip():
        return []
    item = json.loads(raw)
    if "error" in item or "errorDetail" in item:
        detail = item.get("errorDetail", {}).get("message") or item.get("error")
        where = f" at {step}" if step else ""
        raise errors.ImageBuildError(
            f'failed to build image "{tag}"{where}: {str(detail).strip()}', image=tag
        )
    found: list[tuple[str, str]] = []
    aux = item.get("aux")
    if isinstance(aux, dict) and aux.get("ID"):
        found.append(("id", str(aux["ID"])))
    for line in str(item.get("stream") or "").splitlines():
        if line.startswith("Step "):
            found.append(("step", line.strip()))
        elif line.strip():
            found.append(("output", line.rstrip()))
    return found


def _load_report(line: bytes, lines: list[str]) -> None:
    """One JSON line of an image load's answer into ``lines``; its error raised."""
    if not line.strip() or len(lines) >= MAX_LOAD_REPORT_LINES:
        return
    try:
        item = json.loads(line)
    except ValueError:
        return
    if not isinstance(item, dict):
        return
    if "error" in item or "errorDetail" in item:
        detail = item.get("errorDetail") or {}
        message = item.get("error") or (detail.get("message") if isinstance(detail, dict) else "")
        raise errors.ImageError(str(message or "unknown error")[:MAX_LOAD_ERROR_CHARS])
    text = str(item.get("stream") or "").strip()
    lines.extend(text.splitlines()[: MAX_LOAD_REPORT_LINES - len(lines)])


class DockerClient(EngineConnection):
    """An async Docker Engine client.

    ``url`` is a ``unix://`` or ``tcp://`` address; ``None`` follows ``DOCKER_HOST``, then
    the default socket, then the project's own engine (``asynckubelet engine start``).
    ``tls`` configures TLS towards a ``tcp://`` engine; ``None`` reads ``DOCKER_TLS_VERIFY``,
    ``DOCKER_TLS`` and ``DOCKER_CERT_PATH`` as the Docker CLI does.
    ``retry_attempts`` and ``retry_max_delay`` bound the retries of transient failures
    (the daemon restarting, a dropped connection). ``request_timeout`` bounds each plain
    API call (a wedged daemon is then unavailable, not a hang); streams, waits, pulls and
    stops have their own bounds.
    """

    # -- system ---------------------------------------------------------------------------

    async def version(self) -> dict[str, Any]:
        return await self._call("version", lambda d: d.version())

    async def info(self) -> dict[str, Any]:
        """``GET /info``: the engine's configuration (cgroup driver and version, ...)."""

        async def get(d: aiodocker.Docker) -> dict[str, Any]:
            return cast(dict[str, Any], await d._query_json("info"))

        return await self._call("info", get)

    async def ping(self) -> bool:
        """True when the daemon answers, False when it does not; never retries.

        An engine that answers but refuses this client (a TLS certificate problem, plain
        HTTP to its TLS port) raises RuntimeUnavailable saying so: no wait can change that.
        """
        try:
            await self._call("ping", _ping, retry=False)
        except errors.DockerError as e:
            if isinstance(e, errors.RuntimeUnavailable) and not is_transient(e):
                raise
            return False
        return True

    # -- containers -----------------------------------------------------------------------

    async def create_container(self, config: ContainerConfig, *, name: str) -> str:
        """Create a container and return its id.

        A retried create whose first attempt did reach the daemon answers 409 for the name;
        then the container already made under that name is returned when its labels are
        ours, so a lost answer never duplicates a container.
        """
        attempts = 0

        async def create(d: aiodocker.Docker) -> str:
            nonlocal attempts
            attempts += 1
            try:
                c = await d.containers.create(config=cast(Any, config), name=name)
            except aiodocker.DockerError as e:
                if e.status == 409 and attempts > 1:
                    info = cast(ContainerInspect, await d.containers.container(name).show())
                    labels = info.get("Config", {}).get("Labels") or {}
                    if labels == (config.get("Labels") or {}):
                        return info["Id"]
                if e.status == 404 and "image" in str(e.message).lower():
                    raise errors.ImageNotFound(
                        f"container {name}: image {config.get('Image')!r} is not present: "
                        f"{e.message}"
                    ) from e
                raise
            return str(c.id)

        return await self._call(f"create container {name}", create)

    async def start_container(self, container_id: str) -> None:
        async def start(d: aiodocker.Docker) -> None:
            # The request aiodocker's ``DockerContainer.start`` makes, without the object:
            # it and its log reader refer to each other, garbage for the cyclic collector.
            async with d._query(
                f"containers/{container_id}/start",
                method="POST",
                headers={"content-type": "application/json"},
            ):
                pass

        await self._call(f"start container {container_id[:12]}", start)

    async def stop_container(self, container_id: str, *, grace_period: float) -> None:
        """SIGTERM (or the image's stop signal), then SIGKILL after ``grace_period`` seconds."""
        seconds = max(0, math.ceil(grace_period))

        async def stop(d: aiodocker.Docker) -> None:
            await d.containers.container(container_id).stop(
                t=seconds, timeout=aiohttp.ClientTimeout(total=seconds + 30)
            )

        await self._call(f"stop container {container_id[:12]}", stop)

    async def kill_container(self, container_id: str, *, signal: str = "SIGKILL") -> None:
        async def kill(d: aiodocker.Docker) -> None:
            await d.containers.container(container_id).kill(signal=signal)

        await self._call(f"kill container {container_id[:12]}", kill)

    async def update_container(self, container_id: str, resources: HostConfig) -> None:
        async def update(d: aiodocker.Docker) -> None:
            await d._query_json(
                f"containers/{container_id}/update",
                "POST",
                data=json.dumps(dict(resources)),
                headers={"Content-Type": "application/json"},
            )

        await self._call(f"update container {container_id[:12]}", update)

    async def remove_container(
        self, container_id: str, *, force: bool = True, missing_ok: bool = True
    ) -> None:
        """Remove a container (and its anonymous volumes); absent is fine when ``missing_ok``."""

        async def remove(d: aiodocker.Docker) -> None:
            await d.containers.container(container_id).delete(force=force, v=True)

        try:
            await self._call(f"remove container {container_id[:12]}", remove)
        except errors.NotFound:
            if not missing_ok:
                raise
        except errors.Conflict as e:
            if "already in progress" not in str(e):
                raise

    async def inspect_container(self, container_id: str) -> ContainerInspect:
        async def show(d: aiodocker.Docker) -> ContainerInspect:
            # ``DockerContainer.show``'s request, without the object (see start_container).
            info = await d._query_json(f"containers/{container_id}/json", method="GET")
            return cast(ContainerInspect, info)

        return await self._call(f"inspect container {container_id[:12]}", show)

    async def list_containers(
        self,
        *,
        labels: Mapping[str, str | None] | None = None,
        name: str | None = None,
        all: bool = True,
    ) -> list[ContainerSummary]:
        """Containers whose labels match (``None`` value: the key is present)."""
        filters: dict[str, list[str]] = {}
        if labels:
            filters["label"] = [k if v is None else f"{k}={v}" for k, v in labels.items()]
        if name:
            filters["name"] = [name]

        async def lst(d: aiodocker.Docker) -> list[ContainerSummary]:
            rows = await d._query_json(
                "containers/json", params={"all": all, "filters": json.dumps(filters)}
            )
            return cast(list[ContainerSummary], rows)

        return await self._call("list containers", lst)

    async def wait_container(self, container_id: str) -> int:
        """Wait until the container exits and return its exit code."""

        async def wait(d: aiodocker.Docker) -> int:
            res = await d.containers.container(container_id).wait(timeout=None)
            return int(res.get("StatusCode", -1))

        return await self._call(f"wait container {container_id[:12]}", wait)

    async def container_stats(self, container_id: str, *, one_shot: bool = False) -> dict[str, Any]:
        params = {"stream": "false", "one-shot": "true" if one_shot else "false"}

        async def stats(d: aiodocker.Docker) -> dict[str, Any]:
            answer = await d._query_json(
                f"containers/{container_id}/stats", method="GET", params=params
            )
            return dict(answer) if isinstance(answer, dict) else {}

        return await self._call(f"read the stats of container {container_id[:12]}", stats)

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
        """The container's output, a line at a time, each tagged with its stream; a line
        longer than :data:`~asynckubelet.docker.logstream.PIECE` bytes comes in pieces
        (``newline=False`` but the last), and no more than a piece per stream is held.

        Followed (``follow``), the output is complete when the container stops
        (:mod:`~asynckubelet.docker.logstream`)."""
        lines = logstream.container_logs(
            self,
            container_id,
            follow=follow,
            stdout=stdout,
            stderr=stderr,
            tail=tail,
            since=since,
            timestamps=timestamps,
        )
        async with aclosing(lines):
            async for line in lines:
                yield line

    @asynccontextmanager
    async def log_response(
        self, container_id: str, params: Mapping[str, Any]
    ) -> AsyncIterator[aiohttp.StreamReader]:
        """The body of ``GET /containers/{id}/logs`` with ``params``, released on exit."""
        docker = self._connect()
        async with _streaming(
            docker,
            f"containers/{container_id}/logs",
            method="GET",
            params=dict(params),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
        ) as response:
            yield response.content

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
        """Run ``cmd`` in a running container, wait for it to end and collect its output.

        On ``timeout`` the output so far is dropped and :class:`TimeoutError` is raised; the
        process goes on in the container, as Docker gives no way to stop an exec.
        """

        async def run(d: aiodocker.Docker) -> ExecResult:
            container = d.containers.container(container_id)
            ex = await container.exec(
                list(cmd), stdout=True, stderr=True, user=user, environment=env, workdir=workdir
            )
            out: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
            async with ex.start(detach=False) as stream:
                while True:
                    msg = await stream.read_out()
                    if msg is None:
                        break
                    out.setdefault(msg.stream, bytearray()).extend(msg.data)
            code: int | None = None
            for _ in range(200):
                info = await ex.inspect()
                if not info.get("Running") and info.get("ExitCode") is not None:
                    code = int(info["ExitCode"])
                    break
                await anyio.sleep(0.01)
            return ExecResult(
                exit_code=-1 if code is None else code, stdout=bytes(out[1]), stderr=bytes(out[2])
            )

        with anyio.fail_after(timeout):
            return await self._call(f"exec in container {container_id[:12]}", run, retry=False)

    async def events(
        self, *, filters: Mapping[str, Sequence[str]] | None = None, since: float | None = None
    ) -> AsyncIterator[Event]:
        """Docker's event stream, until the daemon closes it (then the iterator ends)."""
        wanted = {k: list(v) for k, v in (filters or {}).items()}
        params: dict[str, Any] = {"filters": json.dumps(wanted)}
        if since is not None:
            params["since"] = f"{since:.9f}"
        docker = self._connect()
        try:
            async with _streaming(
                docker,
                "events",
                method="GET",
                params=params,
                timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            ) as response:
                async for line in response.content:
                    if line.strip():
                        yield cast(Event, json.loads(line))
        except (aiodocker.DockerError, aiohttp.ClientError, OSError) as e:
            raise map_error(e, what="events") from e

    # -- images ---------------------------------------------------------------------------

    async def inspect_image(self, ref: str) -> ImageInspect:
        async def inspect(d: aiodocker.Docker) -> ImageInspect:
            return cast(ImageInspect, await d.images.inspect(ref))

        try:
            return await self._call(f"image {ref}", inspect)
        except errors.NotFound as e:
            raise errors.ImageNotFound(f"image {ref!r} is not present") from e

    async def image_exists(self, ref: str) -> bool:
        try:
            await self.inspect_image(ref)
        except errors.ImageNotFound:
            return False
        return True

    async def pull_progress(
        self, ref: str, *, auth: Mapping[str, str] | None = None
    ) -> AsyncIterator[PullProgress]:
        """Pull ``ref`` once (no retries), yielding each message of Docker's pull stream.

        ``auth`` is a registry auth object (username/password/serveraddress). A failure the
        daemon reports mid-stream is an :class:`~asynckubelet.errors.ImagePullError`; a
        consumer that stops early (or is cancelled) releases the connection.
        """
        headers: dict[str, str] = {}
        if auth:
            headers["X-Registry-Auth"] = _auth_header(auth)
        docker = self._connect()
        try:
            async with _streaming(
                docker,
                "images/create",
                "POST",
                params={"fromImage": ref},
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            ) as response:
                async for line in response.content:
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    if "error" in item or "errorDetail" in item:
                        detail = item.get("errorDetail", {}).get("message") or item.get("error")
                        raise errors.ImagePullError(
                            f'failed to pull image "{ref}": {detail}', image=ref
                        )
                    yield PullProgress.from_json(item)
        except (aiodocker.DockerError, aiohttp.ClientError, OSError) as e:
            raise map_error(e, what=f"pull image {ref}", address=self._address) from e

    async def build_image(
        self,
        context: bytes,
        *,
        tag: str,
        dockerfile: str,
        target: str = "",
        args: Mapping[str, str] | None = None,
    ) -> AsyncIterator[tuple[str, str]]:
        """Build ``context`` (a tar) with the engine's classic builder and its cache, tagged
        ``tag``: yields ``("step", line)`` for each ``Step N/M`` line, ``("output", line)``
        for the rest, and ``("id", image_id)`` last. A failure the daemon reports is an
        :class:`~asynckubelet.errors.ImageBuildError` naming the step it failed at."""
        params = {"t": tag, "dockerfile": dockerfile, "rm": "1", "forcerm": "1"}
        if target:
            params["target"] = target
        if args:
            params["buildargs"] = json.dumps(dict(args))
        docker = self._connect()
        step = ""
        image_id = ""
        try:
            async with _streaming(
                docker,
                "build",
                "POST",
                params=params,
                data=context,
                headers={"Content-Type": "application/x-tar"},
                timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            ) as response:
                async for raw in response.content:
                    for kind, text in _build_lines(raw, tag=tag, step=step):
                        if kind == "step":
                            step = text
                        if kind == "id":
                            image_id = text
                        else:
                            yield (kind, text)
        except (aiodocker.DockerError, aiohttp.ClientError, OSError) as e:
            mapped = map_error(e, what=f"build image {tag}", address=self._address)
            if isinstance(mapped, errors.RuntimeUnavailable):
                raise mapped from e
            raise errors.ImageBuildError(
                f'failed to build image "{tag}": {getattr(e, "message", e)}', image=tag
            ) from e
        if not image_id:
            image_id = (await self.inspect_image(tag)).get("Id", "")
        yield ("id", image_id)

    async def pull_image(
        self,
        ref: str,
        *,
        auth: Mapping[str, str] | None = None,
        on_progress: Callable[[PullProgress], None] | None = None,
    ) -> None:
        """Pull ``ref``; ``auth`` is a registry auth object (username/password/serveraddress).

        ``on_progress`` receives each message of the pull stream. Transient failures are
        retried; any other failure, including one the daemon reports mid-stream, is an
        :class:`~asynckubelet.errors.ImagePullError` naming the image.
        """

        async def pull(_: aiodocker.Docker) -> None:
            async for progress in self.pull_progress(ref, auth=auth):
                if on_progress is not None:
                    on_progress(progress)

        try:
            await self._call(f"pull image {ref}", pull)
        except errors.ImageError:
            raise
        except errors.RuntimeUnavailable:
            raise
        except errors.DockerError as e:
            raise errors.ImagePullError(f'failed to pull image "{ref}": {e}', image=ref) from e

    async def push_image(self, ref: str, *, auth: Mapping[str, str] | None = None) -> None:
        """Push ``ref`` to its registry; a failure the daemon reports mid-stream is an error."""
        repo, _, tag = ref.rpartition(":")
        if "/" in tag or not repo:
            repo, tag = ref, "latest"
        headers = {"X-Registry-Auth": _auth_header(auth or {})}

        async def push(d: aiodocker.Docker) -> None:
            async with _streaming(
                d,
                f"images/{repo}/push",
                "POST",
                params={"tag": tag},
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            ) as response:
                async for line in response.content:
                    if line.strip():
                        item = json.loads(line)
                        if "error" in item or "errorDetail" in item:
                            raise errors.ImageError(f"pushing {ref} failed: {item.get('error')}")

        await self._call(f"push image {ref}", push)

    async def load_image(self, data: bytes) -> None:
        """Load a ``docker save``-format archive (``POST /images/load``)."""

        async def load(d: aiodocker.Docker) -> None:
            async with _streaming(
                d,
                "images/load",
                "POST",
                data=io.BytesIO(data),
                headers={"Content-Type": "application/x-tar"},
                timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            ) as response:
                body = await response.read()
            for line in body.splitlines():
                if line.strip():
                    item = json.loads(line)
                    if "error" in item or "errorDetail" in item:
                        raise errors.ImageError(f"loading image failed: {item}")

        await self._call("load image", load)

    async def load_images(self, chunks: AsyncIterable[bytes]) -> list[str]:
        """Load a ``docker save``-format archive (plain or compressed) sent to the engine
        as ``chunks`` come (``POST /images/load``), never held whole: the engine's
        report, one line per image (``Loaded image: NAME``, ``Loaded image ID: ID``), as
        ``docker load`` prints it. Not retried (the chunks are spent);
        :class:`~errors.ImageError` with the engine's message when it refuses the archive."""

        async def load(d: aiodocker.Docker) -> list[str]:
            lines: list[str] = []
            async with _streaming(
                d,
                "images/load",
                "POST",
                params={"quiet": "1"},
                data=chunks,
                headers={"Content-Type": "application/x-tar"},
                timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            ) as response:
                try:
                    async for line in response.content:
                        _load_report(line, lines)
                except ValueError as e:  # a line past aiohttp's bound
                    raise errors.ImageError(f"the engine's answer is not readable: {e}") from e
            return lines

        return await self._call("load images", load, retry=False)

    async def remove_image(self, ref: str, *, force: bool = False) -> None:
        async def remove(d: aiodocker.Docker) -> None:
            await d.images.delete(ref, force=force)

        with suppress(errors.NotFound):
            await self._call(f"remove image {ref}", remove)

    # -- volumes --------------------------------------------------------------------------

    async def create_volume(self, name: str, *, labels: Mapping[str, str]) -> dict[str, Any]:
        """Create a local named volume (idempotent in Docker) and return its inspect JSON."""

        async def create(d: aiodocker.Docker) -> dict[str, Any]:
            body = {"Name": name, "Labels": dict(labels)}
            data = await d._query_json(
                "volumes/create",
                "POST",
                data=json.dumps(body),
                headers={"Content-Type": "application/json"},
            )
            return cast(dict[str, Any], data)

        return await self._call(f"create volume {name}", create)

    async def inspect_volume(self, name: str) -> dict[str, Any]:
        async def show(d: aiodocker.Docker) -> dict[str, Any]:
            return cast(dict[str, Any], await d._query_json(f"volumes/{name}"))

        return await self._call(f"inspect volume {name}", show)

    async def list_volumes(self, *, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}

        async def lst(d: aiodocker.Docker) -> list[dict[str, Any]]:
            data = await d._query_json("volumes", params={"filters": json.dumps(filters)})
            return cast(list[dict[str, Any]], data.get("Volumes") or [])

        return await self._call("list volumes", lst)

    async def remove_volume(self, name: str) -> None:
        """Remove a named volume; absent is fine."""

        async def remove(d: aiodocker.Docker) -> None:
            await d._query_json(f"volumes/{name}", "DELETE")

        with suppress(errors.NotFound):
            await self._call(f"remove volume {name}", remove)

    async def tag_image(self, ref: str, *, repo: str, tag: str) -> None:
        async def do_tag(d: aiodocker.Docker) -> None:
            await d.images.tag(ref, repo, tag=tag)

        await self._call(f"tag image {ref}", do_tag)

    async def create_network(
        self, name: str, *, labels: Mapping[str, str], options: Mapping[str, str] | None = None
    ) -> str:
        """Create a user-defined bridge network; returns its id."""
        body: dict[str, Any] = {
            "Name": name,
            "Driver": "bridge",
            "CheckDuplicate": True,
            "Labels": dict(labels),
            "Options": dict(options or {}),
        }

        async def create(d: aiodocker.Docker) -> str:
            network = await d.networks.create(body)
            return str(network.id)

        return await self._call(f"create network {name}", create, retry=False)

    async def inspect_network(self, name: str) -> dict[str, Any]:
        async def show(d: aiodocker.Docker) -> dict[str, Any]:
            return cast(dict[str, Any], await d._query_json(f"networks/{name}"))

        return await self._call(f"inspect network {name}", show)

    async def list_networks(self, *, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}

        async def lst(d: aiodocker.Docker) -> list[dict[str, Any]]:
            data = await d._query_json("networks", params={"filters": json.dumps(filters)})
            return cast(list[dict[str, Any]], data)

        return await self._call("list networks", lst)

    async def remove_network(self, name: str) -> None:
        """Remove a network; absent is fine."""

        async def remove(d: aiodocker.Docker) -> None:
            await d._query_json(f"networks/{name}", "DELETE")

        with suppress(errors.NotFound):
            await self._call(f"remove network {name}", remove)


def _auth_header(auth: Mapping[str, str]) -> str:
    """Docker's ``X-Registry-Auth``: URL-safe base64 of the auth object's JSON."""
    return base64.urlsafe_b64encode(json.dumps(dict(auth)).encode()).decode()


def default_docker_url() -> str | None:
    """``DOCKER_HOST`` when set, else None (aiodocker then finds the default socket)."""
    return os.environ.get("DOCKER_HOST") or None
