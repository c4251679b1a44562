"""``asynckubelet debug``: an ephemeral container in a running pod, as ``kubectl debug POD
--image IMAGE`` adds one.

The container (``debugger-xxxxx`` unless ``-c`` names it, said as kubectl says it) is added
through the pod's ``ephemeralcontainers`` subresource on the daemon's socket; with
``--target`` it shares that container's process namespace. With ``-i`` the command waits
for it to run and attaches this terminal to it (``-t``: a terminal), as kubectl does; a
container that has already ended by then has its output printed instead. Without ``-i`` it
is only added.
"""

from __future__ import annotations

import secrets
import sys
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from asynckubelet import errors
from asynckubelet.cli import output
from asynckubelet.cli.client import require_daemon
from asynckubelet.cli.options import (
    LogOptions,
    NamespaceOpt,
    NodeRef,
    PodNameArg,
    StdinOpt,
    TtyOpt,
    UsageError,
)

if TYPE_CHECKING:
    from asynckubelet.api.client import NodeClient

NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
"""kubectl's alphabet for generated name suffixes (no vowels, no look-alikes)."""
WAIT_SECONDS = 300.0
POLL_SECONDS = 0.5
PROMPT_HINT = "If you don't see a command prompt, try pressing enter."
FAILED_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)
"""Waiting reasons that will not end by waiting: the command stops with them."""

DebugCommandArg = Annotated[
    list[str] | None,
    typer.Argument(metavar="COMMAND...", help="The command and its arguments, after --."),
]
ImageOpt = Annotated[
    str,
    typer.Option("--image", metavar="IMAGE", help="The debug container's image (required)."),
]
TargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        metavar="CONTAINER",
        help="Share this container's process namespace (its processes are seen).",
    ),
]
DebugContainerOpt = Annotated[
    str | None,
    typer.Option(
        "--container",
        "-c",
        metavar="NAME",
        help="The debug container's name (default: debugger- and five random characters).",
    ),
]
PullPolicyOpt = Annotated[
    str | None,
    typer.Option(
        "--image-pull-policy",
        metavar="POLICY",
        help="Always, IfNotPresent or Never (default: the API server's default).",
    ),
]


@output.command(not_found_as="NotFound")
def debug(
    name: PodNameArg,
    command: DebugCommandArg = None,
    *,
    image: ImageOpt,
    target: TargetOpt = None,
    container: DebugContainerOpt = None,
    image_pull_policy: PullPolicyOpt = None,
    stdin: StdinOpt = False,
    tty: TtyOpt = False,
    namespace: NamespaceOpt = "default",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Add an ephemeral container to a running pod, as `kubectl debug POD --image IMAGE`:
    --target shares a container's processes; with -i (and -t) attach to it."""
    if tty and not stdin:
        raise UsageError("-i/--stdin is required for containers with -t/--tty=true")
    client = require_daemon(node, verb="debug")
    if not container:
        container = "debugger-" + "".join(secrets.choice(NAME_CHARS) for _ in range(5))
        print(f"Defaulting debug container name to {container}.")
    if target:
        print(
            f'Targeting container "{target}". If you don\'t see processes from this container '
            "it may be because the container runtime doesn't support this feature."
        )
    spec: dict[str, Any] = {
        "name": container,
        "image": image,
        "stdin": stdin,
        "tty": tty,
        "terminationMessagePolicy": "File",
    }
    if command:
        spec["command"] = list(command)
    if target:
        spec["targetContainerName"] = target
    if image_pull_policy:
        spec["imagePullPolicy"] = image_pull_policy
    try:
        client.add_ephemeral_container(namespace, name, spec)
    except errors.ManifestError as e:
        # kubectl's words for an Invalid answer: The Pod "x" is invalid: <causes>
        print(f"The {e.args[0]}", file=sys.stderr)
        raise typer.Exit(1) from None
    if not stdin:
        return
    state = _wait_started(client, namespace, name, container)
    if "terminated" in state:
        _print_logs(client, namespace, name, container)
        return
    print(PROMPT_HINT, file=sys.stderr)
    raise typer.Exit(
        output.run_async(_attach, client, namespace, name, container, stdin, _terminal(tty))
    )


def _terminal(tty: bool) -> bool:
    from asynckubelet.cli.commands.exec import NO_TTY

    if tty and not sys.stdin.isatty():
        print(NO_TTY, file=sys.stderr)
        return False
    return tty


def _wait_started(client: NodeClient, namespace: str, pod: str, container: str) -> dict[str, Any]:
    """The container's state once it runs or has ended; an error when it cannot start."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        found = client.pod(namespace, pod)
        statuses = (found.get("status") or {}).get("ephemeralContainerStatuses") or []
        state = next((s.get("state") or {} for s in statuses if s.get("name") == container), {})
        if "running" in state or "terminated" in state:
            return dict(state)
        reason = (state.get("waiting") or {}).get("reason") or ""
        if reason in FAILED_REASONS:
            message = (state.get("waiting") or {}).get("message") or reason
            raise errors.PodError(f"container {container} cannot start: {reason}: {message}")
        if time.monotonic() > deadline:
            raise errors.PodError(
                f"timed out waiting for container {container} of pod {pod} to start"
            )
        time.sleep(POLL_SECONDS)


def _print_logs(client: NodeClient, namespace: str, pod: str, container: str) -> None:
    from asynckubelet.node.operations import PodLogOptions

    for piece in client.log(namespace, pod, PodLogOptions(container=container)):
        sys.stdout.buffer.write(piece)
    sys.stdout.flush()


async def _attach(
    client: NodeClient, namespace: str, pod: str, container: str, stdin: bool, tty: bool
) -> int:
    from asynckubelet.api.execclient import attach_stream
    from asynckubelet.cli.commands.exec import attached

    async with attach_stream(
        client.socket, namespace, pod, container=container, stdin=stdin, tty=tty
    ) as session:
        return await attached(session, stdin=stdin, tty=tty)
