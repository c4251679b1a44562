"""How the client commands (apply, delete, get, describe, logs, exec) reach a node.

They need no daemon: a node's pods are in Docker and in its state dir, so each command
opens the node's runtime on the engine itself, reads the pods as the daemon sees them
(:func:`~asynckubelet.node.access.read_pods`) and acts through
:mod:`asynckubelet.node.operations`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio

from asynckubelet.cli.options import NodeRef
from asynckubelet.cli.output import warn

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.manifests import Level, Manifests
    from asynckubelet.runtime.manager import RuntimeManager

CLOSE_TIMEOUT = 10.0
"""Seconds the runtime's connection may take to close, also after a signal."""


@contextlib.asynccontextmanager
async def node_runtime(node: NodeRef) -> AsyncIterator[RuntimeManager]:
    """The node's runtime on its engine; closed shielded from cancellation, within
    :data:`CLOSE_TIMEOUT`, so a command stopped by a signal still ends promptly."""
    from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager

    rm = RuntimeManager(RuntimeConfig(node_name=node.name, docker_url=node.docker_host))
    await rm.__aenter__()
    try:
        yield rm
    finally:
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await rm.__aexit__(None, None, None)


async def node_pods(rm: RuntimeManager, node: NodeRef) -> list[Pod]:
    """Every pod of the node with its status; a clear error when the engine is down."""
    from asynckubelet import errors
    from asynckubelet.node.access import read_pods

    if not await rm.docker.ping():
        raise errors.RuntimeUnavailable(
            f"cannot reach the Docker engine at {rm.docker.url}; is dockerd running?"
        )
    return await read_pods(rm, state=node.state)


async def read_node_pods(node: NodeRef) -> list[Pod]:
    async with node_runtime(node) as rm:
        return await node_pods(rm, node)


def load_files(files: list[str], *, node_name: str, level: Level) -> Manifests:
    """The manifests in ``files``, validated for this node; their warnings shown."""
    from asynckubelet.manifests import load_manifests

    loaded = load_manifests(files, pod_security=level, node_name=node_name)
    for warning in loaded.warnings:
        warn(str(warning))
    return loaded
