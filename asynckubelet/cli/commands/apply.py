"""``asynckubelet apply``: validated manifests into the node's manifest directory.

A running ``serve`` on the same state dir starts or updates the pods at once; ``--wait``
waits until each is Ready (or has Succeeded) on the applied spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from asynckubelet.cli.client import node_runtime
from asynckubelet.cli.options import (
    DEFAULT_POD_SECURITY,
    AllowNamespacePolicyOpt,
    ConfigTimeoutOpt,
    FilenamesOpt,
    LogOptions,
    NodeRef,
    PodSecurityOpt,
    WaitOpt,
    WaitTimeoutOpt,
    check_pod_security,
)
from asynckubelet.cli.output import command, err, fail, out, run_async, warn

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.manifests import Level


@command()
def apply(
    *,
    files: FilenamesOpt,
    wait: WaitOpt = False,
    timeout: WaitTimeoutOpt = 300.0,
    config_timeout: ConfigTimeoutOpt = 30.0,
    pod_security: PodSecurityOpt = DEFAULT_POD_SECURITY,
    allow_namespace_policy: AllowNamespacePolicyOpt = False,
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Validate manifests, then hand them to the node (its manifest directory).

    A running `asynckubelet serve` on the same state dir starts or updates the pods at
    once; an edit restarts only the containers whose spec changed. --wait ends early, with
    the kubelet's reason and message, on what waiting will not fix: a pod the node
    rejected, an image that does not exist or is never pulled, a container still in
    CreateContainerConfigError after --config-timeout.
    """
    from asynckubelet.node.access import StateDir, daemon_pid, manifest_pods
    from asynckubelet.node.operations import spec_key

    level = check_pod_security(pod_security)
    target = StateDir(node.state).manifests
    before = manifest_pods(
        target,
        node_name=node.name,
        pod_security=level,
        allow_namespace_policy=allow_namespace_policy,
    )
    texts, applied = _read(
        files, node_name=node.name, level=level, allow_namespace_policy=allow_namespace_policy
    )
    _install(target, texts)
    for pod in applied:
        assert pod.metadata is not None
        verb = "created"
        if (pod.metadata.uid or "") in before:
            same = spec_key(before[pod.metadata.uid or ""]) == spec_key(pod)
            verb = "unchanged" if same else "configured"
        out.print(f"pod/{escape(pod.metadata.name or '')} {verb}")
    if not wait or not applied:
        return
    if daemon_pid(node.state) is None:
        raise fail(f"no `asynckubelet serve` runs with state dir {node.state}; cannot --wait")
    run_async(_wait, applied, node, timeout, config_timeout)


def _read(
    files: list[str], *, node_name: str, level: Level, allow_namespace_policy: bool
) -> tuple[list[tuple[str, str]], list[Pod]]:
    """Each file's name in the manifest directory and text, and the pods they hold; a file
    that does not validate stops the command before anything is written. Standard input
    (``-``) is read once, and what was read is what is validated and kept."""
    from asynckubelet.manifests import load_manifests_text, read_sources

    texts: list[tuple[str, str]] = []
    pods: list[Pod] = []
    for index, (name, text) in enumerate(read_sources(files)):
        loaded = load_manifests_text(
            text,
            source_name=name,
            pod_security=level,
            allow_namespace_policy=allow_namespace_policy,
            node_name=node_name,
        )
        for warning in loaded.warnings:
            warn(str(warning))
        if not (loaded.pods or loaded.configmaps or loaded.secrets):
            continue
        base = f"stdin-{index}.yaml" if name == "<stdin>" else Path(name).name
        if Path(base).suffix not in (".yaml", ".yml", ".json"):
            base += ".yaml"
        texts.append((base, text))
        pods.extend(loaded.pods)
    if not texts:
        raise fail("no objects passed to apply")
    return texts, pods


def _install(target: Path, texts: list[tuple[str, str]]) -> None:
    """Keep each file in the manifest directory, written at once, closed to other users."""
    from asynckubelet.node.access import save_manifest

    try:
        for base, text in texts:
            save_manifest(target, base, text)
    except OSError as e:
        raise fail(f"cannot write into {target}: {e}") from None


async def _wait(pods: list[Pod], node: NodeRef, timeout: float, config_timeout: float) -> None:
    import functools

    from asynckubelet.node.access import daemon_pid, read_pods
    from asynckubelet.node.operations import PodKey, wait_until_ready
    from asynckubelet.printers import kubectl_status
    from asynckubelet.progress import WaitDisplay

    display = WaitDisplay(console=err, live=err.is_terminal)

    def ready(pod: Pod) -> None:
        assert pod.metadata is not None and pod.status is not None
        out.print(
            f"pod/{escape(pod.metadata.name or '')} {escape(kubectl_status(pod, pod.status))}"
        )

    def waiting(reasons: Mapping[PodKey, str]) -> None:
        display.update({f"pod/{name}": reason for (_, name), reason in reasons.items()})

    async with node_runtime(node) as rm:
        with display:
            await wait_until_ready(
                rm,
                pods=pods,
                read_pods=functools.partial(read_pods, rm, state=node.state),
                node_running=lambda: daemon_pid(node.state) is not None,
                timeout=timeout,
                config_timeout=config_timeout,
                on_ready=ready,
                on_waiting=waiting,
            )
