"""Netlink and namespace plumbing of the ``bridge`` backend, over pyroute2.

Kept apart from :mod:`asynckubelet.network.bridge` so the plugin reads as the kubenet
steps it takes while the ways of reaching the kernel live here: entering a pod's network
namespace from one thread (``setns`` is per thread), links looked up by name instead of
dumped, the bridge's MAC pinned as the CNI bridge plugin pins it, and pyroute2 imported only
when netlink is first spoken, and only its rtnetlink modules.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from asynckubelet import errors

if TYPE_CHECKING:
    from pyroute2.iproute.linux import AsyncIPRoute
    from pyroute2.netlink.exceptions import NetlinkError

_T = TypeVar("_T")
_CLONE_NEWNET = 0x40000000


def _netlink_error(what: str, e: Exception) -> errors.NetworkError:
    return errors.NetworkError(f"{what}: {e}")


def _in_namespace(path: str, work: Callable[[], _T]) -> _T:
    """``work()`` run by this thread inside the network namespace at ``path``."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(path, os.O_RDONLY)
        try:
            if libc.setns(target, _CLONE_NEWNET) != 0:
                code = ctypes.get_errno()
                raise OSError(code, f"setns into {path}: {os.strerror(code)}")
            try:
                return work()
            finally:
                if libc.setns(own, _CLONE_NEWNET) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, f"cannot return to the node namespace: {code}")
        finally:
            os.close(target)
    finally:
        os.close(own)


def _open_netns_socket(path: str) -> socket.socket:
    """A NETLINK_ROUTE socket inside the namespace at ``path``, made in this thread."""
    return _in_namespace(path, lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 0))


def _enable_ipv6_in(path: str, ifname: str) -> None:
    """IPv6 on (Docker turns it off) and DAD off for ``lo`` and ``ifname`` in ``path``."""

    def write() -> None:
        for key, value in (
            ("lo/disable_ipv6", "0"),
            (f"{ifname}/accept_dad", "0"),
            (f"{ifname}/disable_ipv6", "0"),
        ):
            with open(f"/proc/sys/net/ipv6/conf/{key}", "w") as f:
                f.write(value)

    _in_namespace(path, write)


async def _set_hairpin(ipr: AsyncIPRoute, port: str) -> None:
    """Hairpin mode on for bridge port ``port``, by netlink: sysfs is read-only inside a
    container that is not privileged (Docker-in-Docker)."""
    index = await _index(ipr, port)
    if index is None:
        raise errors.NetworkError(f"veth {port} vanished after creation")
    await ipr.brport("set", index=index, mode=1)


def _write_sysctl(path: str, value: str) -> None:
    try:
        with open(path) as f:
            if f.read().strip() == value:
                return
        with open(path, "w") as f:
            f.write(value)
    except OSError as e:
        raise errors.NetworkError(f"cannot set {path}: {e}") from e


_NET_ADDR_SET = "3"


def _mac_pinned(bridge: str) -> bool:
    """Whether the bridge's MAC address was set (``addr_assign_type`` 3), so that the
    kernel keeps it; one left to the kernel follows the lowest MAC among its ports."""
    try:
        with open(f"/sys/class/net/{bridge}/addr_assign_type") as f:
            return f.read().strip() == _NET_ADDR_SET
    except OSError:
        return False


def bridge_mac(bridge: str) -> str:
    """The MAC address a bridge gets when its own is unusable: locally administered,
    unicast, the same for the same bridge name every time."""
    digest = hashlib.sha256(f"asynckubelet bridge {bridge}".encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


def _usable_mac(mac: str | None) -> bool:
    """A unicast address other than all zeros (a bridge whose last port went has zeros)."""
    return bool(mac) and mac != "00:00:00:00:00:00" and not int(str(mac)[:2], 16) & 1


async def _pin_mac(ipr: AsyncIPRoute, index: int, bridge: str) -> None:
    """Set the bridge's MAC address, as the CNI bridge plugin does (to itself, or to
    :func:`bridge_mac` when it has none worth keeping). Left to the kernel, a bridge takes
    the lowest MAC of its ports, changes it when that port goes and has all zeros once the
    last one went: every pod's neighbour entry for the gateway then names a MAC nobody
    answers to, and the pods' DNS queries and Service traffic vanish until their ARP
    entries expire."""
    found = await ipr.link("get", index=index)
    mac = found[0].get("IFLA_ADDRESS") if found else None
    if _usable_mac(mac) and await anyio.to_thread.run_sync(_mac_pinned, bridge):
        return
    await ipr.link("set", index=index, address=mac if _usable_mac(mac) else bridge_mac(bridge))


def _iproute(**kwargs: Any) -> AsyncIPRoute:
    from pyroute2.iproute.linux import AsyncIPRoute

    return AsyncIPRoute(**kwargs)


def _netlink_error_type() -> type[NetlinkError]:
    from pyroute2.netlink import exceptions

    found: type[NetlinkError] = exceptions.NetlinkError
    return found


def _in_netns_here(path: str) -> AsyncIPRoute:
    """An ``AsyncIPRoute`` inside the namespace at ``path``, its socket opened by this
    thread (the netlink thread: see :func:`~asynckubelet.network.off_loop`)."""
    try:
        sock = _open_netns_socket(path)
    except OSError as e:
        raise errors.NetworkError(f"cannot enter the sandbox network namespace {path}: {e}") from e
    return _iproute(use_socket=sock)


async def _delete_veth(name: str) -> None:
    """Delete the veth ``name`` (its peer goes with it); nothing when it is not there."""
    try:
        async with _iproute() as ipr:
            index = await _index(ipr, name)
            if index is not None:
                await ipr.link("del", index=index)
    except _netlink_error_type() as e:
        if e.code != errno.ENODEV:
            raise _netlink_error(f"deleting veth {name}", e) from e


async def _index(ipr: AsyncIPRoute, name: str) -> int | None:
    """The index of link ``name``, asked of the kernel by name: ``link_lookup`` would dump
    and decode every link on the loop, which grows with the pods on the node."""
    try:
        found = await ipr.link("get", ifname=name)
    except _netlink_error_type() as e:
        if e.code == errno.ENODEV:
            return None
        raise
    return int(found[0]["index"]) if found else None
