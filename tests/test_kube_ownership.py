"""Server-side apply's field ownership as the API server keeps it: the ``FieldsV1``
encoding of field sets, an apply merged into the live object by ownership, conflicts
worded as the API server words them, ``force`` and the ``Update`` entries of other
writes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from asynckubelet.api.kube import fieldsets, ownership

NOW = "2026-01-02T03:04:05Z"


def deployment(replicas: int = 1, **env: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "app",
        "image": "busybox:1.35",
        "ports": [{"containerPort": 80}],
    }
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [container]},
            },
        },
    }


def apply(
    live: dict[str, Any] | None, config: dict[str, Any], manager: str = "kubectl", **kw: Any
) -> dict[str, Any]:
    body, entries = ownership.applied(
        live,
        config,
        kind=config["kind"],
        manager=manager,
        api_version=config["apiVersion"],
        now=NOW,
        force=kw.get("force", False),
    )
    body.setdefault("metadata", {})["managedFields"] = entries
    return body


def update(
    old: dict[str, Any] | None, new: dict[str, Any], manager: str, **kw: Any
) -> dict[str, Any]:
    new = copy.deepcopy(new)
    new["metadata"]["managedFields"] = ownership.updated(
        old, new, kind=new["kind"], manager=manager, api_version=new["apiVersion"], now=NOW, **kw
    )
    return new


def fields_of(body: dict[str, Any], manager: str) -> dict[str, Any]:
    found = [e for e in body["metadata"]["managedFields"] if e["manager"] == manager]
    assert len(found) == 1, body["metadata"]["managedFields"]
    fields: dict[str, Any] = found[0]["fieldsV1"]
    return fields


# -- the encoding -----------------------------------------------------------------------


def test_an_apply_owns_leaves_and_keyed_elements_in_upstreams_encoding() -> None:
    body = apply(None, deployment(FOO="1"))
    entry = body["metadata"]["managedFields"][0]
    assert {k: v for k, v in entry.items() if k != "fieldsV1"} == {
        "manager": "kubectl",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": NOW,
        "fieldsType": "FieldsV1",
    }
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"app"}': {
                            ".": {},
                            "f:env": {'k:{"name":"FOO"}': {".": {}, "f:name": {}, "f:value": {}}},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {
                                'k:{"containerPort":80,"protocol":"TCP"}': {
                                    ".": {},
                                    "f:containerPort": {},
                                }
                            },
                        }
                    }
                },
            },
        },
    }


def test_a_services_ports_are_keyed_by_port_and_protocol_and_finalizers_are_a_set() -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "finalizers": ["a/b"]},
        "spec": {"selector": {"app": "s"}, "ports": [{"port": 80, "protocol": "UDP"}]},
    }
    fields = fields_of(apply(None, service), "kubectl")
    assert fields == {
        "f:metadata": {"f:finalizers": {'v:"a/b"': {}}},
        "f:spec": {
            "f:ports": {
                'k:{"port":80,"protocol":"UDP"}': {".": {}, "f:port": {}, "f:protocol": {}}
            },
            "f:selector": {},
        },
    }


def test_encoding_and_decoding_round_trip() -> None:
    paths = fieldsets.applied_set(deployment(FOO="1"), "Deployment")
    assert fieldsets.decode(fieldsets.encode(paths)) == paths
    malformed = {"f:a": {".": {}, "f:b": {}}, "x:bad": {}, "f:c": "junk", 7: {}}
    assert fieldsets.decode(malformed) == {("f:a",), ("f:a", "f:b")}
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"f:x": deep or {".": {}}}
    assert fieldsets.decode(deep) == set()


def test_a_create_is_an_update_owning_the_maps_it_adds() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}}
    body = update(None, cm, "kubectl-create")
    entry = body["metadata"]["managedFields"][0]
    assert entry["operation"] == "Update"
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}


# -- merging ----------------------------------------------------------------------------


def test_a_field_no_longer_applied_is_removed_when_only_its_manager_owned_it() -> None:
    first = apply(None, deployment(FOO="1", BAR="2"))
    second = apply(first, deployment(FOO="1"))
    container = second["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "FOO", "value": "1"}]
    assert 'k:{"name":"BAR"}' not in str(fields_of(second, "kubectl"))


def test_a_field_another_manager_also_owns_is_kept() -> None:
    first = apply(None, deployment(FOO="1", BAR="2"))
    shared = apply(first, deployment(FOO="1", BAR="2"), manager="other")
    second = apply(shared, deployment(FOO="1"))
    env = second["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "FOO", "value": "1"}, {"name": "BAR", "value": "2"}]


def test_keyed_lists_merge_element_by_element() -> None:
    live = apply(None, deployment(FOO="1"))
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox:1.36"}]}}},
    }
    merged = apply(live, sidecar, manager="sidecar")
    names = [c["name"] for c in merged["spec"]["template"]["spec"]["containers"]]
    assert names == ["app", "side"]
    assert merged["spec"]["replicas"] == 1


# -- conflicts and force ----------------------------------------------------------------


def test_changing_a_field_another_manager_updated_is_a_conflict() -> None:
    live = apply(None, deployment(replicas=1))
    scaled = copy.deepcopy(live)
    scaled["spec"]["replicas"] = 3
    scaled = update(live, scaled, "kubectl-scale", subresource="scale")
    with pytest.raises(ownership.Conflicts) as caught:
        apply(scaled, deployment(replicas=2))
    assert caught.value.message() == (
        'Apply failed with 1 conflict: conflict with "kubectl-scale" with subresource "scale" '
        "using apps/v1: .spec.replicas"
    )
    assert caught.value.causes() == [
        {
            "type": "FieldManagerConflict",
            "message": 'conflict with "kubectl-scale" with subresource "scale" using apps/v1',
            "field": ".spec.replicas",
        }
    ]


def test_several_conflicts_are_listed_by_manager() -> None:
    live = apply(None, deployment(replicas=1, FOO="1"), manager="a")
    with pytest.raises(ownership.Conflicts) as caught:
        apply(live, deployment(replicas=2, FOO="2"), manager="b")
    assert caught.value.message() == (
        'Apply failed with 2 conflicts: conflicts with "a":\n- .spec.replicas\n'
        '- .spec.template.spec.containers[name="app"].env[name="FOO"].value'
    )


def test_the_same_value_is_shared_not_a_conflict() -> None:
    live = apply(None, deployment(replicas=1), manager="a")
    shared = apply(live, deployment(replicas=1), manager="b")
    assert "f:replicas" in fields_of(shared, "a")["f:spec"]
    assert "f:replicas" in fields_of(shared, "b")["f:spec"]


def test_force_takes_the_field_from_its_owner() -> None:
    live = apply(None, deployment(replicas=1, FOO="1"), manager="a")
    taken = apply(live, deployment(replicas=2, FOO="1"), manager="b", force=True)
    assert taken["spec"]["replicas"] == 2
    assert "f:replicas" not in fields_of(taken, "a")["f:spec"]
    assert "f:replicas" in fields_of(taken, "b")["f:spec"]
    assert "f:template" in fields_of(taken, "a")["f:spec"]


def test_an_update_takes_the_fields_it_changes_without_conflict() -> None:
    live = apply(None, deployment(replicas=1))
    changed = copy.deepcopy(live)
    changed["spec"]["replicas"] = 5
    after = update(live, changed, "kubectl-edit")
    assert "f:replicas" not in fields_of(after, "kubectl")["f:spec"]
    assert fields_of(after, "kubectl-edit") == {"f:spec": {"f:replicas": {}}}
    assert [e["operation"] for e in after["metadata"]["managedFields"]] == ["Apply", "Update"]


def test_a_manager_that_owns_nothing_more_is_dropped() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}}
    live = apply(None, cm, manager="a")
    changed = copy.deepcopy(live)
    changed["data"] = {"a": "2"}
    after = update(live, changed, "b")
    assert [e["manager"] for e in after["metadata"]["managedFields"]] == ["b"]


def test_the_default_manager_is_the_user_agents_first_word() -> None:
    assert ownership.manager_of({}, "kubectl/v1.32.0 (linux/amd64)") == "kubectl"
    assert ownership.manager_of({"fieldManager": "me"}, "kubectl/v1") == "me"
    assert ownership.manager_of({}, "a\x07b/1") == "ab"
    assert len(ownership.manager_of({}, "x" * 500)) == 128


def test_names_are_quoted_as_go_quotes_them() -> None:
    assert fieldsets.quoted('a"b\\c') == '"a\\"b\\\\c"'
    assert fieldsets.quoted("a\x07\x01\u200bé") == '"a\\a\\x01\\u200bé"'


def test_a_map_still_holding_applied_fields_is_not_removed() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}}
    live = apply(None, cm)
    live["metadata"]["managedFields"][0]["fieldsV1"] = {"f:data": {".": {}, "f:a": {}}}
    again = apply(live, cm)
    assert again["data"] == {"a": "1"}
    assert fields_of(again, "kubectl") == {"f:data": {"f:a": {}}}


def test_owners_a_write_sets_replace_reset_or_leave_the_live_ones() -> None:
    entry = {
        "manager": "m",
        "operation": "Apply",
        "apiVersion": "v1",
        "time": NOW,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:a": {}}},
    }
    assert ownership.requested({"metadata": {"managedFields": [entry]}}) == [entry]
    assert ownership.requested({"metadata": {"managedFields": []}}) == []
    assert ownership.requested({"metadata": {"managedFields": [{}]}}) == []
    assert ownership.requested({"metadata": {}}) is None
    assert (
        ownership.requested({"metadata": {"managedFields": [{**entry, "operation": "X"}]}}) is None
    )
    assert ownership.requested({"metadata": {"managedFields": [{**entry, "fieldsV1": {}}]}}) is None
    assert ownership.requested(["not", "an", "object"]) is None


def test_keys_and_values_are_compact_json_with_text_as_it_is() -> None:
    config = deployment(CAFÉ="1")
    config["metadata"]["finalizers"] = ["example.com/é"]
    paths = fieldsets.applied_set(config, "Deployment")
    assert ("f:metadata", "f:finalizers", 'v:"example.com/é"') in paths
    env = ("f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"app"}', "f:env")
    assert (*env, 'k:{"name":"CAFÉ"}') in paths
    assert fieldsets.shown((*env, 'k:{"name":"CAFÉ"}', "f:value")) == (
        '.spec.template.spec.containers[name="app"].env[name="CAFÉ"].value'
    )


def test_set_values_and_indexes_are_shown_as_upstream_prints_them() -> None:
    assert fieldsets.shown(("f:metadata", "f:finalizers", 'v:"a/b"')) == (
        '.metadata.finalizers[="a/b"]'
    )
    assert fieldsets.shown(("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}')) == (
        '.spec.ports[port=80,protocol="TCP"]'
    )
    assert fieldsets.shown(("f:x", "i:3")) == ".x[3]"


def test_update_managers_past_ten_are_merged_into_ancient_changes() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}}
    live = apply(None, {**cm, "data": {"applied": "1"}}, manager="applier")
    for i in range(12):
        changed = copy.deepcopy(live)
        changed["data"][f"k{i}"] = "v"
        changed["metadata"]["managedFields"] = ownership.updated(
            live,
            changed,
            kind="ConfigMap",
            manager=f"m{i:02}",
            api_version="v1",
            now=f"2026-01-01T00:00:{i:02}Z",
        )
        live = changed
    entries = live["metadata"]["managedFields"]
    assert len(entries) == 11
    assert entries[0]["manager"] == "applier"
    bucket = next(e for e in entries if e["manager"] == "ancient-changes")
    assert bucket["fieldsV1"] == {"f:data": {"f:k0": {}, "f:k1": {}, "f:k2": {}}}
    assert bucket["time"] == "2026-01-01T00:00:02Z"
    managers = {e["manager"] for e in entries}
    assert {"m00", "m01", "m02"}.isdisjoint(managers)
    assert {f"m{i:02}" for i in range(3, 12)} <= managers


def test_kubectls_apply_takes_the_fields_of_its_client_side_annotation() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}}
    live = update(None, {**cm, "data": {"a": "1", "b": "1"}}, "kubectl-client-side-apply")
    live["metadata"]["annotations"] = {ownership.LAST_APPLIED: json.dumps(cm)}
    allowed = ownership.last_applied_fields(live, "ConfigMap", "kubectl")
    assert allowed == {("f:data", "f:a")}
    assert ownership.last_applied_fields(live, "ConfigMap", "other") == set()

    taken, _ = ownership.applied(
        live,
        {**cm, "data": {"a": "2"}},
        kind="ConfigMap",
        manager="kubectl",
        api_version="v1",
        now=NOW,
        force=False,
        allowed=allowed,
    )
    assert taken["data"] == {"a": "2", "b": "1"}
    with pytest.raises(ownership.Conflicts) as caught:
        ownership.applied(
            live,
            {**cm, "data": {"a": "2", "b": "2"}},
            kind="ConfigMap",
            manager="kubectl",
            api_version="v1",
            now=NOW,
            force=False,
            allowed=allowed,
        )
    assert [fieldsets.shown(c.path) for c in caught.value.conflicts] == [".data.b"]
