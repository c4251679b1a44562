"""``asynckubelet version``: this program's version, and the node daemon's when one runs,
as ``kubectl version`` names the client's and the server's."""

from __future__ import annotations

from asynckubelet.cli.client import find_daemon
from asynckubelet.cli.options import LogOptions, NodeRef
from asynckubelet.cli.output import command, out


@command()
def version(*, node: NodeRef, log: LogOptions) -> None:
    """Print the client's version, and the node daemon's (`serve`) when one answers."""
    from asynckubelet._version import __version__
    from asynckubelet.errors import DaemonError

    out.print(f"Client Version: v{__version__}", markup=False)
    client = find_daemon(node)
    if client is None:
        return
    try:
        server = client.version()
    except DaemonError:
        return
    shown = f"v{server.removeprefix('v')}" if server else "unknown"
    out.print(f"Server Version: {shown}", markup=False)
