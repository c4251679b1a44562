"""File-based IP address management, safe across processes and crashes.

Pod addresses must never be handed out twice, even when several agents share a node
network or one of them dies half-way through a pod's setup. The state is a directory of
small files, one per allocated address, named by the address and holding the sandbox id
that owns it (the layout of the CNI ``host-local`` plugin) and, on a second line, the
Docker engine the sandbox belongs to (agents of several engines may share one bridge, and
each sweeps only its own engine's sandboxes), guarded by an ``fcntl`` lock
on a lock file. A file is created atomically (write, then rename), so a crash leaves
either a whole allocation or none; the start-up sweep then releases allocations whose
sandbox is gone. Addresses are handed out round-robin after the last one reserved, so a
just-released address is not reused at once. The files are 0600 in a 0700 directory
(:mod:`asynckubelet.network.records`).

Every blocking file operation runs in a worker thread: the event loop never waits on a
lock held by another process.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread

from asynckubelet import errors
from asynckubelet.network.records import private_dir, write_private

_LAST_RESERVED = "last_reserved_ip"
_LOCK = "lock"


@dataclass(frozen=True)
class Allocation:
    sandbox_id: str
    address: str
    prefixlen: int
    gateway: str


class FileIPAM:
    """Addresses of ``subnet`` for sandboxes, stored under ``directory``.

    The first host address of the subnet is the gateway and is never allocated.
    ``root`` is the network state directory ``directory`` is in (by default its parent):
    the directories from there down are kept private.
    """

    def __init__(self, *, directory: Path, subnet: str, root: Path | None = None) -> None:
        try:
            self.subnet = ipaddress.ip_network(subnet)
        except ValueError as e:
            raise errors.NetworkError(f"pod CIDR {subnet!r} is not a network: {e}") from e
        if self.subnet.num_addresses < 4:
            raise errors.NetworkError(f"pod CIDR {subnet} is too small for any pod")
        self.directory = directory
        self.root = directory.parent if root is None else root
        self.gateway = str(next(self.subnet.hosts()))

    # -- public, async --------------------------------------------------------------------

    async def allocate(self, *, sandbox_id: str, engine: str = "") -> Allocation:
        """The sandbox's address: the one it already holds, else the next free one.

        ``engine`` names the Docker engine the sandbox belongs to (empty: unknown)."""
        return await anyio.to_thread.run_sync(self._allocate, sandbox_id, engine)

    async def release(self, *, sandbox_id: str) -> list[str]:
        """Free every address the sandbox holds; returns them (none: already released)."""
        return await anyio.to_thread.run_sync(self._release, sandbox_id)

    async def get(self, *, sandbox_id: str) -> Allocation | None:
        return await anyio.to_thread.run_sync(self._get, sandbox_id)

    async def allocations(self) -> dict[str, str]:
        """address -> sandbox id of every allocation."""
        return await anyio.to_thread.run_sync(self._allocations)

    async def owners(self) -> dict[str, str]:
        """sandbox id -> engine (empty when unrecorded) of every allocation."""
        return await anyio.to_thread.run_sync(self._owners)

    # -- file work, in a worker thread ----------------------------------------------------

    def _ensure_dir(self) -> None:
        private_dir(self.root, self.directory)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._ensure_dir()
        fd = os.open(self.directory / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _entries(self) -> Iterator[tuple[str, str]]:
        for address, owner, _ in self._entries_with_engine():
            yield address, owner

    def _entries_with_engine(self) -> Iterator[tuple[str, str, str]]:
        if not self.directory.is_dir():
            return
        for path in self.directory.iterdir():
            if path.name.startswith(".") or path.name in (_LOCK, _LAST_RESERVED):
                continue
            try:
                ipaddress.ip_address(path.name)
                lines = path.read_text().splitlines()
            except (ValueError, OSError):
                continue
            owner = lines[0].strip() if lines else ""
            engine = lines[1].strip() if len(lines) > 1 else ""
            yield path.name, owner, engine

    def _allocation(self, address: str, sandbox_id: str) -> Allocation:
        return Allocation(
            sandbox_id=sandbox_id,
            address=address,
            prefixlen=self.subnet.prefixlen,
            gateway=self.gateway,
        )

    def _drop_half_written(self) -> None:
        """Temporary files of a writer killed while holding the lock (we hold it now)."""
        for path in self.directory.glob(".*.tmp"):
            path.unlink(missing_ok=True)

    def _allocate(self, sandbox_id: str, engine: str = "") -> Allocation:
        if not sandbox_id or "/" in sandbox_id or "\n" in sandbox_id:
            raise errors.NetworkError(f"IPAM: invalid sandbox id {sandbox_id!r}")
        if "\n" in engine:
            raise errors.NetworkError(f"IPAM: invalid engine id {engine!r}")
        with self._locked():
            self._drop_half_written()
            used: set[str] = set()
            for address, owner in self._entries():
                if owner == sandbox_id:
                    return self._allocation(address, sandbox_id)
                used.add(address)
            for candidate in self._candidates():
                if candidate in used:
                    continue
                owner = f"{sandbox_id}\n{engine}" if engine else sandbox_id
                self._write(self.directory / candidate, owner)
                self._write(self.directory / _LAST_RESERVED, candidate)
                return self._allocation(candidate, sandbox_id)
        raise errors.NetworkError(
            f"IPAM: no free address left in {self.subnet} ({len(used)} allocated)"
        )

    def _candidates(self) -> Iterator[str]:
        first = int(self.subnet.network_address) + 2
        last = int(self.subnet.broadcast_address) - 1
        start = first
        try:
            previous = int(ipaddress.ip_address((self.directory / _LAST_RESERVED).read_text()))
            if first <= previous < last:
                start = previous + 1
        except (OSError, ValueError):
            pass
        for value in range(start, last + 1):
            yield str(ipaddress.ip_address(value))
        for value in range(first, start):
            yield str(ipaddress.ip_address(value))

    @staticmethod
    def _write(path: Path, text: str) -> None:
        write_private(path, text)

    def _release(self, sandbox_id: str) -> list[str]:
        if not self.directory.is_dir():
            return []
        with self._locked():
            self._drop_half_written()
            freed = []
            for address, owner in self._entries():
                if owner == sandbox_id:
                    (self.directory / address).unlink(missing_ok=True)
                    freed.append(address)
            return freed

    def _get(self, sandbox_id: str) -> Allocation | None:
        for address, owner in self._entries():
            if owner == sandbox_id:
                return self._allocation(address, sandbox_id)
        return None

    def _allocations(self) -> dict[str, str]:
        return dict(self._entries())

    def _owners(self) -> dict[str, str]:
        return {owner: engine for _, owner, engine in self._entries_with_engine()}


__all__ = ["Allocation", "FileIPAM"]
