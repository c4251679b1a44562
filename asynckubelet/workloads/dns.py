"""The node's cluster DNS: the names a cluster's CoreDNS gives, answered by the agent.

Pods with ``dnsPolicy: ClusterFirst`` get this server as their nameserver, with the
kubelet's search path (``<ns>.svc.<domain> svc.<domain> <domain>``) and ``ndots:5``, so a
client pod reaches ``web``, ``web.default`` and ``web.default.svc.cluster.local`` exactly
as on a cluster. The records follow the Kubernetes DNS specification as CoreDNS's
``kubernetes`` plugin serves it:

- ``<svc>.<ns>.svc.<domain>``: A, the ClusterIP; for a headless Service, the ready
  endpoints' IPs; CNAME for an ExternalName Service;
- ``<hostname>.<svc>.<ns>.svc.<domain>`` for endpoints whose pod sets ``hostname`` and
  ``subdomain: <svc>`` (else ``<ip-dashed>.<svc>...``), for headless Services;
- ``_<port>._<proto>.<svc>.<ns>.svc.<domain>``: SRV of each named port;
- ``<ip-dashed>.<ns>.pod.<domain>``: A, the address written in the name (CoreDNS's
  ``pods insecure``, the default of a kubeadm cluster);
- PTR for ClusterIPs and named endpoints; SOA at the apex, and in the authority section of
  NXDOMAIN and empty answers.

Everything outside the cluster domain (and reverse names it does not know) is forwarded to
the node's own resolvers and to nothing else; with none configured the answer is
SERVFAIL.

It serves the pods and the node, and nobody else (:func:`client_allowed`): a query from
the pod network (the pod CIDRs, both families) or from one of the node's own addresses
(loopback, its interface addresses) is answered; any other source gets REFUSED whatever
it asks, cluster names included. A node on a laptop or a shared network is then no open
resolver, and does not tell its Services' names and addresses to its neighbours
(CoreDNS's ``acl`` plugin; a cluster's DNS sits behind the pod network). The node's own
queries get recursion as the pods' do: a ``hostNetwork`` pod with
``ClusterFirstWithHostNet`` has this server as its only nameserver and asks from the
node's addresses (the gateway address, which the bridge's masquerade rule rewrites to the
node's own), so it cannot be told from the node; and a process of the node gains nothing
from recursion here that it cannot get from the node's resolvers directly.

Messages are parsed and built with dnspython: no wire format is written here.
The server listens on UDP and TCP on one address (the pod network's gateway on the
``bridge`` backend), with bounded concurrency: a flood of queries waits or is refused,
never grows memory without bound. Cluster names are answered as each UDP query is read,
never behind forwarded ones: a node resolver that does not answer holds each forwarded
query for the whole ``forward_timeout``, and a client's search path sends several such
names per lookup; were cluster names to wait for a slot among them, they would go
unanswered while the forwards hang, and the pods' lookups of Services would time out.
Forwarded queries beyond :data:`MAX_FORWARDS` get REFUSED at once (CoreDNS's
``forward`` plugin with ``max_concurrent``). UDP answers are written straight to the
non-blocking socket and dropped when it cannot take them (the client asks again): a send
waiting for room could stall every later answer behind it. A TCP client gets
``tcp_idle`` (10 s) to send each whole query and to take each answer, and beyond 256 open
connections a new one is closed at once: clients that hold theirs never pile up
descriptors.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.abc
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from lightkube.models.core_v1 import Service

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.manifests.service import HEADLESS
from asynckubelet.workloads.services import ServiceEndpoints

DEFAULT_TTL = 5
"""Seconds a cluster answer may be cached (CoreDNS's ``kubernetes`` plugin default)."""
MAX_UDP = 512
MAX_INFLIGHT = 256
"""TCP connections open at once; more are closed at once."""
MAX_FORWARDS = 64
"""Queries forwarded at once; more get REFUSED."""
TCP_IDLE = 10.0
"""Seconds a TCP connection may take to send a whole query (from accept, or from the
previous answer) and the server to send an answer."""
ACCEPT_RETRY_DELAY = 1.0
"""Seconds accepting pauses when the process is out of descriptors."""
ANY_PORT_ATTEMPTS = 20
"""Free UDP ports tried, with port 0, for one whose number is free for TCP too."""
_SOA_TIMES = (7200, 1800, 86400)


@dataclass(frozen=True, kw_only=True)
class DNSConfig:
    cluster_domain: str = "cluster.local"
    upstreams: tuple[tuple[str, int], ...] = ()
    """Where names outside the cluster go: ``(address, port)`` (the node's resolvers)."""
    ttl: int = DEFAULT_TTL
    forward_timeout: float = 2.0
    tcp_idle: float = TCP_IDLE
    max_tcp_connections: int = MAX_INFLIGHT
    pod_networks: tuple[str, ...] = ()
    """The pod CIDRs (IPv4 and IPv6): the clients the server answers besides the node."""


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_allowed(
    client: str,
    *,
    pod_networks: Sequence[IPNetwork],
    is_node_address: Callable[[IPAddress], bool],
) -> bool:
    """Whether the client at ``client`` (the address the socket tells) is answered: one
    in the pod networks, or one of the node's own addresses (``is_node_address``)."""
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address.scope_id is not None:
            address = ipaddress.IPv6Address(str(address).split("%", 1)[0])
    if any(address in network for network in pod_networks if network.version == address.version):
        return True
    return is_node_address(address)


def is_node_address(address: IPAddress) -> bool:
    """Whether ``address`` is one of this host's own: loopback, or an address the kernel
    picks as the source of a route to itself, which it does only when the route is a local
    one (a UDP socket's ``connect`` sends nothing). A secondary address whose local route
    names its primary one reads as not the node's: never the other way round."""
    if address.is_loopback:
        return True
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((str(address), 53))
            chosen = ipaddress.ip_address(str(probe.getsockname()[0]).split("%", 1)[0])
        except (OSError, ValueError):
            return False
    return chosen == address


def upstreams_from_resolv_conf(text: str) -> tuple[tuple[str, int], ...]:
    """The nameservers of a resolv.conf, on port 53 (the node's own loopback resolver
    included: this process runs on the node)."""
    found: list[tuple[str, int]] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                ipaddress.ip_address(words[1])
            except ValueError:
                continue
            found.append((words[1], 53))
    return tuple(dict.fromkeys(found))


def _dashed(ip: str) -> str:
    return ip.replace(".", "-").replace(":", "-")


@dataclass
class ClusterZone:
    """Every cluster name and its records, built from the Services and endpoints."""

    domain: dns.name.Name
    ttl: int
    records: dict[tuple[dns.name.Name, dns.rdatatype.RdataType], list[dns.rdata.Rdata]] = field(
        default_factory=dict
    )
    names: set[dns.name.Name] = field(default_factory=set)
    reverse: set[dns.name.Name] = field(default_factory=set)

    @classmethod
    def build(
        cls,
        *,
        domain: str,
        services: Iterable[Service],
        endpoints: Mapping[tuple[str, str], ServiceEndpoints],
        ttl: int = DEFAULT_TTL,
    ) -> ClusterZone:
        zone = cls(domain=dns.name.from_text(domain), ttl=ttl)
        for svc in services:
            zone._add_service(svc, endpoints)
        return zone

    def _add(self, name: dns.name.Name, rdtype: dns.rdatatype.RdataType, text: str) -> None:
        rdata = dns.rdata.from_text(dns.rdataclass.IN, rdtype, text)
        self.records.setdefault((name, rdtype), []).append(rdata)
        for ancestor in _ancestors(name, self.domain):
            self.names.add(ancestor)

    def _ptr(self, ip: str, target: dns.name.Name) -> None:
        name = dns.name.from_text(ipaddress.ip_address(ip).reverse_pointer)
        self.records.setdefault((name, dns.rdatatype.PTR), []).append(
            dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.PTR, target.to_text())
        )
        self.reverse.add(name)

    def _add_service(
        self, svc: Service, endpoints: Mapping[tuple[str, str], ServiceEndpoints]
    ) -> None:
        meta, spec = svc.metadata, svc.spec
        if meta is None or spec is None or not meta.name:
            return
        ns = meta.namespace or "default"
        base = dns.name.from_text(f"{meta.name}.{ns}.svc", origin=self.domain)
        if spec.type == "ExternalName":
            if spec.externalName:
                self._add(base, dns.rdatatype.CNAME, spec.externalName.rstrip(".") + ".")
            return
        eps = endpoints.get((ns, meta.name))
        ready = eps.ready if eps is not None else ()
        if spec.clusterIP == HEADLESS:
            weight = max(1, 100 // max(1, len(ready)))
            for e in ready:
                host = dns.name.from_text(e.hostname or _dashed(e.ip), origin=base)
                self._add(base, _a_type(e.ip), e.ip)
                self._add(host, _a_type(e.ip), e.ip)
                if e.hostname:
                    self._ptr(e.ip, host)
                for p in e.ports:
                    if p.name:
                        srv = dns.name.from_text(f"_{p.name}._{p.protocol.lower()}", origin=base)
                        self._add(srv, dns.rdatatype.SRV, f"0 {weight} {p.port} {host}")
            self.names.add(base)
            return
        if not spec.clusterIP:
            return
        self._add(base, _a_type(spec.clusterIP), spec.clusterIP)
        self._ptr(spec.clusterIP, base)
        for port in spec.ports or []:
            if port.name:
                srv = dns.name.from_text(
                    f"_{port.name}._{(port.protocol or 'TCP').lower()}", origin=base
                )
                self._add(srv, dns.rdatatype.SRV, f"0 100 {port.port} {base}")

    def soa(self) -> dns.rrset.RRset:
        apex = self.domain
        text = (
            f"ns.dns.{apex} hostmaster.{apex} 1 "
            + " ".join(str(t) for t in _SOA_TIMES)
            + f" {self.ttl}"
        )
        return dns.rrset.from_text(apex, self.ttl, dns.rdataclass.IN, dns.rdatatype.SOA, text)

    def answers(self, qname: dns.name.Name) -> bool:
        """Whether this zone is the authority for ``qname`` (else it is forwarded)."""
        return qname.is_subdomain(self.domain) or qname in self.reverse

    def resolve(self, query: dns.message.Message) -> dns.message.Message:
        """The answer to a query for a name :meth:`answers`."""
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        question = query.question[0]
        qname, qtype = question.name, question.rdtype
        if qname == self.domain and qtype in (dns.rdatatype.SOA, dns.rdatatype.ANY):
            response.answer.append(self.soa())
            return response
        found = self._lookup(qname, qtype)
        if found is None:
            pod = self._pod_address(qname)
            if pod is not None and qtype in (_a_type(pod), dns.rdatatype.ANY):
                found = [dns.rdata.from_text(dns.rdataclass.IN, _a_type(pod), pod)]
            elif pod is not None:
                found = []
        if found:
            rrset = dns.rrset.RRset(qname, dns.rdataclass.IN, found[0].rdtype)
            for rdata in found:
                rrset.add(rdata, self.ttl)
            response.answer.append(rrset)
            return response
        cname = self.records.get((qname, dns.rdatatype.CNAME))
        if cname:
            response.answer.append(dns.rrset.from_rdata_list(qname, self.ttl, cname))
            return response
        exists = found is not None or qname in self.names or qname == self.domain
        if not exists:
            response.set_rcode(dns.rcode.NXDOMAIN)
        response.authority.append(self.soa())
        return response

    def _lookup(
        self, qname: dns.name.Name, qtype: dns.rdatatype.RdataType
    ) -> list[dns.rdata.Rdata] | None:
        if qtype == dns.rdatatype.ANY:
            found = [r for (n, _), rs in self.records.items() if n == qname for r in rs]
            return found or None
        return self.records.get((qname, qtype))

    def _pod_address(self, qname: dns.name.Name) -> str | None:
        """``<ip-dashed>.<ns>.pod.<domain>``'s address, when the name is one."""
        try:
            relative = qname.relativize(self.domain)
        except dns.name.NoParent:
            return None
        labels = [label.decode("ascii", "replace") for label in relative.labels]
        if len(labels) != 3 or labels[2] != "pod":
            return None
        text = labels[0].replace("-", ".")
        try:
            address = ipaddress.IPv4Address(text)
        except ValueError:
            return None
        return str(address)


def _a_type(ip: str) -> dns.rdatatype.RdataType:
    return dns.rdatatype.AAAA if ":" in ip else dns.rdatatype.A


def _ancestors(name: dns.name.Name, apex: dns.name.Name) -> Iterable[dns.name.Name]:
    while name != apex and len(name.labels) > len(apex.labels):
        yield name
        name = name.parent()


class ClusterDNS:
    """The server: answers from :class:`ClusterZone`, forwards the rest upstream.

    ``zone`` gives the current zone (rebuilt by the caller when Services or endpoints
    change); the server never blocks on it. ``is_node_address`` tells the node's own
    addresses (:func:`client_allowed`)."""

    def __init__(
        self,
        *,
        config: DNSConfig,
        zone: Callable[[], ClusterZone],
        is_node_address: Callable[[IPAddress], bool] = is_node_address,
    ) -> None:
        self.config = config
        self.zone = zone
        self.pod_networks = tuple(
            ipaddress.ip_network(cidr, strict=False) for cidr in config.pod_networks
        )
        self.is_node_address = is_node_address
        self._limit = anyio.CapacityLimiter(config.max_tcp_connections)
        self._forwards = anyio.CapacityLimiter(MAX_FORWARDS)
        self.queries = 0
        self.forwarded = 0
        self.refused = 0
        """Queries refused for who sent them."""

    def allowed(self, client: str) -> bool:
        """Whether the client at address ``client`` is answered (:func:`client_allowed`)."""
        return client_allowed(
            client, pod_networks=self.pod_networks, is_node_address=self.is_node_address
        )

    async def answer(self, wire: bytes, *, tcp: bool, allowed: bool) -> bytes | None:
        """The response to one message (None: not a query worth an answer); REFUSED when
        its client is not ``allowed``."""
        local = self.answer_locally(wire, tcp=tcp, allowed=allowed)
        if isinstance(local, dns.message.Message):
            return await self.forward(local, tcp=tcp)
        return local

    def answer_locally(
        self, wire: bytes, *, tcp: bool, allowed: bool
    ) -> bytes | dns.message.Message | None:
        """The response to one message when this server has it without waiting, REFUSED
        when its client is not ``allowed``; the parsed query when it must be forwarded
        (None: not a query worth an answer)."""
        try:
            query = dns.message.from_wire(wire)
        except (dns.exception.DNSException, ValueError):
            return None
        if query.flags & dns.flags.QR:
            return None
        self.queries += 1
        if not allowed:
            self.refused += 1
            return _status(query, dns.rcode.REFUSED, tcp=tcp)
        if query.opcode() != dns.opcode.QUERY:
            return _status(query, dns.rcode.NOTIMP, tcp=tcp)
        if len(query.question) != 1:
            return _status(query, dns.rcode.FORMERR, tcp=tcp)
        question = query.question[0]
        if question.rdclass != dns.rdataclass.IN:
            return _status(query, dns.rcode.REFUSED, tcp=tcp)
        zone = self.zone()
        if zone.answers(question.name):
            return _wire(zone.resolve(query), query, tcp=tcp)
        return query

    async def forward(self, query: dns.message.Message, *, tcp: bool) -> bytes:
        """The node's resolvers' response to ``query``; REFUSED at once while
        :data:`MAX_FORWARDS` others wait for theirs."""
        if self._forwards.borrowed_tokens >= self._forwards.total_tokens:
            return _status(query, dns.rcode.REFUSED, tcp=tcp)
        async with self._forwards:
            return await self._forward(query, tcp=tcp)

    async def _forward(self, query: dns.message.Message, *, tcp: bool) -> bytes:
        # Imported on the first forward: dnspython's query module loads its DNS-over-HTTPS
        # client (httpx) with it, several MB that a node whose pods ask only cluster names
        # never needs.
        import dns.asyncquery

        self.forwarded += 1
        for address, port in self.config.upstreams:
            try:
                if tcp:
                    response = await dns.asyncquery.tcp(
                        query, address, port=port, timeout=self.config.forward_timeout
                    )
                else:
                    response = await dns.asyncquery.udp(
                        query,
                        address,
                        port=port,
                        timeout=self.config.forward_timeout,
                        ignore_trailing=True,
                    )
            except (dns.exception.DNSException, OSError) as e:
                logger.debug("dns: upstream {}:{} failed: {}", address, port, type(e).__name__)
                continue
            response.id = query.id
            return _wire(response, query, tcp=tcp)
        return _status(query, dns.rcode.SERVFAIL, tcp=tcp)

    async def serve(
        self,
        *,
        host: str,
        port: int = 53,
        task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve UDP and TCP on ``host:port`` until cancelled; reports the bound port
        (``port`` 0: any free one, the same for both)."""
        # A free UDP port may be taken for TCP: with port 0, another free one is tried.
        for attempt in range(ANY_PORT_ATTEMPTS if port == 0 else 1):
            try:
                udp_sock = _bound_socket(host, port, socket.SOCK_DGRAM)
            except OSError as e:
                raise _listen_error(host, port, "udp", e) from e
            bound = int(udp_sock.getsockname()[1])
            try:
                tcp_sock = _bound_socket(host, bound, socket.SOCK_STREAM)
                tcp_sock.listen(128)
                break
            except OSError as e:
                udp_sock.close()
                if e.errno != errno.EADDRINUSE or attempt + 1 >= ANY_PORT_ATTEMPTS or port:
                    raise _listen_error(host, bound, "tcp", e) from e
        udp = await anyio.abc.UDPSocket.from_socket(udp_sock)
        tcp = await anyio.abc.SocketListener.from_socket(tcp_sock)
        async with udp, tcp, anyio.create_task_group() as tg:
            logger.info("cluster DNS on {}:{} (udp, tcp)", host, bound)
            tg.start_soon(self._serve_tcp, tcp, name="dns-tcp")
            task_status.started(bound)
            async for packet, (addr, cport) in udp:
                try:
                    reply = self.answer_locally(packet, tcp=False, allowed=self.allowed(addr))
                except Exception:
                    logger.exception("dns: a query failed")
                    continue
                if isinstance(reply, dns.message.Message):
                    tg.start_soon(self._udp_forward, udp_sock, reply, (addr, cport))
                elif reply is not None:
                    _send_udp(udp_sock, reply, (addr, cport))

    async def _udp_forward(
        self, sock: socket.socket, query: dns.message.Message, to: tuple[str, int]
    ) -> None:
        try:
            reply = await self.forward(query, tcp=False)
        except Exception:
            logger.exception("dns: a query failed")
            return
        _send_udp(sock, reply, to)

    async def _serve_tcp(self, listener: anyio.abc.SocketListener) -> None:
        """Accept until cancelled; a connection beyond the cap is closed at once, so that
        clients that hold theirs open never pile up descriptors."""
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as e:
                    if e.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        raise
                    logger.warning("dns: cannot accept a TCP connection: {}", e)
                    await anyio.sleep(ACCEPT_RETRY_DELAY)
                    continue
                try:
                    self._limit.acquire_on_behalf_of_nowait(stream)
                except anyio.WouldBlock:
                    await stream.aclose()
                    continue
                tg.start_soon(self._admitted, stream)

    async def _admitted(self, stream: anyio.abc.SocketStream) -> None:
        try:
            await self._tcp_connection(stream)
        finally:
            self._limit.release_on_behalf_of(stream)

    async def _tcp_connection(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            remote = stream.extra(anyio.abc.SocketAttribute.remote_address)  # noqa: S610  (anyio's typed attribute, not Django's)
            allowed = self.allowed(str(remote[0]) if isinstance(remote, tuple) else "")
            buffer = bytearray()
            try:
                while True:
                    with anyio.fail_after(self.config.tcp_idle):
                        while len(buffer) < 2 or len(buffer) < 2 + int.from_bytes(buffer[:2]):
                            buffer += await stream.receive()
                    size = int.from_bytes(buffer[:2])
                    message, buffer = bytes(buffer[2 : 2 + size]), buffer[2 + size :]
                    reply = await self.answer(message, tcp=True, allowed=allowed)
                    if reply is None:
                        return
                    with anyio.fail_after(self.config.tcp_idle):
                        await stream.send(len(reply).to_bytes(2) + reply)
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return


def _send_udp(sock: socket.socket, reply: bytes, to: tuple[str, int]) -> None:
    """One datagram on the non-blocking socket, or none when it cannot be sent now."""
    with contextlib.suppress(OSError):
        sock.sendto(reply, to)


_IP_FREEBIND = 15


def _listen_error(host: str, port: int, proto: str, e: OSError) -> errors.NetworkError:
    message = f"cluster DNS cannot listen on {host}:{port}/{proto}: {e}"
    if e.errno == errno.EADDRINUSE:
        message += (
            " (another node daemon on the same bridge answers there: give this one its own"
            " --bridge and --pod-cidr, or run it with --no-dns-server)"
        )
    return errors.NetworkError(message)


def _bound_socket(host: str, port: int, kind: socket.SocketKind) -> socket.socket:
    """A socket bound to ``host:port`` even before ``host`` is on an interface
    (``IP_FREEBIND``): a CNI bridge gets its gateway address with its first pod, and that
    pod already needs the server."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, kind)
    try:
        sock.setsockopt(socket.IPPROTO_IP, _IP_FREEBIND, 1)
        if kind == socket.SOCK_STREAM:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _limit(query: dns.message.Message, *, tcp: bool) -> int:
    if tcp:
        return 65535
    return max(MAX_UDP, query.payload if query.edns >= 0 else MAX_UDP)


def _wire(response: dns.message.Message, query: dns.message.Message, *, tcp: bool) -> bytes:
    try:
        return response.to_wire(max_size=_limit(query, tcp=tcp))
    except dns.exception.TooBig:
        cut = dns.message.make_response(query)
        cut.set_rcode(response.rcode())
        cut.flags |= dns.flags.TC | (response.flags & dns.flags.AA)
        return cut.to_wire()


def _status(query: dns.message.Message, rcode: dns.rcode.Rcode, *, tcp: bool) -> bytes:
    response = dns.message.make_response(query)
    response.set_rcode(rcode)
    return _wire(response, query, tcp=tcp)


def zone_source(
    *,
    domain: str,
    ttl: int,
    version: Callable[[], int],
    services: Callable[[], Sequence[Service]],
    endpoints: Callable[[], Mapping[tuple[str, str], ServiceEndpoints]],
) -> Callable[[], ClusterZone]:
    """A zone getter that rebuilds only when ``version()`` moved."""
    built: list[tuple[int, ClusterZone]] = []

    def current() -> ClusterZone:
        now = version()
        if not built or built[0][0] != now:
            zone = ClusterZone.build(
                domain=domain, services=services(), endpoints=endpoints(), ttl=ttl
            )
            built[:] = [(now, zone)]
        return built[0][1]

    return current


__all__ = [
    "ClusterDNS",
    "ClusterZone",
    "DNSConfig",
    "client_allowed",
    "is_node_address",
    "upstreams_from_resolv_conf",
    "zone_source",
]
