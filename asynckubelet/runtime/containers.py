"""Containers' Docker configuration from the Pod spec, and runtime records from Docker's answers.

Both directions live together because they are one contract: whatever a container is
created with (names, labels, hash, restart count) is exactly what the status side reads
back after a restart of the agent. The sandbox's configuration is decided in
:mod:`asynckubelet.runtime.sandbox`, with the same labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from lightkube.models.core_v1 import Container, Pod

from asynckubelet.docker.types import ContainerConfig, ContainerInspect, HostConfig
from asynckubelet.runtime import naming, security
from asynckubelet.runtime.env import Environment
from asynckubelet.runtime.types import (
    ContainerResources,
    ContainerState,
    ContainerStatus,
    SandboxState,
    SandboxStatus,
)

_ZERO_TIME = "0001-01-01T00:00:00Z"


def pod_identity(pod: Pod) -> tuple[str, str, str]:
    """(name, namespace, uid) of a pod."""
    meta = pod.metadata
    assert meta is not None and meta.name is not None  # noqa: S101  (type narrowing: an admitted pod has metadata and a name)
    return meta.name, meta.namespace or "default", meta.uid or ""


def container_type(pod: Pod, name: str) -> str:
    """``init``, ``sidecar``, ``ephemeral`` or ``regular``."""
    for c in (pod.spec.initContainers if pod.spec else None) or []:
        if c.name == name:
            return "sidecar" if c.restartPolicy == "Always" else "init"
    for ec in (pod.spec.ephemeralContainers if pod.spec else None) or []:
        if ec.name == name:
            return "ephemeral"
    return "regular"


def _user(container: Container, pod: Pod) -> str:
    eff = security.effective(pod, container)
    if eff.run_as_user is None:
        return ""
    if eff.run_as_group is None:
        return str(eff.run_as_user)
    return f"{eff.run_as_user}:{eff.run_as_group}"


def container_config(
    pod: Pod,
    container: Container,
    *,
    node: str,
    sandbox_id: str,
    restart_count: int,
    environment: Environment,
    image: str | None = None,
    extra_host: HostConfig | None = None,
    owner: str = "",
) -> tuple[str, ContainerConfig]:
    """Name and Docker config of one container instance of the pod."""
    name, ns, uid = pod_identity(pod)
    spec = pod.spec
    assert spec is not None  # noqa: S101  (type narrowing: an admitted pod has a spec)
    labels = {
        **naming.pod_labels(node=node, pod=name, namespace=ns, uid=uid, owner=owner),
        naming.LABEL_TYPE: naming.TYPE_CONTAINER,
        naming.LABEL_CONTAINER_NAME: container.name,
        naming.LABEL_SANDBOX_ID: sandbox_id,
        naming.LABEL_HASH: naming.hash_container(container),
        naming.LABEL_RESTART_COUNT: str(restart_count),
        naming.LABEL_CONTAINER_TYPE: container_type(pod, container.name),
        naming.LABEL_GRACE: str(spec.terminationGracePeriodSeconds or 30),
        naming.LABEL_TERMINATION_MESSAGE_PATH: container.terminationMessagePath
        or "/dev/termination-log",
        naming.LABEL_TERMINATION_MESSAGE_POLICY: container.terminationMessagePolicy or "File",
    }
    if container.ports:
        labels[naming.LABEL_PORTS] = _ports_json(container)
    joined = f"container:{sandbox_id}"
    host: HostConfig = {
        "NetworkMode": joined,
        "IpcMode": joined,
    }
    if spec.shareProcessNamespace:
        host["PidMode"] = joined
    elif spec.hostPID:
        host["PidMode"] = "host"
    if extra_host:
        host.update(extra_host)
    config: ContainerConfig = {
        "Image": image or container.image or "",
        "Env": [f"{k}={v}" for k, v in environment.env],
        "Labels": labels,
        "Tty": bool(container.tty),
        "OpenStdin": bool(container.stdin),
        "StdinOnce": bool(container.stdinOnce),
        "HostConfig": host,
    }
    if environment.command is not None:
        config["Entrypoint"] = environment.command
        config["Cmd"] = environment.args or []
    elif environment.args is not None:
        config["Cmd"] = environment.args
    if container.workingDir:
        config["WorkingDir"] = container.workingDir
    user = _user(container, pod)
    if user:
        config["User"] = user
    if container.lifecycle is not None and container.lifecycle.stopSignal:
        config["StopSignal"] = container.lifecycle.stopSignal
    return (
        naming.container_name(
            container=container.name, pod=name, namespace=ns, uid=uid, attempt=restart_count
        ),
        config,
    )


def _ports_json(container: Container) -> str:
    import json

    return json.dumps(
        [{k: v for k, v in p.to_dict().items() if v is not None} for p in container.ports or []],
        sort_keys=True,
    )


def parse_time(value: str | None) -> datetime | None:
    """Docker's RFC 3339 time with nanoseconds; None for the zero time."""
    if not value or value.startswith("0001-01-01"):
        return None
    text = value.rstrip("Z")
    if "." in text:
        head, frac = text.split(".", 1)
        tz = ""
        for sep in ("+", "-"):
            if sep in frac:
                frac, tz = frac.split(sep, 1)
                tz = sep + tz
                break
        text = f"{head}.{frac[:6]}{tz}"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def container_status_from_inspect(info: ContainerInspect, *, image_id: str = "") -> ContainerStatus:
    """The runtime record of one container from ``docker inspect``."""
    labels = info.get("Config", {}).get("Labels") or {}
    state = info.get("State", {})
    status = state.get("Status", "")
    if status == "running" or state.get("Running"):
        kstate = ContainerState.RUNNING
    elif status == "created":
        kstate = ContainerState.CREATED
    elif status in ("exited", "dead"):
        kstate = ContainerState.EXITED
    else:
        kstate = ContainerState.UNKNOWN
    exit_code = int(state.get("ExitCode", 0) or 0)
    reason = ""
    message = state.get("Error", "") or ""
    if kstate is ContainerState.EXITED:
        if state.get("OOMKilled"):
            reason = "OOMKilled"
        elif message:
            reason = "ContainerCannotRun"
        elif exit_code == 0:
            reason = "Completed"
        else:
            reason = "Error"
    created = parse_time(info.get("Created")) or datetime.fromtimestamp(0, UTC)
    return ContainerStatus(
        id=info.get("Id", ""),
        name=labels.get(naming.LABEL_CONTAINER_NAME, ""),
        state=kstate,
        created_at=created,
        started_at=parse_time(state.get("StartedAt")),
        finished_at=parse_time(state.get("FinishedAt"))
        if kstate is ContainerState.EXITED
        else None,
        exit_code=exit_code,
        reason=reason,
        message=message,
        image=info.get("Config", {}).get("Image", ""),
        image_id=image_id or f"docker://{info.get('Image', '')}",
        hash=labels.get(naming.LABEL_HASH, ""),
        restart_count=int(labels.get(naming.LABEL_RESTART_COUNT, "0") or 0),
        sandbox_id=labels.get(naming.LABEL_SANDBOX_ID, ""),
        stop_signal=info.get("Config", {}).get("StopSignal") or "",
        resources=_resources(info.get("HostConfig")),
    )


def _resources(host: Any) -> ContainerResources | None:
    if not isinstance(host, Mapping) or "CpuShares" not in host:
        return None
    return ContainerResources(
        cpu_shares=int(host.get("CpuShares") or 0),
        cpu_quota=int(host.get("CpuQuota") or 0),
        cpu_period=int(host.get("CpuPeriod") or 0),
        memory=int(host.get("Memory") or 0),
    )


def sandbox_status_from_inspect(
    info: ContainerInspect, *, ip: str | None, additional_ips: tuple[str, ...] = ()
) -> SandboxStatus:
    labels = info.get("Config", {}).get("Labels") or {}
    state = info.get("State", {})
    parsed = naming.parse_name(info.get("Name", ""))
    attempt = int(labels.get(naming.LABEL_ATTEMPT, parsed.attempt if parsed else 0))
    return SandboxStatus(
        id=info.get("Id", ""),
        attempt=attempt,
        state=SandboxState.READY if state.get("Running") else SandboxState.NOTREADY,
        created_at=parse_time(info.get("Created")) or datetime.fromtimestamp(0, UTC),
        ip=ip,
        additional_ips=additional_ips,
        host_network=labels.get(naming.LABEL_HOST_NETWORK) == "true",
    )


def labels_of(info: ContainerInspect | Mapping[str, Any]) -> Mapping[str, str]:
    config = info.get("Config") or {}
    return config.get("Labels") or {}
