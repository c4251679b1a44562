"""Handlers shared by probes and lifecycle hooks, and the kubelet's hook runner.

A handler (``exec``, ``httpGet``, ``tcpSocket``, ``sleep``) runs against one container.
``httpGet`` and ``tcpSocket`` connect from the node to the pod IP; a pod without a
reachable IP (the loopback-only network) is reached inside its network namespace: a
worker thread enters the sandbox's namespace with ``setns(2)`` (which changes only the
calling thread), opens the socket there and returns to the node's namespace; the socket
keeps the namespace it was made in, and the HTTP exchange runs on it in the same thread.
That needs a local daemon and root, and no tools in the image. A node that cannot reach
the pod at all (a remote daemon) runs ``httpGet`` and ``tcpSocket`` in the pod's probe
helper container through Docker exec (:mod:`asynckubelet.runtime.probehelper`), with the
same verdicts and messages.

Hooks follow ``kuberuntime``: ``postStart`` runs right after the start and its failure
kills the container (``FailedPostStartHook``); ``preStop`` runs before the stop signal,
bounded by the grace period, and its time is taken from that period. Hook event texts
never carry the handler's output (it may hold secrets), as in the kubelet.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import http.client
import json
import os
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from lightkube.models.core_v1 import Container, Pod

from asynckubelet import errors
from asynckubelet.docker import DockerAPI
from asynckubelet.runtime.probes import ProbeResult

MAX_PROBE_OUTPUT = 10 * 1024
"""Bytes of a probe's output kept for the event (kubelet ``maxReadLength``)."""
EXEC_MARGIN = 5.0
"""Seconds a Docker exec round trip to the probe helper may take beyond the probe's own."""
CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class Outcome:
    result: ProbeResult
    output: str = ""
    error: str = ""


@dataclass(frozen=True)
class HookTarget:
    """Where a probe goes: the container, the pod IP and, failing that, the pod's netns;
    or the pod's probe helper container (``helper``), which connects to ``host`` from
    inside the pod's network namespace. ``error``: no way to reach the pod was found."""

    container_id: str
    host: str
    netns: str | None
    helper: str | None = None
    error: str = ""


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


def _helper_verdict(output: str, *, host: str, port: int, url: str | None) -> Outcome:
    """The kubelet's outcome from the probe program's verdict line (``probe.c``)."""
    first, _, rest = output.partition("\n")
    word, _, detail = first.partition(" ")
    prefix = f'Get "{url}": ' if url is not None else ""
    if word == "ok":
        return Outcome(ProbeResult.SUCCESS)
    if word == "status" and detail.isdigit():
        status = int(detail)
        if 200 <= status < 400:
            return Outcome(ProbeResult.SUCCESS, rest[:MAX_PROBE_OUTPUT])
        return Outcome(ProbeResult.FAILURE, f"HTTP probe failed with statuscode: {status}")
    if word == "dial" and detail.isdigit():
        reason = os.strerror(int(detail)).lower()
        return Outcome(
            ProbeResult.FAILURE, f"{prefix}dial tcp {_host_port(host, port)}: connect: {reason}"
        )
    if first == "timeout dial":
        return Outcome(
            ProbeResult.FAILURE, f"{prefix}dial tcp {_host_port(host, port)}: i/o timeout"
        )
    if first == "timeout headers":
        return Outcome(
            ProbeResult.FAILURE,
            f"{prefix}context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
        )
    if word == "error":
        return Outcome(ProbeResult.FAILURE, f"{prefix}{detail}")
    return Outcome(ProbeResult.UNKNOWN, error=f"the probe helper answered {first!r}")


async def _in_helper(
    docker: DockerAPI, helper: str, command: list[str], *, timeout: float
) -> str | Outcome:
    try:
        result = await docker.exec_run(helper, command, timeout=timeout + EXEC_MARGIN)
    except TimeoutError:
        return Outcome(ProbeResult.UNKNOWN, error="the probe helper did not answer in time")
    except errors.DockerError as e:
        return Outcome(ProbeResult.UNKNOWN, error=f"the probe helper failed: {e}")
    if result.exit_code != 0:
        return Outcome(
            ProbeResult.UNKNOWN,
            error=f"the probe helper exited with {result.exit_code}: {result.output.strip()}",
        )
    return result.stdout.decode(errors="replace")


def helper_http_command(
    *, host: str, port: int, path: str, headers: Mapping[str, str], timeout: float
) -> list[str]:
    """The probe program's command line for an HTTP GET, with the kubelet's headers."""
    sent = {"Host": _host_port(host, port), "User-Agent": "kube-probe/1.33", "Accept": "*/*"}
    for name, value in headers.items():
        match = next((k for k in sent if k.lower() == name.lower()), name)
        sent[match] = value
    lines = [f"{name}: {value}" for name, value in sent.items()]
    return ["/probe", "http", host, str(port), path, str(max(int(timeout * 1000), 1)), *lines]


def helper_tcp_command(*, host: str, port: int, timeout: float) -> list[str]:
    """The probe program's command line for a TCP connect."""
    return ["/probe", "tcp", host, str(port), str(max(int(timeout * 1000), 1))]


async def run_handler(
    handler: Any,
    container: Container,
    target: HookTarget,
    *,
    docker: DockerAPI,
    timeout: float,
) -> Outcome:
    """Run one ``exec``/``httpGet``/``tcpSocket``/``grpc`` handler (probes and hooks)."""
    if target.error and handler.exec is None:
        return Outcome(ProbeResult.UNKNOWN, error=target.error)
    if handler.exec is not None:
        return await _run_exec(handler.exec, target, docker=docker, timeout=timeout)
    if handler.httpGet is not None:
        return await _run_http(handler.httpGet, container, target, docker=docker, timeout=timeout)
    if handler.tcpSocket is not None:
        return await _run_tcp(handler.tcpSocket, container, target, docker=docker, timeout=timeout)
    if getattr(handler, "sleep", None) is not None:
        await anyio.sleep(float(handler.sleep.seconds or 0))
        return Outcome(ProbeResult.SUCCESS)
    if getattr(handler, "grpc", None) is not None:
        probe = handler.grpc
        if target.helper is not None:
            return Outcome(
                ProbeResult.UNKNOWN,
                error="gRPC probes cannot run where the node cannot reach the pod",
            )
        return await grpc_probe(
            target.host,
            int(probe.port),
            service=probe.service or "",
            timeout=timeout,
            netns=target.netns,
        )
    return Outcome(ProbeResult.UNKNOWN, error=f"missing probe handler for {container.name}")


async def _run_exec(
    action: Any, target: HookTarget, *, docker: DockerAPI, timeout: float
) -> Outcome:
    command = list(action.command or [])
    try:
        result = await docker.exec_run(target.container_id, command, timeout=timeout)
    except TimeoutError:
        joined = json.dumps(" ".join(command))
        return Outcome(ProbeResult.FAILURE, f"command {joined} timed out")
    except errors.DockerError as e:
        return Outcome(ProbeResult.UNKNOWN, error=str(e))
    output = result.output[:MAX_PROBE_OUTPUT]
    if result.exit_code == 0:
        return Outcome(ProbeResult.SUCCESS, output)
    return Outcome(ProbeResult.FAILURE, output)


async def _run_http(
    get: Any, container: Container, target: HookTarget, *, docker: DockerAPI, timeout: float
) -> Outcome:
    try:
        port = _port(get.port, container)
    except ValueError as e:
        return Outcome(ProbeResult.UNKNOWN, error=str(e))
    host = get.host or target.host
    headers = {h.name: h.value for h in get.httpHeaders or []}
    path = get.path or "/"
    if not path.startswith("/"):
        path = "/" + path
    if target.helper is not None:
        scheme = (get.scheme or "HTTP").upper()
        if scheme != "HTTP":
            return Outcome(
                ProbeResult.UNKNOWN,
                error=f"{scheme} probes cannot run where the node cannot reach the pod: "
                "the probe helper speaks plain HTTP only",
            )
        command = helper_http_command(
            host=host, port=port, path=path, headers=headers, timeout=timeout
        )
        answer = await _in_helper(docker, target.helper, command, timeout=timeout)
        if isinstance(answer, Outcome):
            return answer
        url = f"http://{_host_port(host, port)}{path}"
        return _helper_verdict(answer, host=host, port=port, url=url)
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


async def _run_tcp(
    sock: Any, container: Container, target: HookTarget, *, docker: DockerAPI, timeout: float
) -> Outcome:
    try:
        port = _port(sock.port, container)
    except ValueError as e:
        return Outcome(ProbeResult.UNKNOWN, error=str(e))
    host = sock.host or target.host
    netns = None if sock.host else target.netns
    if target.helper is not None:
        command = helper_tcp_command(host=host, port=port, timeout=timeout)
        answer = await _in_helper(docker, target.helper, command, timeout=timeout)
        if isinstance(answer, Outcome):
            return answer
        return _helper_verdict(answer, host=host, port=port, url=None)
    return await anyio.to_thread.run_sync(
        lambda: tcp_probe(host, port, timeout=timeout, netns=netns)
    )


HEALTH_CHECK = "/grpc.health.v1.Health/Check"
SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _health_request(service: str) -> bytes:
    """``grpc.health.v1.HealthCheckRequest{service}`` in protobuf wire form."""
    data = service.encode()
    return (b"\x0a" + _varint(len(data)) + data) if data else b""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _health_status(response: bytes) -> int:
    """The ``status`` (field 1, varint) of a ``HealthCheckResponse``; 0 when absent."""
    if len(response) >= 2 and response[0] == 0x08:
        return response[1] & 0x7F
    return 0


def _go_duration(seconds: float) -> str:
    return f"{seconds:g}s"


async def grpc_probe(
    host: str, port: int, *, service: str, timeout: float, netns: str | None
) -> Outcome:
    """The kubelet's gRPC probe: ``grpc.health.v1.Health/Check``, success on ``SERVING``.

    Needs the ``grpc`` extra (grpcio). Inside a pod's network namespace, the connection is
    made there and relayed through a loopback port of the node for the gRPC client.
    """
    try:
        import grpc  # type: ignore[import-untyped]
        import grpc.aio  # type: ignore[import-untyped]
    except ImportError:
        return Outcome(
            ProbeResult.UNKNOWN,
            error="gRPC probes need grpcio: pip install 'asynckubelet[grpc]'",
        )
    addr = _host_port(host, port)
    async with contextlib.AsyncExitStack() as stack:
        dial = addr
        if netns is not None:
            try:
                sock = await anyio.to_thread.run_sync(
                    lambda: connect(host, port, timeout=timeout, netns=netns)
                )
            except OSError as e:
                return Outcome(
                    ProbeResult.FAILURE,
                    f'error: failed to connect service at "{addr}": {_dial_error(host, port, e)}',
                )
            dial = await stack.enter_async_context(_relay(sock))
        channel = grpc.aio.insecure_channel(
            dial, options=[("grpc.primary_user_agent", "kube-probe/1.33")]
        )
        stack.push_async_callback(channel.close)
        try:
            with anyio.fail_after(timeout):
                await channel.channel_ready()
        except TimeoutError:
            return Outcome(
                ProbeResult.FAILURE,
                f'timeout: failed to connect service "{addr}" within {_go_duration(timeout)}: '
                "context deadline exceeded",
            )
        check = channel.unary_unary(
            HEALTH_CHECK,
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        try:
            response = await check(_health_request(service), timeout=timeout)
        except grpc.aio.AioRpcError as e:
            code = e.code()
            if code == grpc.StatusCode.UNIMPLEMENTED:
                return Outcome(
                    ProbeResult.FAILURE,
                    "this server does not implement the grpc health protocol "
                    f"(grpc.health.v1.Health): {e.details()}",
                )
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return Outcome(
                    ProbeResult.FAILURE,
                    f"timeout: health rpc did not complete within {_go_duration(timeout)}",
                )
            return Outcome(
                ProbeResult.FAILURE,
                "error: health rpc probe failed: rpc error: code = "
                f"{code.name.title().replace('_', '')} desc = {e.details()}",
            )
        status = _health_status(response)
        if status != 1:
            name = SERVING_STATUS.get(status, str(status))
            return Outcome(ProbeResult.FAILURE, f'service unhealthy (responded with "{name}")')
        return Outcome(ProbeResult.SUCCESS, "service healthy")
    raise AssertionError("unreachable")  # pragma: no cover


@contextlib.asynccontextmanager
async def _relay(sock: socket.socket) -> AsyncIterator[str]:
    """A loopback port of the node whose one connection is piped to ``sock``."""
    sock.setblocking(False)
    upstream_reader, upstream_writer = await asyncio.open_connection(sock=sock)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    tasks: list[asyncio.Task[None]] = []

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.append(asyncio.ensure_future(pipe(reader, upstream_writer)))
        tasks.append(asyncio.ensure_future(pipe(upstream_reader, writer)))

    server = await asyncio.start_server(accepted, host="127.0.0.1", port=0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        upstream_writer.close()


def _pod_ref(pod: Pod) -> str:
    meta = pod.metadata
    assert meta is not None  # noqa: S101  (type narrowing: an admitted pod has metadata)
    return f"{meta.name}_{meta.namespace or 'default'}({meta.uid or ''})"


async def run_hook(
    handler: Any,
    pod: Pod,
    container: Container,
    target: HookTarget,
    *,
    docker: DockerAPI,
    timeout: float | None,
) -> str | None:
    """Run a lifecycle handler; None on success, else the kubelet's failure message."""
    if handler.sleep is not None:
        seconds = float(handler.sleep.seconds or 0)
        await anyio.sleep(seconds if timeout is None else min(seconds, timeout))
        return None
    if handler.exec is not None:
        command = list(handler.exec.command or [])
        joined = " ".join(command)
        try:
            result = await docker.exec_run(target.container_id, command, timeout=timeout)
        except TimeoutError:
            error, output = f"command {json.dumps(joined)} timed out", ""
        except errors.DockerError as e:
            error, output = str(e), ""
        else:
            if result.exit_code == 0:
                return None
            stderr = result.stderr.decode(errors="replace")
            error = f"command '{joined}' exited with {result.exit_code}: {stderr}"
            output = result.output
        return (
            f"Exec lifecycle hook ([{joined}]) for Container {json.dumps(container.name)} in Pod "
            f"{json.dumps(_pod_ref(pod))} failed - error: {error}, message: {json.dumps(output)}"
        )
    if handler.httpGet is not None:
        outcome = await run_handler(
            handler, container, target, docker=docker, timeout=timeout or 10.0
        )
        if outcome.result is ProbeResult.SUCCESS or outcome.output.startswith("HTTP probe"):
            return None
        return (
            f'HTTP lifecycle hook ({handler.httpGet.path or "/"}) for Container "{container.name}" '
            f'in Pod "{_pod_ref(pod)}" failed - error: {outcome.output or outcome.error}'
        )
    if handler.tcpSocket is not None:
        return None
    return f'missing lifecycle handler for container "{container.name}"'
