"""The node API's remote side: a running daemon, asked over its Kubernetes API.

Each read is one request on the unix socket in the state dir
(:class:`~asynckubelet.api.client.NodeClient`: the standard library only, so a command
that asks the daemon loads no event loop, no HTTP stack, not even ``typing``), and the daemon
answers from the node's own view: its pods, its objects, its events, its tables.
"""

from __future__ import annotations

import builtins
import os

from asynckubelet import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Any

    from asynckubelet.api.client import NodeClient
    from asynckubelet.api.protocol import ExecTarget, PodLogOptions


OWNER_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet", "CronJob")
"""Kinds whose objects own pods (:data:`asynckubelet.workloads.controller.OWNER_KINDS`)."""


def _controller(body: Mapping[str, Any]) -> str:
    """The UID of the object's controller (its ``ownerReferences`` entry with
    ``controller: true``); empty when none."""
    refs = (body.get("metadata") or {}).get("ownerReferences") or []
    return next((str(r.get("uid") or "") for r in refs if r.get("controller")), "")


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
        """The container as the daemon's pod status names it, reached through the pod's
        ``exec`` subresource on the daemon's socket."""
        from typing import cast

        from lightkube.models.core_v1 import Pod

        from asynckubelet.api.protocol import ExecTarget
        from asynckubelet.node.access import default_container

        pod = cast(Pod, Pod.from_dict(self.client.pod(namespace, name)))
        chosen, _ = default_container(pod, container)
        status = pod.status
        statuses = (
            [
                *(status.containerStatuses or []),
                *(status.initContainerStatuses or []),
                *(status.ephemeralContainerStatuses or []),
            ]
            if status is not None
            else []
        )
        found = next((c for c in statuses if c.name == chosen), None)
        running = found is not None and found.state is not None and found.state.running is not None
        if found is None or not found.containerID or not running:
            raise errors.PodError("cannot exec into a container that is not running")
        return ExecTarget(
            container_id=found.containerID.split("://", 1)[-1],
            docker_host=self.docker_host,
            node_name=pod.spec.nodeName if pod.spec is not None and pod.spec.nodeName else "",
            container=chosen,
            socket=os.fspath(self.client.socket),
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

    def restart(
        self, namespace: str, name: str, containers: Sequence[str], *, grace_period: int
    ) -> builtins.list[str]:
        return self.client.restart(namespace, name, containers, grace_period=grace_period)

    def delete(
        self,
        objects: Sequence[Mapping[str, str]],
        *,
        grace_period: float | None = None,
        timeout: float | None = None,
        wait: bool = True,
    ) -> builtins.list[dict[str, str]]:
        """Each object ``DELETE``d in turn, its pods (a namespace's, a workload's, those
        of an earlier rollout still stopping) noted before; then, with ``wait``, those
        pods watched until they are gone or ``timeout`` ends, as kubectl's ``--wait``
        waits. A pod still there is ``timeout``, added to the answer when it was not
        asked for."""
        from asynckubelet.kubectl import resources

        results: builtins.list[dict[str, str]] = []
        waiting: builtins.list[dict[str, str]] = []
        # Namespaces last: the node removes a namespace's objects with it, so an object of
        # the same set deleted after its namespace would be NotFound (kubectl's, deleted
        # while the namespace terminates, is "deleted"). The answer keeps the given order.
        order = sorted(range(len(objects)), key=lambda i: objects[i].get("kind") == "Namespace")
        answered: dict[int, dict[str, str]] = {}
        for i in order:
            ref = objects[i]
            kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
            namespace = "" if kind == "Namespace" else str(ref.get("namespace") or "default")
            found = resources.lookup(kind)
            if found is None or not name:
                raise errors.DaemonError(
                    f'the server doesn\'t have a resource type "{kind}"', reason="BadRequest"
                )
            result = {"kind": kind, "namespace": namespace, "name": name, "status": "notfound"}
            answered[i] = result
            pods = [] if kind == "Pod" else self._pods_of(kind, namespace, name)
            deleted = self.client.delete_object(
                found.plural, namespace, name, grace_period=grace_period
            )
            if deleted:
                result["status"] = "deleted"
            waiting += [result] if kind == "Pod" and deleted else pods
        results = [answered[i] for i in range(len(objects))]
        if not wait:
            return results
        keys = {(p["namespace"], p["name"]) for p in waiting}
        left = self.client.wait_gone(keys, timeout=timeout)
        for pod in waiting:
            if (pod["namespace"], pod["name"]) in left:
                if pod not in results:
                    results.append(pod)
                pod["status"] = "timeout"
        return results

    def _pods_of(self, kind: str, namespace: str, name: str) -> builtins.list[dict[str, str]]:
        """The pods that go with the object: all of a namespace's; those a workload
        controls, through its ReplicaSets or Jobs, and those it controlled still stopping."""
        if kind == "Namespace":
            chosen = self.client.pods(name)
        elif kind in OWNER_KINDS:
            owners = {self._uid(kind, namespace, name)} - {""}
            between = {"Deployment": "replicasets", "CronJob": "jobs"}.get(kind)
            if owners and between is not None:
                for child in self.client.objects(between, namespace):
                    if _controller(child) in owners:
                        owners.add(str(child["metadata"].get("uid") or ""))
            pods = self.client.pods(namespace) if owners else []
            chosen = [p for p in pods if _controller(p) in owners]
        else:
            return []
        return [
            {"kind": "Pod", "namespace": p["metadata"]["namespace"], "name": p["metadata"]["name"]}
            for p in chosen
        ]

    def _uid(self, kind: str, namespace: str, name: str) -> str:
        from asynckubelet.kubectl import resources

        found = resources.lookup(kind)
        try:
            body = self.client.object(found.plural if found else kind, namespace, name)
        except errors.DaemonError as e:
            if e.status == 404:
                return ""
            raise
        return str((body.get("metadata") or {}).get("uid") or "")

    def close(self) -> None:
        return None
