"""``asynckubelet exec``: a command in a pod's container, with its exit code.

Without ``-i``/``-t`` the command's output is collected and written out; with them the
terminal is attached: input, output, raw mode and the window size, as ``kubectl exec``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import sys
from typing import TYPE_CHECKING

import anyio
import typer

from asynckubelet.cli import output
from asynckubelet.cli.client import as_pod, daemon_client, node_pods, node_runtime, pod_name
from asynckubelet.cli.options import (
    CommandArg,
    ContainerOpt,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    PodRefArg,
    StdinOpt,
    TtyOpt,
)

if TYPE_CHECKING:
    from asynckubelet.api.client import NodeClient
    from asynckubelet.docker import DockerAPI
    from asynckubelet.docker.execs import ExecSession


@output.command(not_found_as="BadRequest")
def exec_(
    name: PodRefArg,
    command: CommandArg,
    *,
    container: ContainerOpt = None,
    stdin: StdinOpt = False,
    tty: TtyOpt = False,
    namespace: NamespaceOpt = "default",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Run a command in a pod's container; exits with the command's exit code."""
    request = _Request(
        name=pod_name(name, namespace=namespace, node=node, attach=True),
        command=command,
        container=container,
        namespace=namespace,
        stdin=stdin,
        tty=_terminal(stdin=stdin, tty=tty),
    )
    client = daemon_client(node)
    if client is None:
        raise typer.Exit(output.run_async(_exec, request, node))
    container_id, engine = _through_daemon(request, client, node)
    raise typer.Exit(output.run_async(_exec, request, engine, container_id))


NO_TTY = "Unable to use a TTY - input is not a terminal or the right kind of file"


def _terminal(*, stdin: bool, tty: bool) -> bool:
    """Whether the command gets a terminal, as ``kubectl exec`` decides: only with ``-i``
    too, and only when the input is a terminal (else it says so and goes on without)."""
    if not (tty and stdin):
        return False
    if not sys.stdin.isatty():
        print(NO_TTY, file=sys.stderr)
        return False
    return True


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Request:
    name: str
    command: list[str]
    container: str | None
    namespace: str
    stdin: bool
    tty: bool


def _through_daemon(request: _Request, client: NodeClient, node: NodeRef) -> tuple[str, NodeRef]:
    """The container to enter, as the daemon's pod status names it, and the engine the
    daemon drives (the command then execs there itself)."""
    from asynckubelet import errors
    from asynckubelet.node.access import default_container

    pod = as_pod(client.pod(request.namespace, request.name))
    chosen, _ = default_container(pod, request.container)
    status = pod.status
    statuses = (
        [*(status.containerStatuses or []), *(status.initContainerStatuses or [])]
        if status is not None
        else []
    )
    found = next((c for c in statuses if c.name == chosen), None)
    running = found is not None and found.state is not None and found.state.running is not None
    if found is None or not found.containerID or not running:
        raise errors.PodError("cannot exec into a container that is not running")
    info = client.node()
    engine = node.docker_host or str(info.get("docker_host") or "") or None
    where = dataclasses.replace(node, docker_host=engine, node_name=str(info["node_name"]))
    return found.containerID.split("://", 1)[-1], where


async def _exec(request: _Request, node: NodeRef, container_id: str | None = None) -> int:
    from asynckubelet import errors
    from asynckubelet.node.operations import find_container

    async with node_runtime(node) as rm:
        if container_id is None:
            target = await find_container(
                rm,
                await node_pods(rm, node),
                namespace=request.namespace,
                name=request.name,
                container=request.container,
            )
            container_id = target.container_id
        cid = container_id
        info = await rm.docker.inspect_container(cid)
        if not (info.get("State") or {}).get("Running"):
            raise errors.PodError("cannot exec into a container that is not running")
        if request.stdin or request.tty:
            return await _interactive(rm.docker, cid, request)
        result = await rm.docker.exec_run(cid, request.command)
        sys.stdout.buffer.write(result.stdout)
        sys.stdout.flush()
        sys.stderr.buffer.write(result.stderr)
        sys.stderr.flush()
        return result.exit_code


async def _interactive(docker: DockerAPI, container_id: str, request: _Request) -> int:
    """Attach the terminal to the command: input, output, window size, raw mode."""
    import termios
    import tty as tty_mod

    from asynckubelet.docker.execs import exec_session

    raw = request.tty and sys.stdin.isatty()
    saved = termios.tcgetattr(sys.stdin.fileno()) if raw else None
    async with exec_session(
        docker, container_id, request.command, stdin=request.stdin, tty=request.tty
    ) as session:
        if request.tty:
            await _resize(session)
        if raw:
            tty_mod.setraw(sys.stdin.fileno(), termios.TCSANOW)
        try:
            async with anyio.create_task_group() as tg:
                if request.stdin:
                    tg.start_soon(_pump_in, session)
                if request.tty:
                    tg.start_soon(_follow_window_size, session)
                tg.start_soon(_until_exited, session, tg.cancel_scope)
                await _pump_out(session)
                tg.cancel_scope.cancel()
        finally:
            if saved is not None:
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
        return await session.exit_code()


async def _resize(session: ExecSession) -> None:
    size = shutil.get_terminal_size()
    await session.resize(rows=size.lines, columns=size.columns)


async def _follow_window_size(session: ExecSession) -> None:
    import signal

    with anyio.open_signal_receiver(signal.SIGWINCH) as signals:
        async for _ in signals:
            await _resize(session)


async def _pump_in(session: ExecSession) -> None:
    fd = sys.stdin.fileno()
    # A regular file cannot be polled; it is read at once, never blocking. Some devices
    # (``/dev/null``) cannot be polled either: the event loop refuses them, and they are
    # read in a worker thread.
    regular = stat.S_ISREG(os.fstat(fd).st_mode)
    pollable = not regular
    while True:
        if pollable:
            try:
                await anyio.wait_readable(fd)
            except PermissionError:
                pollable = False
        if regular or pollable:
            data = os.read(fd, 65536)
        else:
            data = await anyio.to_thread.run_sync(os.read, fd, 65536, abandon_on_cancel=True)
        if not data:
            session.close_input()
            return
        await session.write(data)


async def _pump_out(session: ExecSession) -> None:
    while (chunk := await session.read()) is not None:
        target = sys.stderr.buffer if chunk[0] == 2 else sys.stdout.buffer
        target.write(chunk[1])
        target.flush()


async def _until_exited(session: ExecSession, scope: anyio.CancelScope) -> None:
    # Docker may keep an attached stream open after the command ended.
    while await session.running():  # noqa: ASYNC110
        await anyio.sleep(0.2)
    await anyio.sleep(0.2)
    scope.cancel()
