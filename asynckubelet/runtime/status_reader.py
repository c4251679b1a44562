"""Reading a pod's state back from Docker: the kubelet's ``GetPodStatus``.

Names and labels on the containers carry everything (state lives in Docker), so the
status is rebuilt from a list and an inspect of each container. Inspecting is the costly
part, and an instance's inspect output changes only with its state: the reader keeps the
last record of each container in the runtime's
:class:`~asynckubelet.runtime.statuscache.StatusCache` and inspects again only what
changed state since, or what an event was about. An exited container's record carries its
termination message, read once: the file it wrote, else, by its policy, the tail of its
logs. The reader works with the runtime's :class:`~asynckubelet.runtime.deps.RuntimeDeps`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable

import anyio

from asynckubelet import errors
from asynckubelet.docker import ContainerInspect
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import naming
from asynckubelet.runtime.deps import RuntimeDeps
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)

DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
MAX_TERMINATION_MESSAGE = 4096
"""Bytes of the termination message file read (kubelet ``MaxContainerTerminationMessageLength``)."""
MAX_TERMINATION_LOG_LINES = 80
MAX_TERMINATION_LOG_BYTES = 2048


async def pod_status(deps: RuntimeDeps, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
    """Everything Docker holds about the pod, newest first."""
    rows = await deps.docker.list_containers(
        labels={naming.LABEL_NODE: deps.node, naming.LABEL_POD_UID: uid}
    )
    states = {r["Id"]: str(r.get("State", "")) for r in rows}
    await _refresh(deps, uid, states)
    sandboxes: list[SandboxStatus] = []
    containers: list[ContainerStatus] = []
    for cid in states:
        if cid not in deps.cache.inspected:
            continue
        record = deps.cache.inspected[cid][2]
        if isinstance(record, ContainerStatus):
            containers.append(record)
        else:
            sandboxes.append(await _sandbox_status(deps, cid, record))
    sandboxes.sort(key=lambda s: (s.created_at, s.attempt), reverse=True)
    containers.sort(key=lambda c: (c.created_at, c.restart_count), reverse=True)
    ips: tuple[str, ...] = ()
    if sandboxes and sandboxes[0].ip:
        ips = (sandboxes[0].ip, *sandboxes[0].additional_ips)
    return PodRuntimeStatus(
        uid=uid,
        name=name,
        namespace=namespace,
        sandboxes=tuple(sandboxes),
        containers=tuple(containers),
        ips=ips,
    )


async def _refresh(deps: RuntimeDeps, uid: str, states: dict[str, str]) -> None:
    """Drop the pod's records of containers gone; inspect those new, changed or marked."""
    cache = deps.cache.inspected
    for cid in [c for c, (owner, _, _) in cache.items() if owner == uid and c not in states]:
        del cache[cid]
        deps.cache.outdated.discard(cid)
    stale = [
        cid
        for cid, state in states.items()
        if cid not in cache or cache[cid][1] != state or cid in deps.cache.outdated
    ]
    deps.cache.outdated.difference_update(stale)
    for info in await _inspect_all(deps, stale):
        labels = ctr.labels_of(info)
        cid = info.get("Id", "")
        if labels.get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX:
            sandbox = ctr.sandbox_status_from_inspect(info, ip=None)
            cache[cid] = (uid, states.get(cid, ""), sandbox)
        elif labels.get(naming.LABEL_TYPE) == naming.TYPE_CONTAINER:
            image_id = await _image_id(deps, info.get("Image", ""))
            status = ctr.container_status_from_inspect(info, image_id=image_id)
            if status.state is ContainerState.EXITED:
                status = await _with_termination_message(deps, info, status)
            cache[cid] = (uid, states.get(cid, ""), status)


async def _sandbox_status(deps: RuntimeDeps, cid: str, record: SandboxStatus) -> SandboxStatus:
    """A running sandbox's addresses come from the network backend."""
    if record.state is not SandboxState.READY:
        return record
    net = await deps.network.get_pod_network_status(sandbox_id=cid)
    if net is None:
        return record
    return dataclasses.replace(
        record, ip=net.ips[0] if net.ips else "", additional_ips=tuple(net.ips[1:])
    )


async def _inspect_all(deps: RuntimeDeps, ids: Iterable[str]) -> list[ContainerInspect]:
    found: list[ContainerInspect] = []

    async def one(cid: str) -> None:
        with contextlib.suppress(errors.NotFound):
            found.append(await deps.docker.inspect_container(cid))

    async with anyio.create_task_group() as tg:
        for cid in ids:
            tg.start_soon(one, cid)
    return found


async def _image_id(deps: RuntimeDeps, image_ref: str) -> str:
    """``docker-pullable://repo@sha256:...`` when the image has a digest, else
    ``docker://sha256:...``, as cri-dockerd reports it."""
    if image_ref in deps.cache.image_ids:
        return deps.cache.image_ids[image_ref]
    try:
        info = await deps.docker.inspect_image(image_ref)
    except errors.ImageNotFound:
        return f"docker://{image_ref}"
    digests = info.get("RepoDigests") or []
    value = f"docker-pullable://{digests[0]}" if digests else f"docker://{info.get('Id', '')}"
    deps.cache.image_ids[image_ref] = value
    return value


async def _with_termination_message(
    deps: RuntimeDeps, info: ContainerInspect, status: ContainerStatus
) -> ContainerStatus:
    """The kubelet's ``getTerminationMessage``: the file, else (policy) the logs' tail."""
    labels = ctr.labels_of(info)
    path = labels.get(naming.LABEL_TERMINATION_MESSAGE_PATH, DEFAULT_TERMINATION_MESSAGE_PATH)
    source = next(
        (m.get("Source") for m in info.get("Mounts") or [] if m.get("Destination") == path),
        None,
    )
    message = ""
    if source:
        message = await anyio.to_thread.run_sync(_read_termination_file, source)
    policy = labels.get(naming.LABEL_TERMINATION_MESSAGE_POLICY, "File")
    if not message and policy == "FallbackToLogsOnError" and status.exit_code != 0:
        # The kubelet's circular buffer: the last bytes of the last lines, never more.
        tail = bytearray()
        try:
            async for line in deps.docker.logs(status.id, tail=MAX_TERMINATION_LOG_LINES):
                tail += (line.text + ("\n" if line.newline else "")).encode()
                del tail[:-MAX_TERMINATION_LOG_BYTES]
        except errors.DockerError:
            tail.clear()
        message = tail.decode(errors="replace")
    if not message:
        return status
    return dataclasses.replace(status, message=message)


async def pod_uids(deps: RuntimeDeps, *, any_owner: bool = False) -> dict[str, tuple[str, str]]:
    """uid -> (namespace, name) of every pod of this node (and of this runtime's owner,
    unless ``any_owner``) with objects on Docker."""
    mine, every = await pods_on_node(deps)
    return every if any_owner else mine


async def pods_on_node(
    deps: RuntimeDeps,
) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
    """uid -> (namespace, name) of the pods with objects on Docker: this runtime's
    owner's, and every one of this node (of any owner), from one list."""
    rows = await deps.docker.list_containers(labels={naming.LABEL_NODE: deps.node})
    mine: dict[str, tuple[str, str]] = {}
    every: dict[str, tuple[str, str]] = {}
    owner = deps.config.owner
    for row in rows:
        labels = row.get("Labels") or {}
        uid = labels.get(naming.LABEL_POD_UID)
        if not uid:
            continue
        key = (
            labels.get(naming.LABEL_POD_NAMESPACE, ""),
            labels.get(naming.LABEL_POD_NAME, ""),
        )
        every[uid] = key
        if labels.get(naming.LABEL_OWNER, "") == owner:
            mine[uid] = key
    return mine, every


def _read_termination_file(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_TERMINATION_MESSAGE).decode(errors="replace")
    except OSError:
        return ""


__all__ = ["DEFAULT_TERMINATION_MESSAGE_PATH", "pod_status", "pod_uids", "pods_on_node"]
