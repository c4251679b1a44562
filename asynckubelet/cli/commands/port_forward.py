"""``asynckubelet port-forward``: local ports forwarded to a pod's, as ``kubectl port-forward``.

The target is ``pod/NAME`` (or ``NAME``), ``svc/NAME`` or ``deploy/NAME``: a Service's or
Deployment's pod is the first Running one its selector selects, and a Service's port is
translated to its ``targetPort`` (a named one through the pod's container ports), as
kubectl does. Each ``[LOCAL:]REMOTE`` listens on ``--address`` (``localhost``: 127.0.0.1
and ::1 where it can) and prints ``Forwarding from 127.0.0.1:LOCAL -> REMOTE``; each
connection prints ``Handling connection for LOCAL`` and runs over the node daemon's
``portforward`` subresource (:mod:`asynckubelet.api.portforward`), many at once. Ctrl-C
ends it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from asynckubelet.cli.options import LogOptions, NamespaceOpt, NodeRef
from asynckubelet.cli.output import command, fail

if TYPE_CHECKING:
    import anyio.abc

    from asynckubelet.api.portforward import Tunnel

TargetArg = Annotated[
    str, typer.Argument(metavar="TYPE/NAME", help="pod/NAME (or NAME), svc/NAME, deploy/NAME.")
]
PortsArg = Annotated[
    list[str],
    typer.Argument(metavar="[LOCAL:]REMOTE...", help="Ports: 8080, 8080:80, :80 (a free one)."),
]
AddressOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--address",
        metavar="ADDRESS",
        help="Addresses to listen on (comma-separated or repeated); default localhost.",
    ),
]
KINDS = {
    "pod": "pods",
    "pods": "pods",
    "po": "pods",
    "service": "services",
    "services": "services",
    "svc": "services",
    "deployment": "deployments",
    "deployments": "deployments",
    "deploy": "deployments",
    "deployment.apps": "deployments",
    "deployments.apps": "deployments",
}

Get = Callable[[str, str, str], dict[str, Any]]
ListPods = Callable[[str, str], list[dict[str, Any]]]


@dataclass(frozen=True)
class PortSpec:
    """One ``[LOCAL:]REMOTE`` as given: ``local`` None when not given, 0 for a free one."""

    local: int | None
    remote: str


def _port(text: str, spec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise fail(f"Error parsing local port '{text}': in '{spec}'") from None
    if not 0 <= value < 65536:
        raise fail(f"Error parsing local port '{text}': in '{spec}'")
    return value


def parse_ports(specs: Sequence[str]) -> list[PortSpec]:
    """``8080``, ``8080:80``, ``:80`` and ``0:80``, as kubectl reads them."""
    parsed: list[PortSpec] = []
    for spec in specs:
        local, sep, remote = spec.rpartition(":")
        if not sep:
            local, remote = "", spec
        if not remote:
            raise fail(f"Remote port must be > 0: in '{spec}'")
        if remote.isdigit() and not 0 < int(remote) < 65536:
            raise fail(f"Remote port must be > 0 and < 65536: in '{spec}'")
        parsed.append(PortSpec(_port(local, spec) if local else (0 if sep else None), remote))
    return parsed


def _container_port(pod: Mapping[str, Any], name: str) -> int | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == name:
                return int(port["containerPort"])
    return None


def _pod_port(pod: Mapping[str, Any], remote: str) -> int:
    if remote.isdigit():
        return int(remote)
    found = _container_port(pod, remote)
    if found is None:
        raise fail(f"Pod '{pod['metadata']['name']}' does not have a named port '{remote}'")
    return found


def _service_port(service: Mapping[str, Any], pod: Mapping[str, Any], remote: str) -> int:
    """The pod port a Service port (number or name) sends to."""
    name = service["metadata"]["name"]
    for port in (service.get("spec") or {}).get("ports") or []:
        if str(port.get("port")) == remote or (port.get("name") and port["name"] == remote):
            target = port.get("targetPort")
            if target is None or target == 0:
                return int(port["port"])
            if isinstance(target, int) or str(target).isdigit():
                return int(target)
            found = _container_port(pod, str(target))
            if found is None:
                raise fail(f"Pod '{pod['metadata']['name']}' does not have a named port '{target}'")
            return found
    raise fail(f"Service {name} does not have a service port {remote}")


def _selector(labels: Mapping[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items()))


def _first_running(pods: list[dict[str, Any]], what: str) -> dict[str, Any]:
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    running = [p for p in live if (p.get("status") or {}).get("phase") == "Running"]
    chosen = sorted(running or live, key=lambda p: p["metadata"]["name"])
    if not chosen:
        raise fail(f"no pods found for {what}")
    return chosen[0]


def resolve(
    target: str,
    specs: Sequence[PortSpec],
    *,
    namespace: str,
    get: Get,
    list_pods: ListPods,
) -> tuple[dict[str, Any], list[tuple[int, int]]]:
    """The pod to forward to and each ``(local, remote)`` pair (local 0: a free port)."""
    kind, sep, name = target.partition("/")
    if not sep:
        kind, name = "pod", target
    resource = KINDS.get(kind.lower())
    if resource is None or not name:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    obj = get(resource, namespace, name)
    service: dict[str, Any] | None = None
    if resource == "pods":
        pod = obj
    elif resource == "services":
        service = obj
        selector = (obj.get("spec") or {}).get("selector")
        if not selector:
            raise fail(
                f"cannot attach to *v1.Service: invalid service '{name}': "
                "Service is defined without a selector"
            )
        pod = _first_running(list_pods(namespace, _selector(selector)), f"service/{name}")
    else:
        labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels")
        pod = _first_running(list_pods(namespace, _selector(labels)), f"deployment/{name}")
    phase = (pod.get("status") or {}).get("phase")
    if phase != "Running":
        raise fail(f"unable to forward port because pod is not running. Current status={phase}")
    pairs = []
    for spec in specs:
        remote = (
            _service_port(service, pod, spec.remote)
            if service is not None
            else _pod_port(pod, spec.remote)
        )
        local = (
            spec.local
            if spec.local is not None
            else (int(spec.remote) if spec.remote.isdigit() else remote)
        )
        pairs.append((local, remote))
    return pod, pairs


@command()
def port_forward(
    target: TargetArg,
    ports: PortsArg,
    *,
    address: AddressOpt = None,
    namespace: NamespaceOpt = "default",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Forward local ports to a pod's: pod/NAME, svc/NAME (its targetPort) or deploy/NAME
    (its first Running pod), as `kubectl port-forward`; Ctrl-C ends it."""
    from asynckubelet.cli.client import node_api
    from asynckubelet.cli.output import run_async, stopped_by_signal

    specs = parse_ports(ports)
    addresses = [a.strip() for given in address or ["localhost"] for a in given.split(",")]
    with node_api(node, needs="port-forward") as api:

        def list_pods(ns: str, selector: str) -> list[dict[str, Any]]:
            return api.list("pods", ns, selector=selector)

        pod, pairs = resolve(target, specs, namespace=namespace, get=api.get, list_pods=list_pods)
        from asynckubelet.node.locate import SOCKET_NAME

        socket = node.state / SOCKET_NAME
        name = pod["metadata"]["name"]
        # Ctrl-C (or SIGTERM) cancels the forwarding and ends it with 0, as kubectl's.
        run_async(stopped_by_signal, _forward_all, str(socket), namespace, name, pairs, addresses)


def _hosts(addresses: Sequence[str]) -> list[tuple[str, bool]]:
    """``(host, required)``: localhost's ::1 is taken only where it can be bound."""
    hosts: list[tuple[str, bool]] = []
    for address in addresses:
        if address == "localhost":
            hosts += [("127.0.0.1", True), ("::1", False)]
        else:
            hosts.append((address, True))
    return hosts


def _say(text: str) -> None:
    print(text, flush=True)


async def _forward_all(
    socket: str,
    namespace: str,
    name: str,
    pairs: list[tuple[int, int]],
    addresses: list[str],
) -> None:
    import anyio

    from asynckubelet.api.portforward import port_forward_tunnel

    listeners: list[tuple[anyio.abc.Listener[anyio.abc.SocketStream], int, int]] = []
    try:
        for local, remote in pairs:
            for host, required in _hosts(addresses):
                try:
                    made = await anyio.create_tcp_listener(
                        local_host=host, local_port=local, reuse_port=False
                    )
                except OSError as e:
                    if required:
                        raise fail(f"unable to listen on port {local}: {e.strerror or e}") from None
                    continue
                bound = int(made.listeners[0].extra(anyio.abc.SocketAttribute.local_port))  # noqa: S610
                local = bound
                listeners.append((made, bound, remote))
                shown = f"[{host}]" if ":" in host else host
                _say(f"Forwarding from {shown}:{bound} -> {remote}")
        async with (
            port_forward_tunnel(socket, namespace, name) as tunnel,
            anyio.create_task_group() as tg,
        ):
            for listener, bound, remote in listeners:
                tg.start_soon(_serve, listener, tunnel, bound, remote)
            await tunnel.session.closed.wait()
            tg.cancel_scope.cancel()
        raise fail("lost connection to pod")
    finally:
        for listener, _, _ in listeners:
            with contextlib.suppress(OSError):
                await listener.aclose()


async def _serve(
    listener: anyio.abc.Listener[anyio.abc.SocketStream], tunnel: Tunnel, local: int, remote: int
) -> None:
    async def handle(connection: anyio.abc.SocketStream) -> None:
        _say(f"Handling connection for {local}")
        async with connection:
            problem = await tunnel.forward(connection, remote)
        if problem:
            print(
                f"error: an error occurred forwarding {local} -> {remote}: {problem}",
                file=sys.stderr,
                flush=True,
            )

    await listener.serve(handle)


__all__ = ["PortSpec", "parse_ports", "port_forward", "resolve"]
