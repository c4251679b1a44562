"""``asynckubelet run`` of files that hold Jobs (or other workloads): a node of its own,
with the controllers, for as long as the run lasts.

A Job is more than a pod: it makes a pod, replaces it after a failure with the
controller's back-off, and ends ``Complete`` or ``Failed``. So ``run`` starts an
in-process :class:`~asynckubelet.nodeapp.Node` with the workload controllers and no
listener (its kubelet with this run's own owner mark, so it sees and removes only its
own pods, never those of a ``serve`` of the same node name), applies the files to it,
streams the output of every pod the Job makes (``pod/container | line``, a retry's pods
included) and ends once every Job has finished and every pod of the files with a restart
policy other than ``Always`` has ended. The exit code is the Jobs' result: 0 when all
completed, else the exit code of the last failed pod of a failed Job (1 when it had
none), after its ``Failed`` condition's reason on stderr. Deployments and ``Always``
pods run until SIGINT/SIGTERM. Leaving stops and removes everything the run made.
"""

from __future__ import annotations

import secrets
import signal
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from asynckubelet.cli.output import err, line

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.cli.options import NodeOptions
    from asynckubelet.cli.renderer import PodRenderer
    from asynckubelet.manifests import Manifests
    from asynckubelet.node.kubelet import Kubelet

__all__ = ["run_with_controllers"]

LOOK_AGAIN = 0.5
"""Seconds between looks at the Jobs' status when no pod changes."""


async def run_with_controllers(
    manifests: Manifests,
    *,
    node: NodeOptions,
    renderer: PodRenderer,
    grace_period: float | None,
) -> int:
    """Run ``manifests`` on an in-process node with controllers; the exit code."""
    from asynckubelet.cli.nodeconfig import kubelet_config, network_config
    from asynckubelet.cli.provision import announce
    from asynckubelet.nodeapp import Node, NodeConfig

    owner = f"run-{secrets.token_hex(4)}"
    config = NodeConfig(
        kubelet=kubelet_config(
            node, owner=owner, housekeeping_period=3600.0, shutdown_timeout=grace_period
        ),
        network=network_config(node),
    )
    code = 0
    signals: list[int] = []
    async with Node(config, announce=announce) as running:
        kubelet = running.kubelet
        async with anyio.create_task_group() as tg:
            done = anyio.Event()
            tg.start_soon(_follow, kubelet, renderer, tg, done, name="follow pods")
            tg.start_soon(_stop_on_signals, tg.cancel_scope, signals, name="signals")
            await kubelet.apply(manifests)
            code = await _until_finished(kubelet, manifests)
            done.set()
            tg.cancel_scope.cancel()
    return 128 + signals[0] if signals else code


def _job_result(kubelet: Kubelet, body: dict[str, Any]) -> tuple[str | None, str]:
    status = body.get("status") or {}
    for c in status.get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"]), f"{c.get('reason')}: {c.get('message')}"
    return None, ""


def _exit_code_of(pod: Pod) -> int:
    status = pod.status
    for c in (
        [*(status.initContainerStatuses or []), *(status.containerStatuses or [])] if status else []
    ):
        term = c.state.terminated if c.state is not None else None
        if term is not None and term.exitCode:
            return int(term.exitCode)
    return 0


async def _until_finished(kubelet: Kubelet, manifests: Manifests) -> int:
    """Wait until every Job finished and every pod that ends has ended; the exit code."""
    from asynckubelet.runtime import containers as ctr

    jobs = [
        (o.metadata.namespace or "default", str(o.metadata.name)) for o in manifests.of_kind("Job")
    ]
    ending = [
        (ctr.pod_identity(p)[1], ctr.pod_identity(p)[0])
        for p in manifests.pods
        if p.spec is not None and p.spec.restartPolicy in ("Never", "OnFailure")
    ]
    forever = any(
        p.spec is not None and p.spec.restartPolicy == "Always" for p in manifests.pods
    ) or any(
        kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "CronJob")
        for kind in (getattr(o, "kind", "") for o in manifests.objects)
    )
    while True:
        results = {}
        for namespace, name in jobs:
            stored = kubelet.objects.get("Job", namespace, name)
            results[(namespace, name)] = (
                _job_result(kubelet, dict(stored.body)) if stored else ("Failed", "deleted")
            )
        pods_done = all(
            (p := kubelet.get(ns, n)) is not None
            and p.status is not None
            and p.status.phase in ("Succeeded", "Failed")
            for ns, n in ending
        )
        if all(kind is not None for kind, _ in results.values()) and pods_done and not forever:
            break
        # A Job's status is the controllers' write, not a pod's: look again now and then.
        with anyio.move_on_after(LOOK_AGAIN):
            await kubelet.status.changed()
    code = 0
    for (namespace, name), (kind, why) in results.items():
        if kind == "Complete":
            line(err, f"job.batch/{name}: complete", style="dim")
            continue
        line(err, f"job.batch/{name} failed: {why}", style="red")
        failed = _failed_pods(kubelet, namespace, name)
        code = code or (_exit_code_of(failed[-1]) if failed else 0) or 1
    for namespace, name in ending:
        pod = kubelet.get(namespace, name)
        if pod is not None:
            code = (
                code
                or _exit_code_of(pod)
                or (1 if pod.status and pod.status.phase == "Failed" else 0)
            )
    return code


def _failed_pods(kubelet: Kubelet, namespace: str, job: str) -> list[Pod]:
    """The Job's failed pods, oldest first."""
    found = []
    for pod in kubelet.list():
        meta = pod.metadata
        if meta is None or meta.namespace != namespace or pod.status is None:
            continue
        owners = [r for r in meta.ownerReferences or [] if r.kind == "Job" and r.name == job]
        if owners and pod.status.phase == "Failed":
            found.append(pod)
    return sorted(found, key=lambda p: str(p.metadata.creationTimestamp if p.metadata else ""))


async def _follow(
    kubelet: Kubelet, renderer: PodRenderer, tg: anyio.abc.TaskGroup, done: anyio.Event
) -> None:
    """Show every pod's status changes and stream each container's output once it has
    started (each pod a Job makes, retries included)."""
    followed: set[tuple[str, str]] = set()
    async with kubelet.watch() as changes:
        async for kind, pod in changes:
            if kind == "DELETED" or pod.metadata is None or pod.status is None:
                continue
            renderer.status(pod, pod.status)
            uid = pod.metadata.uid or ""
            for c in [
                *(pod.status.initContainerStatuses or []),
                *(pod.status.containerStatuses or []),
            ]:
                started = c.state is not None and (
                    c.state.running is not None or c.state.terminated is not None
                )
                if started and (uid, c.name) not in followed:
                    followed.add((uid, c.name))
                    tg.start_soon(
                        _stream,
                        kubelet,
                        renderer,
                        pod,
                        c.name,
                        name=f"logs {pod.metadata.name}/{c.name}",
                    )
            if done.is_set():
                return


async def _stream(kubelet: Kubelet, renderer: PodRenderer, pod: Pod, container: str) -> None:
    from asynckubelet import errors

    assert pod.metadata is not None  # noqa: S101  (type narrowing: a pod the node runs has metadata)
    try:
        async with kubelet.logs(
            pod.metadata.namespace or "default",
            pod.metadata.name or "",
            container=container,
            follow=True,
        ) as lines:
            async for printed in lines:
                renderer.log(pod, container, printed)
    except errors.AsyncKubeletError:
        return


async def _stop_on_signals(scope: anyio.CancelScope, signals: list[int]) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        async for signum in received:
            signals.append(int(signum))
            line(err, f"{signal.Signals(signum).name}: stopping the pods", style="dim")
            scope.cancel()
            return
