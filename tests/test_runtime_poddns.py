"""resolv.conf and /etc/hosts content per dnsPolicy, dnsConfig, hostname and hostAliases."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from lightkube.models.core_v1 import (
    Container,
    HostAlias,
    Pod,
    PodDNSConfig,
    PodDNSConfigOption,
    PodSpec,
)
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet import errors
from asynckubelet.runtime.poddns import (
    DNSSettings,
    ResolverConfig,
    engine_dns,
    managed_hosts,
    parse_resolv_conf,
    pod_dns,
    pod_files,
    sandbox_hostname,
)

HOST = ResolverConfig(
    nameservers=("127.0.0.53", "192.0.2.53", "::1"),
    searches=("corp.example",),
    options=("edns0", "ndots:1"),
)
CLUSTER = DNSSettings(cluster_dns=("10.96.0.10",), cluster_domain="cluster.local")
NO_CLUSTER = DNSSettings()


def make_pod(
    *,
    policy: str | None = "ClusterFirst",
    host_network: bool = False,
    dns_config: PodDNSConfig | None = None,
    hostname: str | None = None,
    subdomain: str | None = None,
    aliases: list[HostAlias] | None = None,
    name: str = "web",
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="shop", uid="uid-1"),
        spec=PodSpec(
            containers=[Container(name="c", image="busybox")],
            dnsPolicy=policy,
            hostNetwork=host_network,
            dnsConfig=dns_config,
            hostname=hostname,
            subdomain=subdomain,
            hostAliases=aliases,
        ),
    )


@dataclass(frozen=True)
class Case:
    name: str
    pod: Pod
    settings: DNSSettings
    want: ResolverConfig


CASES = [
    Case(
        "cluster first uses the cluster DNS, the cluster searches first and ndots 5",
        make_pod(),
        CLUSTER,
        ResolverConfig(
            ("10.96.0.10",),
            ("shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"),
            ("ndots:5",),
        ),
    ),
    Case(
        "cluster first without cluster DNS falls back to the host minus loopback servers",
        make_pod(),
        NO_CLUSTER,
        ResolverConfig(("192.0.2.53",), ("corp.example",), ("edns0", "ndots:1")),
    ),
    Case(
        "default uses the host's resolver minus loopback servers",
        make_pod(policy="Default"),
        CLUSTER,
        ResolverConfig(("192.0.2.53",), ("corp.example",), ("edns0", "ndots:1")),
    ),
    Case(
        "cluster first on the host network is default",
        make_pod(host_network=True),
        CLUSTER,
        ResolverConfig(("192.0.2.53",), ("corp.example",), ("edns0", "ndots:1")),
    ),
    Case(
        "cluster first with host net on the host network uses the cluster DNS",
        make_pod(policy="ClusterFirstWithHostNet", host_network=True),
        CLUSTER,
        ResolverConfig(
            ("10.96.0.10",),
            ("shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"),
            ("ndots:5",),
        ),
    ),
    Case(
        "none with dns config is exactly the dns config",
        make_pod(
            policy="None",
            dns_config=PodDNSConfig(
                nameservers=["1.1.1.1"],
                searches=["a.example"],
                options=[PodDNSConfigOption(name="ndots", value="2"), PodDNSConfigOption("rotate")],
            ),
        ),
        CLUSTER,
        ResolverConfig(("1.1.1.1",), ("a.example",), ("ndots:2", "rotate")),
    ),
    Case(
        "dns config is appended without duplicates and its options override",
        make_pod(
            dns_config=PodDNSConfig(
                nameservers=["10.96.0.10", "9.9.9.9"],
                searches=["cluster.local", "b.example"],
                options=[PodDNSConfigOption(name="ndots", value="3")],
            ),
        ),
        CLUSTER,
        ResolverConfig(
            ("10.96.0.10", "9.9.9.9"),
            (
                "shop.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "corp.example",
                "b.example",
            ),
            ("ndots:3",),
        ),
    ),
    Case(
        "more than three nameservers are cut to three",
        make_pod(
            policy="None",
            dns_config=PodDNSConfig(nameservers=["1.0.0.1", "1.0.0.2", "1.0.0.3", "1.0.0.4"]),
        ),
        CLUSTER,
        ResolverConfig(("1.0.0.1", "1.0.0.2", "1.0.0.3"), (), ()),
    ),
    Case(
        "more than thirty-two search paths are cut to thirty-two",
        make_pod(
            policy="None",
            dns_config=PodDNSConfig(searches=[f"d{i}.example" for i in range(40)]),
        ),
        CLUSTER,
        ResolverConfig((), tuple(f"d{i}.example" for i in range(32)), ()),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_pod_dns_follows_the_kubelets_rules(case: Case) -> None:
    got, _ = pod_dns(case.pod, settings=case.settings, host=HOST)
    assert got == case.want


def test_cluster_first_without_cluster_dns_records_missing_cluster_dns() -> None:
    _, events = pod_dns(make_pod(), settings=NO_CLUSTER, host=HOST)
    assert [(e.type, e.reason, e.message) for e in events] == [
        (
            "Warning",
            "MissingClusterDNS",
            'pod: "web_shop(uid-1)". kubelet does not have ClusterDNS IP configured and '
            'cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.',
        )
    ]


def test_cut_nameservers_record_a_dns_config_forming_warning() -> None:
    pod = make_pod(
        policy="None",
        dns_config=PodDNSConfig(nameservers=["1.0.0.1", "1.0.0.2", "1.0.0.3", "1.0.0.4"]),
    )
    _, events = pod_dns(pod, settings=CLUSTER, host=HOST)
    assert [(e.reason, e.message) for e in events] == [
        (
            "DNSConfigForming",
            "Nameserver limits were exceeded, some nameservers have been omitted, "
            "the applied nameserver line is: 1.0.0.1 1.0.0.2 1.0.0.3",
        )
    ]


def test_a_search_line_longer_than_2048_characters_loses_its_last_paths() -> None:
    long = [("x" * 60) + f".d{i:02d}.example" for i in range(31)]
    pod = make_pod(policy="None", dns_config=PodDNSConfig(searches=long))
    got, events = pod_dns(pod, settings=CLUSTER, host=HOST)
    assert len(" ".join(got.searches)) <= 2048
    assert got.searches == tuple(long[: len(got.searches)])
    assert len(got.searches) < 31
    assert events[0].reason == "DNSConfigForming"


def test_default_without_a_resolver_file_resolves_through_localhost() -> None:
    got, _ = pod_dns(make_pod(policy="Default"), settings=DNSSettings(resolv_conf=""), host=HOST)
    assert got.nameservers == ("127.0.0.1",)
    assert got.searches == (".",)


def test_parse_resolv_conf_accumulates_servers_and_keeps_the_last_search_and_options() -> None:
    text = (
        "# comment\nnameserver 1.1.1.1\nsearch a.example. b.example\noptions rotate\n"
        "nameserver 8.8.8.8\nsearch c.example\noptions ndots:2 edns0\n"
    )
    assert parse_resolv_conf(text) == ResolverConfig(
        ("1.1.1.1", "8.8.8.8"), ("c.example",), ("ndots:2", "edns0")
    )


def test_resolv_conf_renders_servers_then_search_then_options() -> None:
    text = ResolverConfig(("10.96.0.10",), ("a", "b"), ("ndots:5",)).render()
    assert text == "nameserver 10.96.0.10\nsearch a b\noptions ndots:5\n"


HEADER = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)


def test_the_hosts_file_maps_the_pod_ip_to_the_hostname() -> None:
    text = managed_hosts(make_pod(), pod_ips=["10.1.0.5"], cluster_domain="cluster.local")
    assert text == HEADER + "10.1.0.5\tweb\n"


def test_the_hosts_file_gives_the_fqdn_first_when_a_subdomain_is_set() -> None:
    pod = make_pod(hostname="db-0", subdomain="db")
    text = managed_hosts(pod, pod_ips=["10.1.0.5"], cluster_domain="cluster.local")
    assert text == HEADER + "10.1.0.5\tdb-0.db.shop.svc.cluster.local\tdb-0\n"


def test_host_aliases_are_appended_one_line_per_ip() -> None:
    pod = make_pod(
        aliases=[
            HostAlias(ip="127.0.0.1", hostnames=["foo.local", "bar.local"]),
            HostAlias(ip="10.1.2.3", hostnames=["baz"]),
        ]
    )
    text = managed_hosts(pod, pod_ips=["10.1.0.5"], cluster_domain="cluster.local")
    assert text == HEADER + (
        "10.1.0.5\tweb\n\n# Entries added by HostAliases.\n"
        "127.0.0.1\tfoo.local\tbar.local\n10.1.2.3\tbaz\n"
    )


def test_a_host_network_pod_gets_the_nodes_hosts_file_plus_its_aliases() -> None:
    pod = make_pod(host_network=True, aliases=[HostAlias(ip="10.1.2.3", hostnames=["baz"])])
    files = pod_files(
        pod,
        settings=CLUSTER,
        pod_ips=["192.0.2.2"],
        host_resolv_text="nameserver 192.0.2.53\n",
        node_hosts_text="127.0.0.1 localhost\n",
    )
    assert files.hosts == "127.0.0.1 localhost\n\n# Entries added by HostAliases.\n10.1.2.3\tbaz\n"


def test_without_a_pod_ip_the_hosts_file_is_left_to_docker() -> None:
    files = pod_files(
        make_pod(), settings=CLUSTER, pod_ips=[], host_resolv_text="", node_hosts_text=""
    )
    assert files.hosts is None


def test_a_long_pod_name_is_cut_to_63_characters_without_a_trailing_dash() -> None:
    name = "a" * 62 + "-b"
    text = managed_hosts(make_pod(name=name), pod_ips=["10.1.0.5"], cluster_domain="c")
    assert text.endswith("10.1.0.5\t" + "a" * 62 + "\n")


def test_set_hostname_as_fqdn_gives_hostname_dot_subdomain_domain() -> None:
    pod = make_pod(hostname="db-0", subdomain="db")
    assert pod.spec is not None
    pod.spec.setHostnameAsFQDN = True
    assert sandbox_hostname(pod, cluster_domain="cluster.local") == "db-0.db.shop.svc.cluster.local"


def test_without_set_hostname_as_fqdn_the_hostname_is_left_alone() -> None:
    assert sandbox_hostname(make_pod(hostname="db-0", subdomain="db"), cluster_domain="c") is None


def test_an_fqdn_longer_than_64_characters_is_refused_with_the_kubelets_message() -> None:
    pod = make_pod(hostname="h" * 40, subdomain="s" * 20)
    assert pod.spec is not None
    pod.spec.setHostnameAsFQDN = True
    with pytest.raises(
        errors.SandboxError, match=r"FQDN .* is too long \(64 characters is the max, "
    ):
        sandbox_hostname(pod, cluster_domain="cluster.local")


@pytest.mark.parametrize(
    ("name", "pod", "resolver", "want"),
    [
        (
            "every resolver setting becomes its Docker key",
            make_pod(),
            ResolverConfig(("10.96.0.10",), ("shop.svc.cluster.local",), ("ndots:5",)),
            {
                "Dns": ["10.96.0.10"],
                "DnsSearch": ["shop.svc.cluster.local"],
                "DnsOptions": ["ndots:5"],
            },
        ),
        ("an empty resolver sets no key", make_pod(), ResolverConfig(), {}),
        (
            "each host alias name becomes one name:ip entry",
            make_pod(aliases=[HostAlias(ip="192.0.2.7", hostnames=["a.local", "b.local"])]),
            ResolverConfig(),
            {"ExtraHosts": ["a.local:192.0.2.7", "b.local:192.0.2.7"]},
        ),
    ],
)
def test_a_remote_engine_gets_the_pods_resolver_and_aliases_as_host_config_keys(
    name: str, pod: Pod, resolver: ResolverConfig, want: dict[str, list[str]]
) -> None:
    assert engine_dns(pod, resolver=resolver) == want
