"""The revision bookkeeping of DaemonSets and StatefulSets (upstream's
``pkg/controller/history`` and the two controllers' use of it), as a table over data:
names, labels and data of a new revision, numbering, re-use on rollback, the history
limit, hash collisions and the StatefulSet's current revision."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from asynckubelet.workloads import revisions
from asynckubelet.workloads.deployment import pod_template_hash
from asynckubelet.workloads.revisions import REVISION_HASH, Stored, plan_revisions


def owner(
    image: str = "busybox:1",
    *,
    kind: str = "DaemonSet",
    limit: int | None = None,
    status: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {
            "metadata": {"labels": {"app": "d", "tier": "x"}},
            "spec": {"containers": [{"name": "c", "image": image}]},
        },
    }
    if limit is not None:
        spec["revisionHistoryLimit"] = limit
    meta: dict[str, Any] = {"name": "d", "namespace": "ns", "uid": "uid-d"}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": meta,
        "spec": spec,
        "status": status or {},
    }


def stored(body: dict[str, Any], number: int | None = None, created: int = 0) -> Stored:
    """A planned revision as the store keeps it (its number changed when given)."""
    kept = copy.deepcopy(body)
    kept["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{created:02d}Z"
    if number is not None:
        kept["revision"] = number
    return Stored(kept)


def history(kind: str, *images: str, limit: int | None = None) -> list[Stored]:
    """Revisions 1..n of ``images``, made one after the other."""
    kept: list[Stored] = []
    for i, image in enumerate(images):
        plan = plan_revisions(owner(image, kind=kind, limit=limit), kept, kind=kind)
        assert plan.create is not None
        kept.append(stored(plan.create, created=i))
    return kept


def test_the_first_revision_is_numbered_1_named_labelled_owned_and_holds_the_undo_patch() -> None:
    ds = owner(annotations={"kubernetes.io/change-cause": "first"})
    plan = plan_revisions(ds, [], kind="DaemonSet")
    template_hash = pod_template_hash(ds["spec"]["template"])
    assert plan.create is not None
    meta = plan.create["metadata"]
    assert (plan.create["apiVersion"], plan.create["kind"]) == ("apps/v1", "ControllerRevision")
    assert plan.create["revision"] == 1
    assert meta["name"] == f"d-{template_hash}" == plan.update
    assert meta["namespace"] == "ns"
    assert meta["labels"] == {"app": "d", "tier": "x", REVISION_HASH: template_hash}
    assert meta["annotations"] == {"kubernetes.io/change-cause": "first"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "d",
            "uid": "uid-d",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert plan.create["data"] == {
        "spec": {"template": {**ds["spec"]["template"], "$patch": "replace"}}
    }
    assert plan.update_hash == template_hash


def test_an_unchanged_template_keeps_its_revision_untouched() -> None:
    kept = history("DaemonSet", "busybox:1")
    plan = plan_revisions(owner("busybox:1"), kept, kind="DaemonSet")
    assert (plan.create, plan.renumber, plan.delete) == (None, {}, [])
    assert plan.update == kept[0].name


def test_a_changed_template_makes_the_next_revision() -> None:
    kept = history("DaemonSet", "busybox:1")
    plan = plan_revisions(owner("busybox:2"), kept, kind="DaemonSet")
    assert plan.create is not None
    assert plan.create["revision"] == 2
    assert plan.update != kept[0].name


@pytest.mark.parametrize("kind", ["DaemonSet", "StatefulSet"])
def test_rolling_back_re_uses_the_earlier_revision_with_the_next_number(kind: str) -> None:
    kept = history(kind, "busybox:1", "busybox:2", "busybox:3")
    plan = plan_revisions(owner("busybox:1", kind=kind), kept, kind=kind)
    assert plan.create is None
    assert plan.update == kept[0].name
    assert plan.renumber == {kept[0].name: 4}


def test_revisions_of_another_owner_are_not_counted_nor_re_used() -> None:
    other = history("DaemonSet", "busybox:1")[0].body
    foreign = copy.deepcopy(dict(other))
    foreign["metadata"]["name"] = "e-1"
    foreign["metadata"]["ownerReferences"][0]["uid"] = "uid-e"
    plan = plan_revisions(owner("busybox:1"), [Stored(foreign)], kind="DaemonSet")
    assert plan.create is not None
    assert plan.create["revision"] == 1


def test_a_name_taken_by_another_template_s_revision_raises_the_collision_count() -> None:
    ds = owner("busybox:2")
    squatter = history("DaemonSet", "busybox:1")[0].body
    taken = copy.deepcopy(dict(squatter))
    taken["metadata"]["name"] = f"d-{pod_template_hash(ds['spec']['template'])}"
    plan = plan_revisions(ds, [Stored(taken)], kind="DaemonSet")
    assert plan.collision_count == 1
    assert plan.create is not None
    expected = pod_template_hash(ds["spec"]["template"], 1)
    assert plan.update == plan.create["metadata"]["name"] == f"d-{expected}"
    assert plan.create["metadata"]["labels"][REVISION_HASH] == expected
    assert plan.create["revision"] == 2


def test_the_collision_count_in_the_status_names_the_revision() -> None:
    ds = owner(status={"collisionCount": 3})
    plan = plan_revisions(ds, [], kind="DaemonSet")
    assert plan.collision_count == 3
    assert plan.update_hash == pod_template_hash(ds["spec"]["template"], 3)


def test_a_long_owner_name_is_cut_to_leave_room_for_the_hash() -> None:
    assert revisions.revision_name("x" * 300, "abc") == "x" * 223 + "-abc"


def test_a_daemonset_keeps_the_limit_of_old_revisions_dropping_the_oldest_unused() -> None:
    kept = history("DaemonSet", "a:1", "a:2", "a:3", "a:4", "a:5", limit=2)
    live = {kept[0].hash}
    plan = plan_revisions(owner("a:5", limit=2), kept, kind="DaemonSet", live=live)
    assert plan.delete == [kept[1].name, kept[2].name]


def test_a_daemonset_s_history_limit_defaults_to_10() -> None:
    images = [f"a:{i}" for i in range(12)]
    kept = history("DaemonSet", *images)
    plan = plan_revisions(owner("a:11"), kept, kind="DaemonSet")
    assert plan.delete == [kept[0].name]


def test_a_statefulset_counts_only_revisions_nothing_uses_against_its_limit() -> None:
    kept = history("StatefulSet", "a:1", "a:2", "a:3", "a:4", limit=1)
    status = {"currentRevision": kept[1].name}
    sts = owner("a:4", kind="StatefulSet", limit=1, status=status)
    plan = plan_revisions(sts, kept, kind="StatefulSet", live={kept[2].name})
    assert plan.current == kept[1].name
    assert plan.delete == []
    plan = plan_revisions(sts, kept, kind="StatefulSet")
    assert plan.delete == [kept[0].name]


def test_a_statefulset_s_current_revision_is_the_update_revision_when_its_own_is_gone() -> None:
    kept = history("StatefulSet", "a:1")
    sts = owner("a:1", kind="StatefulSet", status={"currentRevision": "d-gone"})
    plan = plan_revisions(sts, kept, kind="StatefulSet")
    assert plan.current == plan.update == kept[0].name


def test_a_daemonset_has_no_current_revision_of_its_own() -> None:
    kept = history("DaemonSet", "a:1", "a:2")
    ds = owner("a:2", status={"currentRevision": kept[0].name})
    assert plan_revisions(ds, kept, kind="DaemonSet").current == kept[1].name


def test_revisions_sort_by_number_then_creation_then_name() -> None:
    first, second = history("StatefulSet", "a:1", "a:2")
    renumbered = stored(dict(first.body), number=3, created=0)
    plan = plan_revisions(
        owner("a:2", kind="StatefulSet"), [renumbered, second], kind="StatefulSet"
    )
    assert plan.renumber == {second.name: 4}


def test_a_re_used_revision_without_the_hash_label_goes_by_its_name() -> None:
    [kept] = history("DaemonSet", "a:1")
    unlabelled = copy.deepcopy(dict(kept.body))
    del unlabelled["metadata"]["labels"][REVISION_HASH]
    plan = plan_revisions(owner("a:1"), [Stored(unlabelled)], kind="DaemonSet")
    assert plan.update_hash == kept.name
