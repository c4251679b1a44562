"""A node daemon for unit tests: a ``Kubelet`` on :class:`~asynckubelet.testing.FakeDocker`
serving the real local API on ``<state>/api.sock``, in a thread of its own, so the command
line (run in the test's thread) talks to it exactly as to a running ``serve``."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from typer.testing import CliRunner

from asynckubelet.cli.app import app
from asynckubelet.manifests import Level
from asynckubelet.node import daemon
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
from asynckubelet.testing import FakeDocker

IMAGES = ("busybox:1.35", "busybox", "asynckubelet.local/pause:3.10")


@dataclass
class Daemon:
    """The running daemon: its node, its engine and the portal into its event loop."""

    node: Kubelet
    docker: FakeDocker
    portal: BlockingPortal
    state: Path


@contextlib.contextmanager
def running_daemon(
    state: Path, *, node_name: str = "n1", pod_security: Level = "baseline"
) -> Iterator[Daemon]:
    with start_blocking_portal() as portal:

        async def make() -> tuple[Kubelet, FakeDocker]:
            docker = FakeDocker(images=IMAGES)
            config = KubeletConfig(
                node_name=node_name,
                state_dir=state,
                pod_security=pod_security,
                housekeeping_period=3600,
            )
            objects = ObjectStore(directory=state / OBJECTS_DIR, persistent_source=API_SOURCE)
            return Kubelet(config, docker=docker, objects=objects), docker

        node, docker = portal.call(make)
        with portal.wrap_async_context_manager(node):
            from asynckubelet.api.localapi import serve_local

            path = daemon.claim_socket(state)
            info = daemon.DaemonInfo(
                node_name=node_name, pod_security=pod_security, docker_host=docker.url
            )
            daemon.write_node_info(state, info)
            stop = portal.call(anyio.Event)

            async def serve_until_stopped(task_status: TaskStatus[None]) -> None:
                async with anyio.create_task_group() as group:
                    await group.start(functools.partial(serve_local, node, path=str(path)))
                    task_status.started()
                    await stop.wait()
                    group.cancel_scope.cancel()

            future, _ = portal.start_task(serve_until_stopped, name="local API")
            try:
                yield Daemon(node=node, docker=docker, portal=portal, state=state)
            finally:
                # The local API closes every connection before the node stops.
                portal.call(stop.set)
                future.result(timeout=30)


def invoke(
    state: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> tuple[int, str, str]:
    """The command line, run in the test's thread with the state dir ``state`` (and
    ``env``, ``stdin``): its exit code, stdout and stderr."""
    result = CliRunner().invoke(
        app, [*args], input=stdin, env={"ASYNCKUBELET_STATE_DIR": str(state), **(env or {})}
    )
    return result.exit_code, result.stdout, result.stderr


def cluster_serve(
    monkeypatch: pytest.MonkeyPatch, state: Path, *args: str
) -> tuple[int, str, KubeletConfig | None]:
    """``serve --kubeconfig ... ARGS`` up to the point where the node would join: its exit
    code, its output and the kubelet configuration it would join with (None when the
    command stopped before)."""
    from asynckubelet.cli import cluster_mode, provision

    handed: list[KubeletConfig] = []
    monkeypatch.setattr(provision, "ensure_engine", lambda *args, **kwargs: None)
    monkeypatch.setattr(
        cluster_mode, "serve_cluster", lambda kubelet, *rest: handed.append(kubelet)
    )
    kubeconfig = state / "node.kubeconfig"
    result = CliRunner().invoke(
        app,
        ["serve", "--kubeconfig", str(kubeconfig), "--nice", "0", *args],
        env={"ASYNCKUBELET_STATE_DIR": str(state)},
    )
    return result.exit_code, result.output, handed[0] if handed else None
