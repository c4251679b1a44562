"""The node API's remote side: a running daemon, asked over its local API.

Each method is one request on the unix socket in the state dir
(:class:`~asynckubelet.api.client.NodeClient`: the standard library only, so a command
that asks the daemon loads no event loop, no HTTP stack, not even ``typing``), and the daemon
answers from the node's own view: its pods, its objects, its events, its tables.
"""

from __future__ import annotations

import builtins

from asynckubelet import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Any

    from asynckubelet.api.client import NodeClient
    from asynckubelet.api.protocol import ExecTarget, PodLogOptions


class RemoteNode:
    """:class:`~asynckubelet.api.protocol.NodeAPI` over the daemon's local API;
    ``docker_host`` is the engine the command line was told of (``-H``), else the
    daemon's own is used."""

    def __init__(self, client: NodeClient, *, docker_host: str | None = None) -> None:
        self.client = client
        self.docker_host = docker_host

    @property
    def remote(self) -> bool:
        return True

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        if resource == "pods":
            return self.client.pod(namespace or "default", name)
        return self.client.object(resource, namespace, name)

    def list(
        self, resource: str, namespace: str | None, *, selector: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        if resource == "pods":
            return self.client.pods(namespace, selector=selector)
        return self.client.objects(resource, namespace, selector=selector)

    def table(
        self,
        resource: str,
        namespace: str | None,
        name: str | None = None,
        *,
        selector: str | None = None,
    ) -> dict[str, Any]:
        return self.client.table(resource, namespace, name, selector=selector)

    def events(self, namespace: str, *, uid: str | None = None) -> builtins.list[dict[str, Any]]:
        return self.client.events(namespace, uid=uid)

    def watch(
        self,
        namespace: str | None,
        *,
        name: str | None = None,
        table: bool = False,
        selector: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The pods' watch events (only a daemon watches: it is the one that sees changes)."""
        return self.client.watch(namespace, name=name, table=table, selector=selector)

    def log(self, namespace: str, name: str, options: PodLogOptions) -> Iterator[bytes]:
        return self.client.log(namespace, name, options)

    def exec_target(self, namespace: str, name: str, container: str | None) -> ExecTarget:
        """The container as the daemon's pod status names it, on the engine the daemon
        drives (the caller execs there itself)."""
        from typing import cast

        from lightkube.models.core_v1 import Pod

        from asynckubelet.api.protocol import ExecTarget
        from asynckubelet.node.access import default_container

        pod = cast(Pod, Pod.from_dict(self.client.pod(namespace, name)))
        chosen, _ = default_container(pod, container)
        status = pod.status
        statuses = (
            [*(status.containerStatuses or []), *(status.initContainerStatuses or [])]
            if status is not None
            else []
        )
        found = next((c for c in statuses if c.name == chosen), None)
        running = found is not None and found.state is not None and found.state.running is not None
        if found is None or not found.containerID or not running:
            raise errors.PodError("cannot exec into a container that is not running")
        docker_host = self.docker_host or str(self.client.node().get("docker_host") or "")
        return ExecTarget(
            container_id=found.containerID.split("://", 1)[-1],
            docker_host=docker_host or None,
            node_name=pod.spec.nodeName if pod.spec is not None and pod.spec.nodeName else "",
        )

    def node(self) -> dict[str, Any]:
        return self.client.node()

    def apply(
        self,
        files: Sequence[tuple[str, str]],
        *,
        prune_selector: str | None = None,
        prune_all: bool = False,
    ) -> dict[str, Any]:
        return self.client.apply(files, prune_selector=prune_selector, prune_all=prune_all)

    def delete(
        self,
        objects: Sequence[Mapping[str, str]],
        *,
        grace_period: float | None = None,
        timeout: float | None = None,
        wait: bool = True,
    ) -> builtins.list[dict[str, str]]:
        return self.client.delete(objects, grace_period=grace_period, timeout=timeout, wait=wait)

    def close(self) -> None:
        return None
