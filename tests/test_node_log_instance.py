"""Which instance of a container ``logs`` and ``logs --previous`` read, as the kubelet's
``validateContainerLogStatus`` picks it from the pod's status (``state`` and
``lastState.terminated``), and that garbage collection never removes that instance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from lightkube.models.core_v1 import Container, Pod, PodSpec
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet import errors
from asynckubelet.node.access import choose_instance
from asynckubelet.runtime.kill import dead_instances_to_remove
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUNNING, EXITED, CREATED = ContainerState.RUNNING, ContainerState.EXITED, ContainerState.CREATED

Instance = tuple[str, ContainerState, int]
"""(id, state, exit code), newest first."""


def subject(
    *, policy: str = "Always", init: bool = False, deleted: bool = False
) -> tuple[Pod, str]:
    c = Container(name="c", image="busybox")
    app = Container(name="app", image="busybox")
    meta = ObjectMeta(name="p", namespace="default", uid="u1")
    if deleted:
        meta.deletionTimestamp = T0
    spec = PodSpec(
        containers=[app] if init else [c],
        initContainers=[c] if init else None,
        restartPolicy=policy,
    )
    return Pod(metadata=meta, spec=spec), "c"


def runtime(instances: list[Instance]) -> PodRuntimeStatus:
    count = len(instances)
    return PodRuntimeStatus(
        uid="u1",
        name="p",
        namespace="default",
        containers=tuple(
            ContainerStatus(
                id=cid,
                name="c",
                state=state,
                exit_code=code,
                created_at=T0 + timedelta(seconds=count - i),
                restart_count=count - 1 - i,
            )
            for i, (cid, state, code) in enumerate(instances)
        ),
    )


# (case, pod options, instances newest first, id of `logs -p`, id of `logs`); None: error
CASES: list[tuple[str, dict[str, object], list[Instance], str | None, str | None]] = [
    ("first instance running", {}, [("i0", RUNNING, 0)], None, "i0"),
    ("restarted and running", {}, [("i1", RUNNING, 0), ("i0", EXITED, 3)], "i0", "i1"),
    ("crashed, waiting to restart", {}, [("i0", EXITED, 3)], "i0", "i0"),
    (
        "crashed again, older one collected",
        {},
        [("i1", EXITED, 3)],
        "i1",
        "i1",
    ),
    (
        "crashed again, older one not collected yet",
        {},
        [("i1", EXITED, 3), ("i0", EXITED, 3)],
        "i1",
        "i1",
    ),
    (
        "next instance created, not started",
        {},
        [("i2", CREATED, 0), ("i1", EXITED, 3)],
        "i1",
        "i1",
    ),
    ("first instance created", {}, [("i0", CREATED, 0)], None, None),
    ("nothing yet", {}, [], None, None),
    ("Never: terminated stays the state", {"policy": "Never"}, [("i0", EXITED, 3)], None, "i0"),
    (
        "OnFailure: a success is not restarted",
        {"policy": "OnFailure"},
        [("i1", EXITED, 0), ("i0", EXITED, 3)],
        "i0",
        "i1",
    ),
    ("OnFailure: a failure is", {"policy": "OnFailure"}, [("i0", EXITED, 3)], "i0", "i0"),
    ("deleted pod: nothing restarts", {"deleted": True}, [("i0", EXITED, 3)], None, "i0"),
    ("init container done", {"init": True}, [("i0", EXITED, 0)], None, "i0"),
    ("init container failed", {"init": True}, [("i0", EXITED, 1)], "i0", "i0"),
]


@pytest.mark.parametrize(
    ("pod_options", "instances", "previous", "current"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_logs_read_the_instance_the_kubelets_status_names(
    pod_options: dict[str, object],
    instances: list[Instance],
    previous: str | None,
    current: str | None,
) -> None:
    pod, name = subject(**pod_options)  # type: ignore[arg-type]
    status = runtime(instances)
    for wanted, is_previous in ((previous, True), (current, False)):
        if wanted is None:
            with pytest.raises(errors.NotFound):
                choose_instance(pod, status, container=name, previous=is_previous)
        else:
            assert choose_instance(pod, status, container=name, previous=is_previous).id == wanted


RESTARTING = [case for case in CASES if case[3] is not None and not case[1]]


@pytest.mark.parametrize(
    ("pod_options", "instances"),
    [case[1:3] for case in RESTARTING],
    ids=[case[0] for case in RESTARTING],
)
def test_garbage_collection_keeps_the_previous_instance_of_a_restarting_container(
    pod_options: dict[str, object], instances: list[Instance]
) -> None:
    pod, name = subject(**pod_options)  # type: ignore[arg-type]
    status = runtime(instances)
    chosen = choose_instance(pod, status, container=name, previous=True)
    assert chosen.id not in dead_instances_to_remove(status)


def test_a_missing_previous_instance_is_reported_in_the_kubelets_words() -> None:
    pod, name = subject()
    with pytest.raises(errors.NotFound) as info:
        choose_instance(pod, runtime([("i0", RUNNING, 0)]), container=name, previous=True)
    assert str(info.value) == 'previous terminated container "c" in pod "p" not found'


# (case, instances newest first, ids garbage collection removes)
GC_CASES: list[tuple[str, list[Instance], list[str]]] = [
    ("running and one dead", [("i1", RUNNING, 0), ("i0", EXITED, 3)], []),
    ("older dead ones go", [("i2", EXITED, 3), ("i1", EXITED, 3), ("i0", EXITED, 3)], ["i1", "i0"]),
    ("a start in flight keeps the last dead", [("i2", CREATED, 0), ("i1", EXITED, 3)], []),
    (
        "an older never-started instance goes",
        [("i2", RUNNING, 0), ("i1", CREATED, 0), ("i0", EXITED, 3)],
        ["i1"],
    ),
]


@pytest.mark.parametrize(
    ("instances", "removed"), [c[1:] for c in GC_CASES], ids=[c[0] for c in GC_CASES]
)
def test_garbage_collection_keeps_the_newest_instance_that_ran(
    instances: list[Instance], removed: list[str]
) -> None:
    assert dead_instances_to_remove(runtime(instances)) == removed
