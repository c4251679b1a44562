"""Stopping and cleaning up: the kubelet's ``killContainer``, ``KillPod`` and container GC.

A container stops gracefully: its ``preStop`` hook first, within the grace period, then
its stop signal, then SIGKILL once the rest of the grace period (at least
:data:`MINIMUM_GRACE_PERIOD`) has passed. A pod stops in order: regular containers
together, sidecars in reverse order, then the sandbox and its network. Removal and
garbage collection keep what ``logs --previous`` and restart counts need (the newest
dead instance of each container) and remove the rest, with the files the pod left on the
node. Everything here runs shielded: a cancelled caller never leaves a pod half stopped.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import anyio
from lightkube.models.core_v1 import Container, Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import hooks, naming, nodefiles
from asynckubelet.runtime.deps import RuntimeDeps
from asynckubelet.runtime.qos import BEST_EFFORT, BURSTABLE, GUARANTEED
from asynckubelet.runtime.results import PodSyncResult, SyncAction, SyncError
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
)

if TYPE_CHECKING:
    from asynckubelet.docker import ContainerSummary
    from asynckubelet.docker.api import DockerAPI

MINIMUM_GRACE_PERIOD = 2
"""Seconds: the kubelet's ``minimumGracePeriodInSeconds``."""
DEFAULT_GRACE_PERIOD = 30


def grace_period_of(pod: Pod | None, override: float | None) -> float:
    """``override``, else the deletion grace period, else ``terminationGracePeriodSeconds``."""
    if override is not None:
        return max(float(override), 0.0)
    if pod is not None and pod.spec is not None:
        if pod.metadata is not None and pod.metadata.deletionGracePeriodSeconds is not None:
            return float(pod.metadata.deletionGracePeriodSeconds)
        if pod.spec.terminationGracePeriodSeconds is not None:
            return float(pod.spec.terminationGracePeriodSeconds)
    return float(DEFAULT_GRACE_PERIOD)


def container_spec(pod: Pod | None, name: str) -> Container | None:
    if pod is None or pod.spec is None:
        return None
    for c in list(pod.spec.initContainers or []) + list(pod.spec.containers or []):
        if c.name == name:
            return c
    return None


async def kill_container(
    deps: RuntimeDeps,
    pod: Pod | None,
    status: ContainerStatus,
    *,
    grace_period: float,
    reason: str = "",
    message: str = "",
    result: PodSyncResult | None = None,
    pre_stop: bool = True,
) -> None:
    """Stop one container: its ``preStop`` hook (unless ``pre_stop`` is False), its stop
    signal, then SIGKILL after the grace period (>= 2 s)."""
    step = (result or PodSyncResult()).add(SyncAction.KILL_CONTAINER, status.name)
    if pod is not None:
        text = message or f"Stopping container {status.name}"
        deps.events(pod, type="Normal", reason="Killing", message=text, container=status.name)
    grace = grace_period
    spec = container_spec(pod, status.name)
    if (
        pre_stop
        and grace > 0
        and pod is not None
        and spec is not None
        and spec.lifecycle is not None
        and spec.lifecycle.preStop is not None
    ):
        grace -= await _pre_stop(deps, pod, spec, status, grace)
    grace = max(grace, MINIMUM_GRACE_PERIOD)
    try:
        with anyio.CancelScope(shield=True):
            await deps.docker.stop_container(status.id, grace_period=grace)
    except errors.NotFound:
        pass
    except errors.DockerError as e:
        step.fail(SyncError.KILL_CONTAINER, str(e))


async def _pre_stop(
    deps: RuntimeDeps, pod: Pod, spec: Container, status: ContainerStatus, grace: float
) -> float:
    """Run ``preStop`` for at most ``grace`` seconds; returns the seconds it took."""
    assert spec.lifecycle is not None  # noqa: S101  (type narrowing: called only for a container with preStop)
    started = anyio.current_time()
    with anyio.CancelScope(shield=True):
        target = await deps.hook_target(pod, container_id=status.id, sandbox_id=status.sandbox_id)
        message: str | None = None
        with anyio.move_on_after(grace):
            message = await hooks.run_hook(
                spec.lifecycle.preStop, pod, spec, target, docker=deps.docker, timeout=grace
            )
    if message is not None:
        name, ns, _ = ctr.pod_identity(pod)
        logger.bind(pod=f"{ns}/{name}", container=spec.name).warning("preStop: {}", message)
        deps.events(
            pod,
            type="Warning",
            reason="FailedPreStopHook",
            message="PreStopHook failed",
            container=spec.name,
        )
    return anyio.current_time() - started


async def kill_pod(
    deps: RuntimeDeps, pod: Pod | None, status: PodRuntimeStatus, *, grace_period: float | None
) -> PodSyncResult:
    """Regular containers (and any not in the spec) stop together, then sidecars in reverse
    order within what is left of the grace period, then the sandboxes."""
    result = PodSyncResult()
    grace = grace_period_of(pod, grace_period)
    running = [c for c in status.containers if c.state is ContainerState.RUNNING]
    kinds = {
        c.id: ctr.container_type(pod, c.name) if pod is not None else "regular" for c in running
    }
    regular = [c for c in running if kinds[c.id] == "regular"]
    sidecars = [c for c in running if kinds[c.id] == "sidecar"]
    others = [c for c in running if kinds[c.id] not in ("regular", "sidecar")]
    order = _sidecar_order(pod)
    sidecars.sort(key=lambda c: order.get(c.name, 0), reverse=True)
    started = anyio.current_time()

    def left() -> float:
        return max(grace - (anyio.current_time() - started), 0.0)

    with anyio.CancelScope(shield=True):
        async with anyio.create_task_group() as tg:
            for c in regular + others:
                tg.start_soon(
                    partial(kill_container, deps, pod, c, grace_period=grace, result=result)
                )
        for c in sidecars:
            await kill_container(deps, pod, c, grace_period=left(), result=result)
        for sandbox in status.sandboxes:
            await _stop_sandbox(deps, sandbox.id, result)
    return result


async def cut_short(docker: DockerAPI, status: PodRuntimeStatus, *, grace_period: float) -> None:
    """Stop the pod's running containers again with a shorter grace period (at least
    :data:`MINIMUM_GRACE_PERIOD`), while a stop with a longer one is under way: a second
    delete with a shorter grace period cuts the first short, as the kubelet cancels the
    sync under way and stops the pod again. The stop under way ends with them."""
    grace = max(grace_period, MINIMUM_GRACE_PERIOD)

    async def stop(container_id: str) -> None:
        try:
            await docker.stop_container(container_id, grace_period=grace)
        except errors.NotFound:
            pass
        except errors.DockerError as e:
            logger.warning("stopping container {} again failed: {}", container_id[:12], e)

    async with anyio.create_task_group() as tg:
        for c in status.containers:
            if c.state is ContainerState.RUNNING:
                tg.start_soon(stop, c.id)


def _sidecar_order(pod: Pod | None) -> dict[str, int]:
    if pod is None or pod.spec is None:
        return {}
    return {c.name: i for i, c in enumerate(pod.spec.initContainers or [])}


async def _stop_sandbox(deps: RuntimeDeps, sandbox_id: str, result: PodSyncResult) -> None:
    step = result.add(SyncAction.KILL_POD_SANDBOX, sandbox_id[:12])
    net = result.add(SyncAction.TEARDOWN_NETWORK, sandbox_id[:12])
    with anyio.CancelScope(shield=True):
        try:
            await deps.network.teardown_pod(sandbox_id=sandbox_id)
        except errors.AsyncKubeletError as e:
            net.fail(SyncError.TEARDOWN_NETWORK, str(e))
        try:
            if await deps.engine.may_have_probe_helpers():
                await deps.probe_helpers.remove_for(sandbox_id=sandbox_id)
            await deps.docker.stop_container(sandbox_id, grace_period=MINIMUM_GRACE_PERIOD)
        except errors.NotFound:
            pass
        except errors.DockerError as e:
            step.fail(SyncError.KILL_POD_SANDBOX, str(e))


async def remove_pod(deps: RuntimeDeps, *, uid: str) -> list[str]:
    """Remove every Docker object of the pod (after it was killed), its volumes and its
    files on the node; returns the ids removed.

    The containers go at once, each sandbox after its network; every removal is tried, and
    the first that failed is raised after the others ran."""
    for key in [k for k in deps.reset_restart_counts if k[0] == uid]:
        del deps.reset_restart_counts[key]
    rows = await deps.docker.list_containers(
        labels={naming.LABEL_NODE: deps.node, naming.LABEL_POD_UID: uid}
    )
    labels = (rows[0].get("Labels") or {}) if rows else {}
    failures: list[errors.AsyncKubeletError] = []

    async def remove(row: ContainerSummary) -> None:
        try:
            if (row.get("Labels") or {}).get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX:
                await deps.network.teardown_pod(sandbox_id=row["Id"])
            await deps.docker.remove_container(row["Id"], force=True)
        except errors.AsyncKubeletError as e:
            failures.append(e)

    with anyio.CancelScope(shield=True):
        async with anyio.create_task_group() as tg:
            for row in rows:
                tg.start_soon(remove, row, name=f"remove {row['Id'][:12]}")
        if failures:
            raise failures[0]
        if deps.volumes is not None:
            await deps.volumes.teardown_pod(uid=uid)
        await _remove_node_files(
            deps,
            uid,
            labels.get(naming.LABEL_POD_NAMESPACE, ""),
            labels.get(naming.LABEL_POD_NAME, ""),
        )
    return [r["Id"] for r in rows]


async def _remove_node_files(deps: RuntimeDeps, uid: str, namespace: str, name: str) -> None:
    if not deps.engine.is_local():
        return
    root = deps.config.cgroup_root
    if root is not None and deps.engine.cgroup_driver != "systemd":
        for qos in (GUARANTEED, BURSTABLE, BEST_EFFORT):
            parent = nodefiles.pod_cgroup_parent(root=root, driver="cgroupfs", qos=qos, uid=uid)
            await anyio.to_thread.run_sync(nodefiles.remove_pod_cgroup, parent)
    if deps.config.pod_log_dir is not None and name:
        await anyio.to_thread.run_sync(
            partial(
                nodefiles.remove_pod_logs,
                deps.config.pod_log_dir,
                namespace=namespace,
                name=name,
                uid=uid,
            )
        )


async def garbage_collect(deps: RuntimeDeps, status: PodRuntimeStatus) -> list[str]:
    """Remove dead containers but the newest dead instance of each container name, and
    dead sandboxes but the newest that no remaining container uses; returns the ids."""
    doomed = set(dead_instances_to_remove(status))
    kept_sandboxes = {c.sandbox_id for c in status.containers if c.id not in doomed}
    for s in status.sandboxes[1:]:
        if s.state is not SandboxState.READY and s.id not in kept_sandboxes:
            doomed.add(s.id)
    with anyio.CancelScope(shield=True):
        for cid in doomed:
            await deps.docker.remove_container(cid, force=True)
        if deps.config.pod_log_dir is not None:
            for c in status.containers:
                if c.id in doomed:
                    nodefiles.unlink_container_log(
                        deps.config.pod_log_dir,
                        namespace=status.namespace,
                        name=status.name,
                        uid=status.uid,
                        container=c.name,
                        restart_count=c.restart_count,
                    )
    return sorted(doomed)


def dead_instances_to_remove(status: PodRuntimeStatus) -> list[str]:
    """Ids of dead container instances beyond the newest dead one of each name.

    An instance created but never started is not the dead one kept: while it is the newest
    of its name it may be a start in flight and stays; the instance that ran before it is
    what ``logs --previous`` reads until the next one exists.
    """
    seen: set[str] = set()
    seen_dead: set[str] = set()
    doomed: list[str] = []
    for c in status.containers:
        newest = c.name not in seen
        seen.add(c.name)
        if c.state is ContainerState.RUNNING:
            continue
        if c.state is ContainerState.CREATED:
            if not newest:
                doomed.append(c.id)
            continue
        if c.name in seen_dead:
            doomed.append(c.id)
        else:
            seen_dead.add(c.name)
    return doomed


__all__ = [
    "DEFAULT_GRACE_PERIOD",
    "MINIMUM_GRACE_PERIOD",
    "cut_short",
    "dead_instances_to_remove",
    "garbage_collect",
    "grace_period_of",
    "kill_container",
    "kill_pod",
    "remove_pod",
]
