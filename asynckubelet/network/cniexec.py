"""How one CNI plugin binary is called, as the CNI specification says.

Apart from :mod:`asynckubelet.network.cni`, which runs a configuration list for every pod,
this is the exchange with a single plugin: its environment (``CNI_COMMAND``, ``CNI_ARGS``
and the attachment variables), the runtime's capability arguments, the process itself with
its input written and both outputs drained, and the reading of its answer: the pod's
addresses from a result, or the error JSON turned into a message that quotes it.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from asynckubelet import errors
from asynckubelet.manifests.messages import go_quote, shown
from asynckubelet.network import PodNetworkRequest

IFNAME = "eth0"


def plugin_environment(
    *,
    command: str,
    plugin_dirs: Sequence[Path],
    sandbox_id: str = "",
    netns: str = "",
    ifname: str = IFNAME,
    cni_args: str = "",
    path: str = "/usr/sbin:/usr/bin:/sbin:/bin",
) -> dict[str, str]:
    """A plugin's environment: the attachment variables only for the verbs about one
    attachment (``ADD``, ``CHECK``, ``DEL``); ``STATUS``, ``GC`` and ``VERSION`` get
    ``CNI_COMMAND`` and ``CNI_PATH`` alone, as the specification lists them."""
    env = {
        "PATH": path,
        "CNI_COMMAND": command,
        "CNI_PATH": ":".join(str(d) for d in plugin_dirs),
    }
    if command in ("ADD", "CHECK", "DEL"):
        env.update(
            CNI_CONTAINERID=sandbox_id,
            CNI_NETNS=netns,
            CNI_IFNAME=ifname,
            CNI_ARGS=cni_args,
        )
    return env


def capability_args(request: PodNetworkRequest) -> dict[str, Any]:
    """The runtime's capability arguments for a pod (libcni's ``CapabilityArgs``); each
    plugin gets those it declares in ``capabilities``, as its ``runtimeConfig``."""
    args: dict[str, Any] = {}
    if request.port_mappings:
        args["portMappings"] = [
            {
                "hostPort": p.host_port,
                "containerPort": p.container_port,
                "protocol": p.protocol.lower(),
                "hostIP": p.host_ip,
            }
            for p in request.port_mappings
        ]
    if request.dns is not None and (
        request.dns.servers or request.dns.searches or request.dns.options
    ):
        args["dns"] = {
            "servers": list(request.dns.servers),
            "searches": list(request.dns.searches),
            "options": list(request.dns.options),
        }
    if request.ips:
        args["ips"] = list(request.ips)
    return args


async def _run_plugin(
    binary: Path, *, stdin: bytes, env: Mapping[str, str]
) -> tuple[int, bytes, bytes]:
    """Run a plugin with ``stdin``: exit code, stdout, stderr. A plugin may answer without
    reading its input (``VERSION``) and be gone before it is written; that is no error."""
    out, err = bytearray(), bytearray()

    async def drain(stream: anyio.abc.ByteReceiveStream, into: bytearray) -> None:
        async for chunk in stream:
            into.extend(chunk)

    async with await anyio.open_process([str(binary)], env=env) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # noqa: S101  (type narrowing: the three pipes were asked for)
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, proc.stdout, out)
            tg.start_soon(drain, proc.stderr, err)
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await proc.stdin.send(stdin)
            await proc.stdin.aclose()
            await proc.wait()
    return proc.returncode or 0, bytes(out), bytes(err)


_CNI_ARG_VALUE = re.compile(r"[A-Za-z0-9._-]{1,253}")


def cni_args(request: PodNetworkRequest) -> str:
    """``CNI_ARGS``: ``key=value`` pairs joined by ``;``. The values are names the API
    server's rules allow, a UUID and a Docker id, so a value holding anything else (a ``;``
    would add an argument of its own, such as ``IP=``) is refused, never escaped: plugins
    differ in how they would read an escape."""
    pairs = [
        ("K8S_POD_NAMESPACE", request.namespace),
        ("K8S_POD_NAME", request.pod_name),
        ("K8S_POD_INFRA_CONTAINER_ID", request.sandbox_id),
        ("K8S_POD_UID", request.uid),
    ]
    for key, value in pairs:
        if not isinstance(value, str) or _CNI_ARG_VALUE.fullmatch(value) is None:
            shown_value = go_quote(shown(value, 64)) if isinstance(value, str) else "a non-string"
            raise errors.NetworkError(f"CNI_ARGS: {key} may not be {shown_value}")
    return ";".join(["IgnoreUnknown=1", *(f"{key}={value}" for key, value in pairs)])


def _args_text(entry: Mapping[str, Any]) -> str:
    pairs = entry.get("cniArgs") or []
    return ";".join("=".join(p) for p in pairs if isinstance(p, list) and len(p) == 2)


def _ips(result: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The pod's addresses from a result, IPv4 first then IPv6 (the kubelet's order)."""
    if not result:
        return ()
    found = []
    interfaces = result.get("interfaces") or []
    for ip in result.get("ips") or []:
        address = str(ip.get("address", "")).split("/")[0]
        index = ip.get("interface")
        if (
            isinstance(index, int)
            and 0 <= index < len(interfaces)
            and interfaces[index].get("name") == "lo"
        ):
            continue
        if address and not address.startswith("127.") and address != "::1":
            found.append(address)
    return tuple(sorted(found, key=lambda a: ":" in a))


def _plugin_error(kind: str, command: str, out: str, stderr: bytes) -> str:
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "msg" in doc:
        text = f"CNI plugin {kind} {command} failed (code {doc.get('code')}): {doc['msg']}"
        if doc.get("details"):
            text += f": {doc['details']}"
        return text
    detail = (out or stderr.decode(errors="replace")).strip()
    return f"CNI plugin {kind} {command} failed: {detail or 'no output'}"
