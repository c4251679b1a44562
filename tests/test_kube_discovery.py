"""Discovery answers from one table: the aggregated form for kubectl's Accept header, the
legacy form otherwise, each kind the node keeps listed with the verbs it serves."""

from __future__ import annotations

import re

import pytest

from asynckubelet.api.kube import discovery
from asynckubelet.kubectl.resources import RESOURCES

KUBECTL_1_33 = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


@pytest.mark.parametrize(
    ("accept", "aggregated"),
    [
        (KUBECTL_1_33, True),
        ("application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", True),
        ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", False),
        ("application/json", False),
        ("", False),
    ],
)
def test_aggregated_discovery_is_served_only_to_a_client_that_takes_v2(
    accept: str, aggregated: bool
) -> None:
    assert discovery.wants_aggregated(accept) is aggregated


def test_every_kind_the_node_keeps_is_discovered() -> None:
    served = {(s.group, s.name) for s in discovery.SERVED}
    assert {(r.group, r.plural) for r in RESOURCES} <= served


def test_both_forms_list_the_same_resources_and_verbs() -> None:
    both = [*discovery.aggregated(core=True)["items"], *discovery.aggregated(core=False)["items"]]
    for item in both:
        group = item["metadata"].get("name", "")
        version = item["versions"][0]["version"]
        legacy = discovery.resource_list(f"{group}/{version}" if group else version)
        assert legacy is not None
        flat = {r["name"]: r["verbs"] for r in legacy["resources"]}
        for resource in item["versions"][0]["resources"]:
            assert flat[resource["resource"]] == resource["verbs"]
            for sub in resource.get("subresources", []):
                assert flat[f"{resource['resource']}/{sub['subresource']}"] == sub["verbs"]


def test_every_kind_is_watched_and_what_the_node_makes_is_not_written() -> None:
    verbs = {(s.group, s.name): s.verbs for s in discovery.SERVED if s.group != discovery.METRICS}
    made = [
        ("", "endpoints"),
        ("", "events"),
        ("", "nodes"),
        ("discovery.k8s.io", "endpointslices"),
        ("events.k8s.io", "events"),
    ]
    for key in made:
        assert verbs.pop(key) == ("get", "list", "watch")
    assert set(verbs.values()) == {("get", "list", "watch", *discovery.WRITE)}


def test_the_version_is_semantic_with_this_build_as_metadata() -> None:
    info = discovery.version_info()
    assert re.fullmatch(r"v1\.\d+\.\d+\+asynckubelet\.[0-9A-Za-z.-]+", info["gitVersion"])
    assert info["gitVersion"].startswith(f"v{info['major']}.{info['minor']}.")
