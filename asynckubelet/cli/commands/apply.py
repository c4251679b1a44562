"""``asynckubelet apply``: manifests handed to the node daemon, which admits and keeps them.

As kubectl sends objects to an API server, this command sends each file's text to the
running ``serve`` of the state dir: the daemon validates and admits it with its own Pod
Security level, node name and namespace policy, stores every object, and answers each
object's verdict, printed as kubectl prints it (``pod/web created``, ``secret/db
unchanged``), or every field error, printed once (exit 1, nothing applied). Without a
daemon there is nothing to apply to: the command says how to start one. ``--wait``
waits until each pod is Ready (or has Succeeded) on the applied spec, and each
Service that selects pods has a ready endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from asynckubelet.cli.client import as_pod, require_daemon
from asynckubelet.cli.options import (
    ConfigTimeoutOpt,
    FilenamesOpt,
    LogOptions,
    NodeRef,
    WaitOpt,
    WaitTimeoutOpt,
)
from asynckubelet.cli.output import command, err, fail, out, run_async, warn

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.client import NodeClient


@command()
def apply(
    *,
    files: FilenamesOpt,
    wait: WaitOpt = False,
    timeout: WaitTimeoutOpt = 300.0,
    config_timeout: ConfigTimeoutOpt = 30.0,
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Hand manifests to the node daemon (`asynckubelet serve`), which admits and keeps
    every object: Pods, ConfigMaps, Secrets, Namespaces.

    An edited pod restarts only the containers whose spec changed; a ConfigMap or Secret
    reaches every pod of its namespace, whichever file it came from. --wait ends early,
    with the kubelet's reason and message, on what waiting will not fix: a pod the node
    rejected, an image that does not exist or is never pulled, a container still in
    CreateContainerConfigError after --config-timeout.
    """
    from asynckubelet.manifests import read_sources

    client = require_daemon(node, verb="apply")
    texts = read_sources(files)
    if not any(text.strip() for _, text in texts):
        raise fail("no objects passed to apply")
    result = client.apply(texts)
    for warning in result.get("warnings") or []:
        source = f"{warning.get('source')}: " if warning.get("source") else ""
        detail = f": {warning['message']}" if warning.get("message") else ""
        warn(f"{source}{warning.get('field')}: {warning.get('reason')}{detail}")
    pods: list[dict[str, Any]] = []
    services: list[dict[str, Any]] = []
    if not result.get("items"):
        raise fail("no objects passed to apply")
    for item in result.get("items") or []:
        resource = str(item.get("kind", "")).lower()
        out.print(f"{escape(resource)}/{escape(str(item.get('name', '')))} {item.get('verdict')}")
        if item.get("kind") == "Pod" and isinstance(item.get("object"), dict):
            pods.append(item["object"])
        if item.get("kind") == "Service" and isinstance(item.get("object"), dict):
            services.append(item["object"])
    if wait and pods:
        run_async(_wait, [as_pod(p) for p in pods], client, node, timeout, config_timeout)
    if wait and services:
        run_async(_wait_services, services, client, timeout)


async def _wait_services(
    services: list[dict[str, Any]], client: NodeClient, timeout: float
) -> None:
    """Wait until each Service that selects pods has a ready endpoint (a Service without
    a selector, or an ExternalName, has nothing to wait for)."""
    import anyio
    import anyio.to_thread

    from asynckubelet import errors
    from asynckubelet.printers import endpoint_addresses

    waiting = {
        (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        for body in services
        if (spec := body.get("spec") or {}).get("selector") and spec.get("type") != "ExternalName"
        for meta in [body.get("metadata") or {}]
    }
    try:
        with anyio.fail_after(timeout):
            while waiting:
                for namespace, name in sorted(waiting):
                    try:
                        found = await anyio.to_thread.run_sync(
                            client.object, "endpoints", namespace, name
                        )
                    except errors.NotFound:
                        continue
                    ready = endpoint_addresses(found)
                    if ready:
                        count = len(ready)
                        out.print(
                            f"service/{escape(name)} ready: {count} "
                            f"{'endpoint' if count == 1 else 'endpoints'}"
                        )
                        waiting.discard((namespace, name))
                if waiting:
                    await anyio.sleep(0.2)
    except TimeoutError:
        names = ", ".join(f"service/{n}" for _, n in sorted(waiting))
        raise fail(
            f"timed out after {timeout:g}s waiting for ready endpoints: {names} (no ready pod "
            "matches the selector; see `asynckubelet describe service NAME`)"
        ) from None


async def _wait(
    pods: list[Pod], client: NodeClient, node: NodeRef, timeout: float, config_timeout: float
) -> None:
    """Poll the daemon for the pods; the applied spec hashes are confirmed on the engine
    the daemon drives (the daemon's status says Ready a moment before a changed
    container has been replaced)."""
    import anyio.to_thread

    from asynckubelet.node.daemon import socket_answers
    from asynckubelet.node.operations import PodKey, wait_until_ready
    from asynckubelet.printers import kubectl_status
    from asynckubelet.progress import WaitDisplay
    from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager

    info = await anyio.to_thread.run_sync(client.node)
    display = WaitDisplay(console=err, live=err.is_terminal)

    def ready(pod: Pod) -> None:
        assert pod.metadata is not None and pod.status is not None  # noqa: S101  (type narrowing: a reported pod has metadata and status)
        out.print(
            f"pod/{escape(pod.metadata.name or '')} {escape(kubectl_status(pod, pod.status))}"
        )

    def waiting(reasons: Mapping[PodKey, str]) -> None:
        display.update({f"pod/{name}": reason for (_, name), reason in reasons.items()})

    async def read_pods() -> list[Pod]:
        found = await anyio.to_thread.run_sync(client.pods)
        return [as_pod(p) for p in found]

    config = RuntimeConfig(
        node_name=str(info.get("node_name") or node.name),
        docker_url=node.docker_host or str(info.get("docker_host") or "") or None,
    )
    async with RuntimeManager(config) as rm:
        with display:
            await wait_until_ready(
                rm,
                pods=pods,
                read_pods=read_pods,
                node_running=lambda: socket_answers(client.socket),
                timeout=timeout,
                config_timeout=config_timeout,
                on_ready=ready,
                on_waiting=waiting,
            )
