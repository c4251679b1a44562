"""The pod's DNS files from the node's own: what the runtime reads and hands on."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynckubelet.manifests import load_manifests_text
from asynckubelet.runtime.dnsfiles import pod_resolver
from asynckubelet.runtime.poddns import DNSSettings

# -- the resolver settings handed to plugins ------------------------------------------

DNS_POD = """
apiVersion: v1
kind: Pod
metadata: {name: d}
spec:
  dnsPolicy: POLICY
  dnsConfig:
    nameservers: [192.0.2.53]
    searches: [a.example]
    options: [{name: ndots, value: "2"}]
  containers: [{name: c, image: busybox}]
"""


@pytest.mark.anyio
async def test_the_resolver_settings_for_plugins_are_the_pods_resolv_conf(tmp_path: Path) -> None:
    pod = load_manifests_text(DNS_POD.replace("POLICY", "None"), node_name="n").pods[0]
    resolver = await pod_resolver(pod, settings=DNSSettings(resolv_conf=str(tmp_path / "none")))
    assert (resolver.nameservers, resolver.searches, resolver.options) == (
        ("192.0.2.53",),
        ("a.example",),
        ("ndots:2",),
    )


@pytest.mark.anyio
async def test_an_unreadable_node_resolver_file_gives_plugins_only_the_pods_own_settings(
    tmp_path: Path,
) -> None:
    pod = load_manifests_text(DNS_POD.replace("POLICY", "Default"), node_name="n").pods[0]
    resolver = await pod_resolver(pod, settings=DNSSettings(resolv_conf=str(tmp_path / "none")))
    assert resolver.nameservers == ("192.0.2.53",)
