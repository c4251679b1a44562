"""Pod status to the API server: the patch, and when one is needed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from lightkube.models.core_v1 import PodCondition, PodIP, PodStatus

from asynckubelet.cluster.podstatus import PodStatusState, owned, status_patch

T0 = datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


def running(ip: str = "10.244.0.5", *, ready: str = "True") -> PodStatus:
    return PodStatus(
        phase="Running",
        podIP=ip,
        podIPs=[PodIP(ip=ip)],
        startTime=T0,
        conditions=[
            PodCondition(type="Ready", status=ready, lastTransitionTime=T0),
            PodCondition(type="PodScheduled", status="True", lastTransitionTime=T0),
        ],
    )


def from_api(body: dict[str, Any]) -> PodStatus:
    return cast(PodStatus, PodStatus.from_dict(body))


def test_only_the_fields_and_conditions_the_node_owns_are_reported_in_whole_seconds() -> None:
    status = running()
    assert status.conditions is not None
    status.conditions.append(PodCondition(type="DisruptionTarget", status="True"))
    status.nominatedNodeName = "other"
    body = owned(status)
    assert "nominatedNodeName" not in body
    assert [c["type"] for c in body["conditions"]] == ["Ready", "PodScheduled"]
    assert body["startTime"] == "2026-01-01T12:00:00Z"


def test_a_patch_carries_the_uid_the_changed_fields_and_nulls_for_dropped_ones() -> None:
    current = owned(running()) | {"reason": "FailedSync", "message": "error syncing pod"}
    new = owned(running(ready="False"))
    patch = status_patch("uid-1", new, current=current)
    assert patch["metadata"] == {"uid": "uid-1"}
    assert patch["status"]["reason"] is None
    assert patch["status"]["message"] is None
    assert "podIP" not in patch["status"]
    assert patch["status"]["conditions"][0]["status"] == "False"


def test_a_pod_ip_that_changed_is_replaced_not_added_to_the_merged_list() -> None:
    patch = status_patch(
        "uid-1", owned(running("10.244.0.9")), current=owned(running("10.244.0.5"))
    )
    assert patch["status"]["podIPs"] == [
        {"ip": "10.244.0.9"},
        {"ip": "10.244.0.5", "$patch": "delete"},
    ]


def state() -> PodStatusState:
    return PodStatusState(namespace="default", name="p", uid="uid-1")


def test_a_new_status_is_sent_once_even_when_the_server_drops_fields_it_does_not_know() -> None:
    pod = state()
    pod.observe_api(PodStatus(phase="Pending"))
    pod.wanted = owned(running())
    assert pod.patch_needed()
    answer = running()
    answer.podIPs = None
    pod.patched(answer, sent=pod.wanted)
    pod.observe_api(answer)
    assert not pod.patch_needed()


def test_a_status_another_writer_changed_is_sent_again() -> None:
    pod = state()
    pod.wanted = owned(running())
    pod.patched(running(), sent=pod.wanted)
    assert not pod.patch_needed()
    pod.observe_api(running(ready="False"))
    assert pod.patch_needed()


def test_an_unchanged_status_matching_the_server_is_not_sent() -> None:
    pod = state()
    pod.observe_api(running())
    pod.wanted = owned(running())
    assert not pod.patch_needed()


def test_a_status_never_takes_a_pod_out_of_a_terminal_phase_the_server_holds() -> None:
    pod = state()
    pod.observe_api(PodStatus(phase="Succeeded"))
    pod.wanted = owned(running())
    assert not pod.patch_needed()
    pod.wanted = owned(PodStatus(phase="Succeeded", reason="Completed"))
    assert pod.patch_needed()


def test_the_servers_timestamps_compare_equal_to_the_nodes_finer_ones() -> None:
    pod = state()
    api = owned(running())
    pod.observe_api(from_api(api))
    pod.wanted = owned(running())
    assert not pod.patch_needed()


def test_a_merged_condition_loses_the_reason_it_no_longer_has() -> None:
    not_ready = PodCondition(
        type="Ready", status="False", reason="ContainersNotReady", message="unready: [c]"
    )
    current = owned(PodStatus(phase="Running", conditions=[not_ready]))
    new = owned(PodStatus(phase="Running", conditions=[PodCondition(type="Ready", status="True")]))
    patch = status_patch("uid-1", new, current=current)
    assert patch["status"]["conditions"] == [
        {"type": "Ready", "status": "True", "reason": None, "message": None}
    ]
