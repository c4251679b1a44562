"""Running one manifest's pod to its end on real Docker, collecting output and events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet.docker import DockerClient, LogLine
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.foreground import run_pods
from asynckubelet.node.runner import PodOutcome, options_from_manifests
from asynckubelet.node.volumes import VolumeManager
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE


@dataclass
class Run:
    outcome: PodOutcome
    lines: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    statuses: list[PodStatus] = field(default_factory=list)

    def reasons(self) -> list[str]:
        return [e[1] for e in self.events]

    def messages(self, reason: str) -> list[str]:
        return [e[2] for e in self.events if e[1] == reason]


@dataclass
class Events:
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    on_event: Callable[[tuple[str, str, str]], None] | None = None

    def __call__(
        self, pod: Pod, *, type: str, reason: str, message: str, container: str | None = None
    ) -> None:
        self.seen.append((type, reason, message))
        if self.on_event is not None:
            self.on_event((type, reason, message))


def make_manager(
    docker: DockerClient,
    node: str,
    root: Path,
    events: Events | None = None,
    *,
    seccomp_default: bool = True,
) -> RuntimeManager:
    return RuntimeManager(
        RuntimeConfig(node_name=node, pause_image=PAUSE_IMAGE, seccomp_default=seccomp_default),
        docker=docker,
        events=events,
        volumes=VolumeManager(root=root, node_name=node, token_dir=root / "serviceaccount"),
    )


async def run_manifest(
    docker: DockerClient,
    text: str,
    *,
    node: str,
    root: Path,
    timeout: float = 60,
    stop_after: float | None = None,
    pod_security: str = "baseline",
    until: Callable[[PodStatus], bool] | None = None,
    until_event: str | None = None,
    seccomp_default: bool = True,
) -> Run:
    """Run the manifest's pod until it ends, ``until(status)`` holds, ``stop_after`` seconds
    passed, or an event whose message starts with ``until_event`` came; then it is removed.
    """
    manifests = load_manifests_text(
        text.replace("BUSYBOX", BUSYBOX_IMAGE),
        node_name=node,
        pod_security=pod_security,  # type: ignore[arg-type]
    )
    stop = anyio.Event()
    events = Events()
    if until_event is not None:
        events.on_event = lambda e: stop.set() if e[2].startswith(until_event) else None
    lines: list[str] = []
    options = options_from_manifests(manifests, node_name=node, grace_period=2)
    statuses: list[PodStatus] = []

    def on_status(pod: Pod, status: PodStatus) -> None:
        statuses.append(status)
        if until is not None and until(status):
            stop.set()

    def on_log(pod: Pod, container: str, line: LogLine) -> None:
        lines.append(f"{container}: {line.text}")

    async with make_manager(docker, node, root, events, seccomp_default=seccomp_default) as rm:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:
                if stop_after is not None:

                    async def later() -> None:
                        await anyio.sleep(stop_after)
                        stop.set()

                    tg.start_soon(later)
                outcomes = await run_pods(
                    rm,
                    manifests.pods,
                    stop=stop,
                    on_log=on_log,
                    on_status=on_status,
                    options=options,
                )
                tg.cancel_scope.cancel()
    return Run(outcome=outcomes[0], lines=lines, events=events.seen, statuses=statuses)
