"""The kubelet's prober: liveness, readiness and startup probes of one pod's containers.

One worker per (container instance, probe kind), as the kubelet's ``prober/worker.go``:
it waits ``initialDelaySeconds`` after the container started, probes every
``periodSeconds`` with ``timeoutSeconds``, and flips the result only after
``successThreshold`` / ``failureThreshold`` consecutive outcomes. Liveness and readiness
do not probe before the startup probe has succeeded, and the startup probe stops once it
has. A failed liveness or startup result is held until the container is replaced (a new
instance gets new workers). Each failure records an ``Unhealthy`` event with the
kubelet's text.

The verdicts feed the pure deciders: ``liveness``/``startup`` keyed by Docker container
id go to ``compute_pod_actions``; ``readiness``/``started`` keyed by container name go to
``status.generate``.

``httpGet`` and ``tcpSocket`` connect from the node to the pod IP. A pod without a
reachable IP (the loopback-only network) is probed from inside its network namespace:
a worker thread enters the sandbox's namespace with ``setns(2)`` (which changes only the
calling thread), opens the socket there and returns to the node's namespace; the socket
keeps the namespace it was made in. That needs a local daemon and root, and no tools in
the image. The HTTP exchange then runs on that socket in the same thread.
"""

from __future__ import annotations

import ctypes
import http.client
import os
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.abc
from lightkube.models.core_v1 import Container, Pod, Probe
from loguru import logger

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.runtime.probes import ProbeResult
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus

LIVENESS = "Liveness"
READINESS = "Readiness"
STARTUP = "Startup"
INITIAL = {
    LIVENESS: ProbeResult.SUCCESS,
    READINESS: ProbeResult.FAILURE,
    STARTUP: ProbeResult.UNKNOWN,
}
"""The kubelet's initial results: live until proven dead, not ready until proven ready."""
MAX_PROBE_OUTPUT = 10 * 1024
"""Bytes of a probe's output kept for the event (kubelet ``maxReadLength``)."""
CLONE_NEWNET = 0x40000000

EventSink = Callable[..., None]


@dataclass(frozen=True)
class Outcome:
    result: ProbeResult
    output: str = ""
    error: str = ""


@dataclass(frozen=True)
class Target:
    """Where a probe goes: the container, the pod IP and, failing that, the pod's netns."""

    container_id: str
    host: str
    netns: str | None


def _probe_of(container: Container, kind: str) -> Probe | None:
    return {
        LIVENESS: container.livenessProbe,
        READINESS: container.readinessProbe,
        STARTUP: container.startupProbe,
    }[kind]


def _port(value: Any, container: Container) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    if text.isdigit():
        return int(text)
    for p in container.ports or []:
        if p.name == text:
            return int(p.containerPort)
    raise ValueError(f"couldn't find port: {text} in {container.name}")


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def connect(host: str, port: int, *, timeout: float, netns: str | None) -> socket.socket:
    """A TCP connection to ``host:port``, made inside ``netns`` when given (call in a thread)."""
    if netns is None:
        return socket.create_connection((host, port), timeout=timeout)
    own = f"/proc/{os.getpid()}/task/{threading.get_native_id()}/ns/net"
    home = os.open(own, os.O_RDONLY)
    try:
        _setns(netns)
        try:
            return socket.create_connection((host, port), timeout=timeout)
        finally:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "cannot return to the node's network namespace")
    finally:
        os.close(home)


def _dial_error(host: str, port: int, e: OSError) -> str:
    if isinstance(e, TimeoutError | socket.timeout):
        return f"dial tcp {host}:{port}: i/o timeout"
    reason = (e.strerror or str(e)).lower()
    return f"dial tcp {host}:{port}: connect: {reason}"


def tcp_probe(host: str, port: int, *, timeout: float, netns: str | None) -> Outcome:
    """The kubelet's ``tcp.DoTCPProbe``: success when the connection is accepted."""
    try:
        connect(host, port, timeout=timeout, netns=netns).close()
    except OSError as e:
        return Outcome(ProbeResult.FAILURE, _dial_error(host, port, e))
    return Outcome(ProbeResult.SUCCESS)


def http_probe(
    *,
    scheme: str,
    host: str,
    port: int,
    path: str,
    headers: Mapping[str, str],
    timeout: float,
    netns: str | None,
) -> Outcome:
    """The kubelet's ``http.DoHTTPProbe``: 200-399 is success; TLS is not verified."""
    url = f"{scheme.lower()}://{_host_port(host, port)}{path}"
    try:
        sock = connect(host, port, timeout=timeout, netns=netns)
    except OSError as e:
        return Outcome(ProbeResult.FAILURE, f'Get "{url}": {_dial_error(host, port, e)}')
    try:
        conn: http.client.HTTPConnection
        if scheme.upper() == "HTTPS":
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
            sock = ctx.wrap_socket(sock, server_hostname=host)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.sock = sock
        sent = {"User-Agent": "kube-probe/1.33", "Accept": "*/*", **headers}
        conn.request("GET", path or "/", headers=sent)
        response = conn.getresponse()
        body = response.read(MAX_PROBE_OUTPUT).decode(errors="replace")
        status = response.status
    except TimeoutError:
        return Outcome(
            ProbeResult.FAILURE,
            f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting '
            "headers)",
        )
    except (OSError, http.client.HTTPException) as e:
        return Outcome(ProbeResult.FAILURE, f'Get "{url}": {e}')
    finally:
        sock.close()
    if 200 <= status < 400:
        return Outcome(ProbeResult.SUCCESS, body)
    return Outcome(ProbeResult.FAILURE, f"HTTP probe failed with statuscode: {status}")


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def run_handler(
    handler: Any,
    container: Container,
    target: Target,
    *,
    docker: DockerClient,
    timeout: float,
) -> Outcome:
    """Run one ``exec``/``httpGet``/``tcpSocket``/``grpc`` handler (probes and hooks)."""
    if handler.exec is not None:
        command = list(handler.exec.command or [])
        try:
            result = await docker.exec_run(target.container_id, command, timeout=timeout)
        except TimeoutError:
            return Outcome(ProbeResult.FAILURE, f"command {' '.join(command)!r} timed out")
        except errors.DockerError as e:
            return Outcome(ProbeResult.UNKNOWN, error=str(e))
        output = result.output[:MAX_PROBE_OUTPUT]
        if result.exit_code == 0:
            return Outcome(ProbeResult.SUCCESS, output)
        return Outcome(ProbeResult.FAILURE, output)
    if handler.httpGet is not None:
        get = handler.httpGet
        try:
            port = _port(get.port, container)
        except ValueError as e:
            return Outcome(ProbeResult.UNKNOWN, error=str(e))
        host = get.host or target.host
        headers = {h.name: h.value for h in get.httpHeaders or []}
        path = get.path or "/"
        if not path.startswith("/"):
            path = "/" + path
        return await anyio.to_thread.run_sync(
            lambda: http_probe(
                scheme=get.scheme or "HTTP",
                host=host,
                port=port,
                path=path,
                headers=headers,
                timeout=timeout,
                netns=None if get.host else target.netns,
            )
        )
    if handler.tcpSocket is not None:
        sock = handler.tcpSocket
        try:
            port = _port(sock.port, container)
        except ValueError as e:
            return Outcome(ProbeResult.UNKNOWN, error=str(e))
        host = sock.host or target.host
        netns = None if sock.host else target.netns
        return await anyio.to_thread.run_sync(
            lambda: tcp_probe(host, port, timeout=timeout, netns=netns)
        )
    if getattr(handler, "grpc", None) is not None:
        return Outcome(ProbeResult.UNKNOWN, error="gRPC probes are not supported on this node")
    return Outcome(ProbeResult.UNKNOWN, error=f"missing probe handler for {container.name}")


class _Worker:
    def __init__(
        self, prober: Prober, container: Container, status: ContainerStatus, kind: str
    ) -> None:
        probe = _probe_of(container, kind)
        assert probe is not None
        self.prober = prober
        self.container = container
        self.status = status
        self.kind = kind
        self.probe = probe
        self.result = INITIAL[kind]
        self.run_length = 0
        self.last: ProbeResult | None = None
        self.on_hold = False
        self.scope = anyio.CancelScope()

    async def run(self) -> None:
        probe = self.probe
        period = float(probe.periodSeconds or 10)
        with self.scope:
            while True:
                if not await self.once():
                    return
                await anyio.sleep(period)

    async def once(self) -> bool:
        """One probe; False when the worker should stop."""
        probe = self.probe
        prober = self.prober
        if self.kind == STARTUP and self.result is ProbeResult.SUCCESS:
            return False
        if self.on_hold:
            return True
        if self.kind != STARTUP and not prober.is_started(self.status):
            return True
        started = self.status.started_at or datetime.now(UTC)
        delay = float(probe.initialDelaySeconds or 0)
        if (datetime.now(UTC) - started).total_seconds() < delay:
            return True
        if probe.exec is not None:
            target = Target(container_id=self.status.id, host="", netns=None)
        else:
            target = await prober.target(self.status)
        outcome = await run_handler(
            probe,
            self.container,
            target,
            docker=prober.docker,
            timeout=float(probe.timeoutSeconds or 1),
        )
        if outcome.error:
            prober.event(self.container, f"{self.kind} probe errored: {outcome.error}")
        elif outcome.result is ProbeResult.FAILURE:
            prober.event(self.container, f"{self.kind} probe failed: {outcome.output}")
        result = outcome.result
        if result is self.last:
            self.run_length += 1
        else:
            self.last, self.run_length = result, 1
        failure = int(probe.failureThreshold or 3)
        success = int(probe.successThreshold or 1)
        if (result is ProbeResult.FAILURE and self.run_length < failure) or (
            result is ProbeResult.SUCCESS and self.run_length < success
        ):
            return True
        if result is ProbeResult.UNKNOWN:
            return True
        if result is not self.result:
            self.result = result
            prober.changed()
        if self.kind in (LIVENESS, STARTUP) and result is ProbeResult.FAILURE:
            self.on_hold = True
            self.run_length = 0
        return True


class Prober:
    """The probe workers of one pod. Run :meth:`run` in a task group, call :meth:`update`
    with each fresh runtime status, read the verdicts."""

    def __init__(
        self,
        *,
        docker: DockerClient,
        events: EventSink,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.docker = docker
        self.events = events
        self.on_change = on_change
        self.pod: Pod | None = None
        self.runtime: PodRuntimeStatus | None = None
        self.workers: dict[tuple[str, str], _Worker] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._netns: dict[str, str | None] = {}

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def event(self, container: Container, message: str) -> None:
        assert self.pod is not None
        self.events(
            self.pod, type="Warning", reason="Unhealthy", message=message, container=container.name
        )

    def update(self, pod: Pod, runtime: PodRuntimeStatus) -> None:
        """Start workers for newly running containers; stop those of containers gone."""
        self.pod = pod
        self.runtime = runtime
        assert pod.spec is not None
        specs = {c.name: c for c in list(pod.spec.initContainers or []) + list(pod.spec.containers)}
        wanted: set[tuple[str, str]] = set()
        newest: set[str] = set()
        for cs in runtime.containers:
            if cs.name in newest:
                continue
            newest.add(cs.name)
            spec = specs.get(cs.name)
            if spec is None or cs.state is not ContainerState.RUNNING:
                continue
            for kind in (STARTUP, LIVENESS, READINESS):
                if _probe_of(spec, kind) is None:
                    continue
                key = (cs.id, kind)
                wanted.add(key)
                if key not in self.workers and self._tg is not None:
                    worker = _Worker(self, spec, cs, kind)
                    self.workers[key] = worker
                    self._tg.start_soon(worker.run, name=f"probe {kind} {cs.name}")
        for key in list(self.workers):
            if key not in wanted:
                self.workers.pop(key).scope.cancel()

    def is_started(self, status: ContainerStatus) -> bool:
        worker = self.workers.get((status.id, STARTUP))
        return worker is None or worker.result is ProbeResult.SUCCESS

    def results(self, kind: str) -> dict[str, ProbeResult]:
        """Container id -> the current result of ``kind`` (only probed containers)."""
        return {cid: w.result for (cid, k), w in self.workers.items() if k == kind}

    @property
    def liveness(self) -> dict[str, ProbeResult]:
        return self.results(LIVENESS)

    @property
    def startup(self) -> dict[str, ProbeResult]:
        return self.results(STARTUP)

    def _by_name(self, kind: str) -> dict[str, bool]:
        found: dict[str, bool] = {}
        for (_, k), w in self.workers.items():
            if k == kind:
                found[w.status.name] = w.result is ProbeResult.SUCCESS
        return found

    def readiness(self) -> dict[str, bool]:
        """Container name -> ready, for ``status.generate``."""
        return self._by_name(READINESS)

    def started(self) -> dict[str, bool]:
        """Container name -> started, for ``status.generate``."""
        return self._by_name(STARTUP)

    async def target(self, status: ContainerStatus) -> Target:
        runtime = self.runtime
        pod = self.pod
        host_network = bool(pod is not None and pod.spec is not None and pod.spec.hostNetwork)
        if host_network:
            return Target(container_id=status.id, host="127.0.0.1", netns=None)
        if runtime is not None and runtime.ips:
            return Target(container_id=status.id, host=runtime.ips[0], netns=None)
        return Target(
            container_id=status.id, host="127.0.0.1", netns=await self._sandbox_netns(status)
        )

    async def _sandbox_netns(self, status: ContainerStatus) -> str | None:
        sandbox = status.sandbox_id
        if sandbox not in self._netns:
            try:
                info = await self.docker.inspect_container(sandbox)
                pid = info.get("State", {}).get("Pid", 0)
            except errors.DockerError as e:
                logger.debug("no sandbox pid for probes of {}: {}", status.name, e)
                pid = 0
            self._netns[sandbox] = f"/proc/{pid}/ns/net" if pid else None
        return self._netns[sandbox]


__all__ = ["Prober", "http_probe", "run_handler", "tcp_probe"]
