"""Reading pods from Docker and the state dir: for the node itself and for other processes.

With a daemon running, the client commands ask it (:mod:`asynckubelet.api.localapi`); without
one, ``asynckubelet get``, ``describe``, ``logs``, ``exec`` and ``delete`` still work. State
lives in Docker (labels) and in the state dir (the manifest directory, the status files
the daemon writes, the events file), so any process can rebuild a pod's view:
the spec from the daemon's status file or the manifest directory, the containers from
Docker, the status through the same pure :func:`~asynckubelet.node.status.generate`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from lightkube.models.core_v1 import Container, Pod, PodSpec, PodStatus
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet import errors, hostfs
from asynckubelet.manifests import Level, load_manifests
from asynckubelet.node import sources, status_manager
from asynckubelet.node.container_status import CONTAINER_CREATING
from asynckubelet.node.status import generate
from asynckubelet.runtime import actions
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.manager import RuntimeManager
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus

PID_FILE = "serve.pid"
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"
WAITING_REASONS = {
    "ErrImagePull": "image can't be pulled",
    "ImagePullBackOff": "trying and failing to pull image",
}
"""What the kubelet says of a container that waits for these reasons when asked its logs."""


@dataclass(frozen=True)
class StateDir:
    """Where a node keeps its files."""

    root: Path

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def pid_file(self) -> Path:
        return self.root / PID_FILE


def write_pid_file(state: Path) -> Path:
    """Record this process as the ``serve`` daemon of ``state``."""
    hostfs.write_file(state, PID_FILE, f"{os.getpid()}\n".encode(), mode=0o644)
    return state / PID_FILE


def remove_pid_file(state: Path) -> None:
    hostfs.remove_file(state, PID_FILE)


def daemon_pid(state: Path) -> int | None:
    """The pid of the ``serve`` daemon using ``state``, when one runs."""
    try:
        pid = int((state / PID_FILE).read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def manifest_pods(
    directory: Path, *, node_name: str, pod_security: Level, allow_namespace_policy: bool = False
) -> dict[str, Pod]:
    """uid -> pod of every loadable manifest in ``directory`` (broken files skipped)."""
    found: dict[str, Pod] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.iterdir()):
        if not sources.is_manifest(path):
            continue
        try:
            manifests = load_manifests(
                path,
                pod_security=pod_security,
                allow_namespace_policy=allow_namespace_policy,
                node_name=node_name,
            )
        except (errors.ManifestError, OSError):
            continue
        for pod in manifests.pods:
            found[ctr.pod_identity(pod)[2]] = pod
    return found


def synthetic_pod(
    *, name: str, namespace: str, uid: str, runtime_containers: list[ContainerStatus]
) -> Pod:
    """A pod spec rebuilt from Docker alone, for pods whose manifest is nowhere to be found."""
    names: dict[str, str] = {}
    for c in sorted(runtime_containers, key=lambda c: c.created_at):
        names.setdefault(c.name, c.image)
    return Pod(
        apiVersion="v1",
        kind="Pod",
        metadata=ObjectMeta(name=name, namespace=namespace, uid=uid),
        spec=PodSpec(containers=[Container(name=n, image=i) for n, i in names.items()]),
    )


async def read_pods(
    rm: RuntimeManager,
    *,
    state: Path,
    pod_security: Level = "privileged",
    allow_namespace_policy: bool = False,
) -> list[Pod]:
    """Every pod of the node, with status, as the daemon sees it (or would, were it running)."""
    files = status_manager.read_status_files(state)
    alive = daemon_pid(state) is not None
    specs = manifest_pods(
        StateDir(state).manifests,
        node_name=rm.node,
        pod_security=pod_security,
        allow_namespace_policy=allow_namespace_policy,
    )
    on_docker = await rm.list_pod_uids()
    pods: list[Pod] = []
    now = datetime.now(UTC)
    for uid in sorted(set(files) | set(specs) | set(on_docker)):
        saved = files.get(uid)
        if alive and saved is not None:
            pods.append(saved)
            continue
        if uid not in on_docker and uid not in specs:
            continue
        if saved is not None:
            pod = saved
        elif uid in specs:
            pod = specs[uid]
        else:
            ns, name = on_docker[uid]
            pod = synthetic_pod(name=name, namespace=ns, uid=uid, runtime_containers=[])
        name, ns, _ = ctr.pod_identity(pod)
        runtime = await rm.get_pod_status(uid=uid, name=name, namespace=ns)
        if uid not in specs and saved is None:
            pod = synthetic_pod(
                name=name, namespace=ns, uid=uid, runtime_containers=list(runtime.containers)
            )
        previous = saved.status if saved is not None else None
        pod.status = generate(pod, runtime, now=now, previous=previous)
        pods.append(pod)
    return pods


def find_pod(pods: list[Pod], *, namespace: str, name: str) -> Pod:
    for pod in pods:
        pname, pns, _ = ctr.pod_identity(pod)
        if (pns, pname) == (namespace, name):
            return pod
    raise errors.PodNotFound(f'pods "{name}" not found')


def default_container(pod: Pod, container: str | None) -> tuple[str, str]:
    """The container a command acts on, and a notice when it was chosen for the user.

    As kubectl: the ``kubectl.kubernetes.io/default-container`` annotation, else the first
    container, said in a notice when the pod has others (init containers marked
    ``(init)``); a name that is not in the pod is an error naming the valid ones.
    """
    name, _, _ = ctr.pod_identity(pod)
    spec = pod.spec or PodSpec(containers=[])
    names = [c.name for c in spec.containers]
    inits = [c.name for c in spec.initContainers or []]
    ephemeral = [c.name for c in spec.ephemeralContainers or []]
    if container:
        if container not in names and container not in inits and container not in ephemeral:
            choices = " ".join(names + inits + ephemeral)
            raise errors.ContainerNotValid(
                f"container {container} is not valid for pod {name}: choose one of: [{choices}]"
            )
        return container, ""
    annotations = (pod.metadata.annotations if pod.metadata else None) or {}
    chosen = annotations.get(DEFAULT_CONTAINER_ANNOTATION) or (names[0] if names else "")
    if not chosen:
        raise errors.NotFound(f"pod {name} has no containers")
    notice = ""
    if (len(names) > 1 or inits) and DEFAULT_CONTAINER_ANNOTATION not in annotations:
        shown = ", ".join([*names, *(f"{name} (init)" for name in inits)])
        notice = f'Defaulted container "{chosen}" out of: {shown}'
    return chosen, notice


def _spec_of(pod: Pod, name: str) -> tuple[Container, bool]:
    """The named container's spec and whether it is an init container."""
    spec = pod.spec or PodSpec(containers=[])
    for c in spec.containers:
        if c.name == name:
            return c, False
    for c in spec.initContainers or []:
        if c.name == name:
            return c, True
    return Container(name=name), False


def _due_for_restart(pod: Pod, runtime: PodRuntimeStatus, newest: ContainerStatus) -> bool:
    """The newest instance is dead and the kubelet will start another: its status then
    shows it as ``lastState`` under a waiting state (``CrashLoopBackOff``...)."""
    if newest.state not in (ContainerState.EXITED, ContainerState.UNKNOWN):
        return False
    if ctr.container_type(pod, newest.name) == "ephemeral":
        return False  # never restarted
    spec, is_init = _spec_of(pod, newest.name)
    if is_init and newest.state is ContainerState.EXITED and newest.exit_code == 0:
        return False
    return actions.should_container_be_restarted(spec, pod=pod, status=runtime)


def _waiting_reason(reported: PodStatus | None, container: str) -> str:
    """The reason the pod's status gives for the container waiting, else ``ContainerCreating``."""
    if reported is not None:
        for c in [*(reported.containerStatuses or []), *(reported.initContainerStatuses or [])]:
            waiting = c.state.waiting if c.name == container and c.state else None
            if waiting is not None and waiting.reason:
                return waiting.reason
    return CONTAINER_CREATING


def waiting_message(pod: str, container: str, reason: str) -> str:
    """The kubelet's ``validateContainerLogStatus`` error for a container that waits."""
    said = WAITING_REASONS.get(reason, reason)
    return f'container "{container}" in pod "{pod}" is waiting to start: {said}'


def choose_instance(
    pod: Pod,
    runtime: PodRuntimeStatus,
    *,
    container: str,
    previous: bool = False,
    reported: PodStatus | None = None,
) -> ContainerStatus:
    """The instance whose output ``logs`` shows, as the kubelet's
    ``validateContainerLogStatus`` picks it from the pod's status.

    ``previous`` is ``lastState.terminated``: the instance before the current one, or,
    while the container waits to be restarted, the instance that just died (garbage
    collection keeps the newest dead instance, so it is always there). Without
    ``previous``: the running or dead newest instance; while a new instance is created
    but not started yet, the one before it. A container with no instance to read is
    waiting: the error says why as the pod's status does (``reported``, else
    ``pod.status``).
    """
    name, _, _ = ctr.pod_identity(pod)
    instances = [c for c in runtime.containers if c.name == container]
    newest = instances[0] if instances else None
    if previous:
        if newest is not None and _due_for_restart(pod, runtime, newest):
            return newest
        if len(instances) < 2:
            raise errors.NotFound(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        return instances[1]
    if newest is not None and newest.state is ContainerState.CREATED and len(instances) > 1:
        return instances[1]
    if newest is None or newest.state is ContainerState.CREATED:
        reason = _waiting_reason(reported or pod.status, container)
        raise errors.NotFound(waiting_message(name, container, reason))
    return newest


async def container_instance(
    rm: RuntimeManager,
    pod: Pod,
    *,
    container: str,
    previous: bool = False,
    reported: PodStatus | None = None,
) -> ContainerStatus:
    """The current (or, with ``previous``, the last dead) instance of a pod's container,
    read from Docker now (see :func:`choose_instance`)."""
    name, ns, uid = ctr.pod_identity(pod)
    runtime = await rm.get_pod_status(uid=uid, name=name, namespace=ns)
    return choose_instance(pod, runtime, container=container, previous=previous, reported=reported)
