"""``asynckubelet delete``: pods deleted gracefully, by name or by the files that made them.

Their manifests leave the manifest directory (so a running ``serve`` deletes them), and the
command waits until Docker holds nothing of them, stopping them itself when no daemon runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from asynckubelet.cli.client import load_files, node_pods, node_runtime
from asynckubelet.cli.options import (
    POD_KINDS,
    DeleteFilenamesOpt,
    DeleteGracePeriodOpt,
    DeleteKindArg,
    DeleteTimeoutOpt,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    OptionalPodNameArg,
    PodSecurityOpt,
    UsageError,
    check_pod_security,
)
from asynckubelet.cli.output import command, err, fail, out, run_async

if TYPE_CHECKING:
    from asynckubelet.manifests import Level
    from asynckubelet.node.operations import PodKey


@command()
def delete(
    kind: DeleteKindArg = None,
    name: OptionalPodNameArg = None,
    *,
    files: DeleteFilenamesOpt = None,
    namespace: NamespaceOpt = "default",
    grace_period: DeleteGracePeriodOpt = None,
    timeout: DeleteTimeoutOpt = 120,
    pod_security: PodSecurityOpt = "privileged",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Delete pods gracefully: `delete pod NAME` or `delete -f FILE...`; waits until they
    are gone (exit 1 naming those still there after --timeout)."""
    from asynckubelet.node.access import StateDir
    from asynckubelet.node.operations import remove_manifests

    level = check_pod_security(pod_security)
    targets = _targets(kind, name, files, namespace=namespace, node=node, level=level)
    in_files = remove_manifests(
        StateDir(node.state).manifests, pods=targets, node_name=node.name, pod_security=level
    )
    present, left = run_async(_delete, targets, in_files, node, grace_period, timeout)
    for _ns, pod_name in sorted(present - left):
        out.print(f'pod "{escape(pod_name)}" deleted')
    missing = sorted(targets - present)
    for _ns, pod_name in missing:
        err.print(f'Error from server (NotFound): pods "{escape(pod_name)}" not found')
    if left:
        still = ", ".join(f"{ns}/{pod_name}" for ns, pod_name in sorted(left))
        wait = f"timed out after {timeout:g}s waiting for the pods to be gone"
        raise fail(f"{wait}; still present: {still}")
    if missing:
        raise typer.Exit(1)


def _targets(
    kind: str | None,
    name: str | None,
    files: list[str] | None,
    *,
    namespace: str,
    node: NodeRef,
    level: Level,
) -> set[PodKey]:
    """The pods the arguments name: those of the files, ``pod NAME`` or ``pod/NAME``."""
    from asynckubelet.node.operations import pod_key

    if files:
        return {pod_key(p) for p in load_files(files, node_name=node.name, level=level).pods}
    if kind in POD_KINDS and name:
        return {(namespace, name)}
    if kind is not None and "/" in kind and kind.split("/", 1)[0] in POD_KINDS:
        return {(namespace, kind.split("/", 1)[1])}
    raise UsageError("give `delete pod NAME` or `delete -f FILE`")


async def _delete(
    targets: set[PodKey],
    in_files: set[PodKey],
    node: NodeRef,
    grace_period: float | None,
    timeout: float,
) -> tuple[set[PodKey], set[PodKey]]:
    """Delete the targets the node has (in Docker or in its manifests): those, and those
    still in Docker when the timeout ran out."""
    from asynckubelet.node.access import daemon_pid
    from asynckubelet.node.operations import delete_pods, pod_key

    async with node_runtime(node) as rm:
        present = {pod_key(p) for p in await node_pods(rm, node)} | in_files
        present &= targets
        left = await delete_pods(
            rm,
            pods=present,
            daemon_running=daemon_pid(node.state) is not None,
            grace_period=grace_period,
            timeout=timeout,
        )
    return present, left
