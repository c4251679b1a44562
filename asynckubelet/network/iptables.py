"""The iptables adapter: pod egress masquerade, forwarding and hostPort DNAT.

Everything lives in chains of our own, named ``AKL-...`` after the node bridge or the
sandbox, reached from the built-in chains by one jump each; removing a pod or the node
network is deleting those jumps and chains, and a rule without our chain names is never
touched. Commands run as subprocesses (``iptables -w`` waits for the xtables lock other
tools hold), never blocking the event loop; a failing command becomes a
:class:`~asynckubelet.errors.NetworkError` carrying iptables' own message.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence

import anyio

from asynckubelet import errors
from asynckubelet.network.firewall import DNAT, Firewall, checked_sandbox_id

_MISSING = (
    "No chain/target/match by that name",
    "does not exist",
    "Bad rule",
    "Chain already exists",
)


def forward_chain(bridge: str) -> str:
    return f"AKL-FWD-{bridge}"


def postrouting_chain(bridge: str) -> str:
    return f"AKL-POST-{bridge}"


def hostport_chain(bridge: str) -> str:
    return f"AKL-HP-{bridge}"


def pod_chain(sandbox_id: str) -> str:
    return f"AKLP-{sandbox_id[:16]}"


class IPTables(Firewall):
    """Runs ``iptables`` (the binary found on PATH, or ``binary``; ``ip6tables`` for IPv6)."""

    def __init__(self, *, binary: str = "iptables") -> None:
        self.binary = binary
        self._nat: bool | None = None

    def available(self) -> bool:
        return shutil.which(self.binary) is not None

    async def nat_supported(self) -> bool:
        """Whether the kernel has this family's ``nat`` table (IPv6 NAT is optional)."""
        if self._nat is None:
            argv = [self.binary, "-w", "5", "-t", "nat", "-S", "POSTROUTING"]
            try:
                proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
            except OSError:
                return False
            self._nat = proc.returncode == 0
        return self._nat

    async def run(self, *args: str, table: str = "filter", check: bool = True) -> str:
        argv = [self.binary, "-w", "5", "-t", table, *args]
        try:
            proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise errors.NetworkError(f"cannot run {self.binary}: {e}") from e
        if proc.returncode != 0 and check:
            text = proc.stderr.decode(errors="replace").strip()
            raise errors.NetworkError(f"{shlex.join(argv)}: {text}")
        return proc.stdout.decode(errors="replace")

    async def _quiet(self, *args: str, table: str) -> bool:
        """Run a command whose failure because the object is gone is fine; True if it ran."""
        argv = [self.binary, "-w", "5", "-t", table, *args]
        try:
            proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise errors.NetworkError(f"cannot run {self.binary}: {e}") from e
        if proc.returncode == 0:
            return True
        text = proc.stderr.decode(errors="replace")
        if any(m in text for m in _MISSING):
            return False
        raise errors.NetworkError(f"{shlex.join(argv)}: {text.strip()}")

    async def ensure_chain(self, chain: str, *, table: str) -> None:
        await self._quiet("-N", chain, table=table)

    async def ensure_rule(self, chain: str, rule: Sequence[str], *, table: str) -> None:
        """Append ``rule`` to ``chain`` unless it is there already."""
        if await self._quiet("-C", chain, *rule, table=table):
            return
        await self.run("-A", chain, *rule, table=table)

    async def ensure_jump(
        self, chain: str, target: str, *, table: str, match: Sequence[str] = ()
    ) -> None:
        """Insert a jump to ``target`` at the head of ``chain`` unless it is there."""
        rule = [*match, "-j", target]
        if await self._quiet("-C", chain, *rule, table=table):
            return
        await self.run("-I", chain, "1", *rule, table=table)

    async def rules(self, chain: str, *, table: str) -> list[list[str]]:
        """The rules of ``chain`` as ``-A`` argument lists; empty when it does not exist."""
        argv = [self.binary, "-w", "5", "-t", table, "-S", chain]
        proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            return []
        found = []
        for line in proc.stdout.decode().splitlines():
            words = shlex.split(line)
            if len(words) > 2 and words[0] == "-A":
                found.append(words[2:])
        return found

    async def chains(self, *, table: str) -> list[str]:
        argv = [self.binary, "-w", "5", "-t", table, "-S"]
        proc = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
        return [
            line.split()[1]
            for line in proc.stdout.decode().splitlines()
            if line.startswith("-N ") and len(line.split()) > 1
        ]

    async def delete_rule(self, chain: str, rule: Sequence[str], *, table: str) -> None:
        await self._quiet("-D", chain, *rule, table=table)

    async def delete_jumps(self, chain: str, target: str, *, table: str) -> None:
        for rule in await self.rules(chain, table=table):
            if "-j" in rule and rule[rule.index("-j") + 1] == target:
                await self._quiet("-D", chain, *rule, table=table)

    async def delete_chain(self, chain: str, *, table: str) -> None:
        await self._quiet("-F", chain, table=table)
        await self._quiet("-X", chain, table=table)

    # -- the node network ---------------------------------------------------------------

    async def setup_network(
        self, *, bridge: str, subnet: str, masquerade: bool, nat: bool = True
    ) -> None:
        """Forwarding for the bridge; with ``nat``, egress masquerade and the hostPort
        chain (``nat=False``: a kernel without this family's NAT table)."""
        fwd = forward_chain(bridge)
        await self.ensure_chain(fwd, table="filter")
        await self.ensure_rule(fwd, ["-i", bridge, "-j", "ACCEPT"], table="filter")
        await self.ensure_rule(fwd, ["-o", bridge, "-j", "ACCEPT"], table="filter")
        await self.ensure_jump("FORWARD", fwd, table="filter")
        if not nat:
            return

        post = postrouting_chain(bridge)
        await self.ensure_chain(post, table="nat")
        if masquerade:
            await self.ensure_rule(
                post, ["-s", subnet, "!", "-o", bridge, "-j", "MASQUERADE"], table="nat"
            )
        if ":" not in subnet:
            await self.ensure_rule(
                post, ["-s", "127.0.0.0/8", "-o", bridge, "-j", "MASQUERADE"], table="nat"
            )
        hairpin = ["-s", subnet, "-o", bridge, "-m", "conntrack", "--ctstate", "DNAT"]
        await self.ensure_rule(post, [*hairpin, "-j", "MASQUERADE"], table="nat")
        await self.ensure_jump("POSTROUTING", post, table="nat")

        hp = hostport_chain(bridge)
        await self.ensure_chain(hp, table="nat")
        local = ["-m", "addrtype", "--dst-type", "LOCAL"]
        await self.ensure_jump("PREROUTING", hp, table="nat", match=local)
        await self.ensure_jump("OUTPUT", hp, table="nat", match=local)

    async def remove_network(self, *, bridge: str) -> None:
        for table, builtin, chain in (
            ("filter", "FORWARD", forward_chain(bridge)),
            ("nat", "POSTROUTING", postrouting_chain(bridge)),
            ("nat", "PREROUTING", hostport_chain(bridge)),
            ("nat", "OUTPUT", hostport_chain(bridge)),
        ):
            await self.delete_jumps(builtin, chain, table=table)
        pods = [
            rule[rule.index("-j") + 1]
            for rule in await self.rules(hostport_chain(bridge), table="nat")
            if "-j" in rule and rule[rule.index("-j") + 1].startswith("AKLP-")
        ]
        await self._quiet("-F", hostport_chain(bridge), table="nat")
        for chain in pods:
            await self.delete_chain(chain, table="nat")
        for table, chain in (
            ("filter", forward_chain(bridge)),
            ("nat", postrouting_chain(bridge)),
            ("nat", hostport_chain(bridge)),
        ):
            await self.delete_chain(chain, table=table)

    # -- one pod ---------------------------------------------------------------------------

    async def restore(self, text: str) -> bool:
        """Apply ``iptables-restore --noflush`` input as one transaction; False if refused."""
        binary = self.binary + "-restore"
        try:
            proc = await anyio.run_process(
                [binary, "-w", "5", "--noflush"], input=text.encode(), check=False
            )
        except OSError:
            return False
        return proc.returncode == 0

    async def add_hostports(self, *, bridge: str, sandbox_id: str, maps: Sequence[DNAT]) -> None:
        """The pod's DNAT chain and the jump to it, in one ``iptables-restore``."""
        if not maps:
            return
        chain = pod_chain(checked_sandbox_id(sandbox_id))
        rules = []
        for m in maps:
            rule = ["-p", m.protocol.lower(), "--dport", str(m.host_port)]
            if m.host_ip and m.host_ip not in ("0.0.0.0", "::"):  # noqa: S104  (compares a hostIP with the wildcard; binds nothing)
                rule = ["-d", m.host_ip, *rule]
            rule += ["-j", "DNAT", "--to-destination", m.destination()]
            rules.append(rule)
        await self.delete_jumps(hostport_chain(bridge), chain, table="nat")
        lines = ["*nat", f":{chain} - [0:0]"]
        lines += [shlex.join(["-A", chain, *rule]) for rule in rules]
        lines += [shlex.join(["-A", hostport_chain(bridge), "-j", chain]), "COMMIT", ""]
        if await self.restore("\n".join(lines)):
            return
        await self.ensure_chain(chain, table="nat")
        await self.run("-F", chain, table="nat")
        for rule in rules:
            await self.run("-A", chain, *rule, table="nat")
        await self.ensure_rule(hostport_chain(bridge), ["-j", chain], table="nat")

    async def remove_hostports(self, *, bridge: str, sandbox_id: str) -> None:
        """Remove the pod's jump and chain: one ``iptables-restore`` when both are there as
        made, else rule by rule (a half-made or half-removed state)."""
        chain = pod_chain(sandbox_id)
        fast = "\n".join(
            [
                "*nat",
                shlex.join(["-D", hostport_chain(bridge), "-j", chain]),
                f":{chain} - [0:0]",
                f"-X {chain}",
                "COMMIT",
                "",
            ]
        )
        if await self.restore(fast):
            return
        await self.delete_jumps(hostport_chain(bridge), chain, table="nat")
        await self.delete_chain(chain, table="nat")


__all__ = [
    "DNAT",
    "IPTables",
    "checked_sandbox_id",
    "forward_chain",
    "hostport_chain",
    "pod_chain",
    "postrouting_chain",
]
