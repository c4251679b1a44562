"""Helpers for driving ``RuntimeManager`` directly in integration tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import yaml
from lightkube.models.core_v1 import Pod, PodStatus
from prometheus_client.parser import text_string_to_metric_families

from asynckubelet.docker import DockerClient
from asynckubelet.manifests import Level, load_manifests_text
from asynckubelet.node.status import generate
from asynckubelet.runtime.backoff import Backoff
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.runtime.types import PodRuntimeStatus
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE

MUTATING = (
    "create_container",
    "start_container",
    "stop_container",
    "kill_container",
    "remove_container",
    "pull_image",
    "load_image",
    "remove_image",
)


def finished_syncs(metrics: str) -> float:
    """How many ``sync_pod`` runs a node has finished, from its metrics text: a node that
    finished one after adopting a pod had its chance to replace the pod's containers."""
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    return sum(
        s.value
        for s in families["kubelet_runtime_operations_duration_seconds"].samples
        if s.name.endswith("_count") and s.labels.get("operation_type") == "sync_pod"
    )


class CountingDocker(DockerClient):
    """The real adapter, counting the calls that change something on Docker."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name in MUTATING:
            calls = super().__getattribute__("calls")

            async def counted(*args: Any, **kwargs: Any) -> Any:
                calls.append(name)
                return await attr(*args, **kwargs)

            return counted
        return attr


@dataclass
class Recorder:
    """Collects the runtime's events."""

    events: list[tuple[str, str, str, str | None]] = field(default_factory=list)

    def __call__(
        self, pod: Pod, *, type: str, reason: str, message: str, container: str | None = None
    ) -> None:
        self.events.append((type, reason, message, container))

    def reasons(self) -> list[str]:
        return [e[1] for e in self.events]


def pod_from(text: str, *, node: str, pod_security: Level = "baseline") -> Pod:
    """A defaulted, validated pod from YAML; ``BUSYBOX`` stands for the test image."""
    manifests = load_manifests_text(
        text.replace("BUSYBOX", BUSYBOX_IMAGE), node_name=node, pod_security=pod_security
    )
    assert len(manifests.pods) == 1
    return manifests.pods[0]


def edit(pod: Pod, change: Callable[[dict[str, Any]], None], *, node: str) -> Pod:
    """The same pod (same UID) after ``change`` is applied to its manifest dict."""
    data = pod.to_dict()
    data.pop("status", None)
    change(data)
    return pod_from(yaml.safe_dump(data), node=node)


def manager(docker: DockerClient, node: str, events: Recorder | None = None) -> RuntimeManager:
    return RuntimeManager(
        RuntimeConfig(node_name=node, pause_image=PAUSE_IMAGE),
        docker=docker,
        events=events,
    )


@dataclass
class Driver:
    """A minimal pod worker: sync, wait, repeat; keeps the last runtime and API status."""

    rm: RuntimeManager
    pod: Pod
    backoff: Backoff = field(default_factory=Backoff)
    image_backoff: Backoff = field(default_factory=Backoff)
    runtime: PodRuntimeStatus | None = None
    status: PodStatus | None = None
    result: PodSyncResult = field(default_factory=PodSyncResult)
    history: list[PodStatus] = field(default_factory=list)

    async def refresh(self) -> PodStatus:
        self.runtime = await self.rm.get_status_of(self.pod)
        self.status = generate(
            self.pod,
            self.runtime,
            waiting_reasons=self.result.waiting_reasons(),
            previous=self.status,
            now=datetime.now(UTC),
        )
        self.history.append(self.status)
        return self.status

    async def sync(self) -> PodSyncResult:
        await self.refresh()
        assert self.runtime is not None
        self.result = await self.rm.sync_pod(
            self.pod, self.runtime, backoff=self.backoff, image_backoff=self.image_backoff
        )
        return self.result

    async def until(
        self, predicate: Callable[[PodStatus], bool], *, timeout: float = 60, interval: float = 0.2
    ) -> PodStatus:
        """Sync repeatedly until ``predicate(status)`` holds; fail after ``timeout`` seconds."""
        with anyio.fail_after(timeout):
            while True:
                status = await self.refresh()
                if predicate(status):
                    return status
                await self.sync()
                await anyio.sleep(interval)


def container_status(status: PodStatus, name: str) -> Any:
    for c in list(status.initContainerStatuses or []) + list(status.containerStatuses or []):
        if c.name == name:
            return c
    raise AssertionError(f"no status for container {name}")
