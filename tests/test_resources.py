"""The command line's light table of kubectl names says what the kinds table says."""

from __future__ import annotations

from asynckubelet.kubectl import resources
from asynckubelet.manifests import kinds


def test_every_kind_has_the_same_names_in_both_tables() -> None:
    light = {
        r.kind: (r.plural, r.singular, r.group, r.short_names, r.namespaced)
        for r in resources.RESOURCES
    }
    full = {
        k.kind: (k.plural, k.resource, k.group, k.short_names, k.namespaced)
        for k in kinds.KINDS.values()
    }
    assert light == full


def test_a_kubectl_name_finds_its_kind_in_either_table() -> None:
    for name in ("deploy", "deployments.apps", "Job", "sts", "po", "cm"):
        found = resources.lookup(name)
        assert found is not None
        assert kinds.kind_of_resource(name) == found.kind
    assert resources.lookup("deployments.batch") is None
