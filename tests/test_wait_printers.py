"""What the waits print: ``run``'s renderer shows each waiting reason once, where it
names the container, and leaves a final failure to the run's last line; ``apply
--wait``'s pod line says what holds the pod back without repeating its STATUS; and
both refuse a ``--max-restarts`` below 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from daemon_helpers import invoke
from lightkube.models.core_v1 import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodStatus,
)
from lightkube.models.meta_v1 import ObjectMeta
from output_helpers import RENDERER, child

from asynckubelet.node.operations import pod_state

STATUSES = (
    "from lightkube.models.core_v1 import (\n"
    "    ContainerState, ContainerStateWaiting, ContainerStatus, PodStatus)\n"
    "def waiting(reason, message):\n"
    "    state = ContainerState(waiting=ContainerStateWaiting(reason=reason, message=message))\n"
    "    return PodStatus(phase='Pending', containerStatuses=[ContainerStatus(\n"
    "        name='app', image='x', imageID='', ready=False, restartCount=0, state=state)])\n"
)


def shown(code: str) -> list[str]:
    return child(RENDERER + STATUSES + code).stderr.splitlines()


def test_a_waiting_reason_is_shown_once_with_its_container_and_message() -> None:
    assert shown(
        "s = waiting('ImagePullBackOff', 'Back-off pulling image \"x\"')\n"
        "renderer.status(pod, s)\n"
        "renderer.status(pod, s)\n"
    ) == ['pod/web/app: ImagePullBackOff: Back-off pulling image "x"']


def test_a_status_that_is_no_containers_reason_is_shown_for_the_pod() -> None:
    assert shown(
        "renderer.status(pod, waiting('ContainerCreating', None))\n"
        "renderer.status(pod, waiting('ErrImagePull', 'connection refused'))\n"
    ) == ["pod/web: ContainerCreating", "pod/web/app: ErrImagePull: connection refused"]


def test_a_final_failure_is_left_to_the_runs_last_line() -> None:
    code = (
        "renderer.final_at_end = True\n"
        "renderer.status(pod, waiting('ErrImageNeverPull', 'not present'))\n"
        "renderer.status(pod, waiting('ErrImagePull', 'lookup r.invalid: no such host'))\n"
        "renderer.status(pod, waiting('ImagePullBackOff', 'Back-off pulling image'))\n"
    )
    assert shown(code) == ["pod/web/app: ImagePullBackOff: Back-off pulling image"]


def test_without_a_last_line_a_final_failure_is_shown_as_it_comes() -> None:
    assert shown("renderer.status(pod, waiting('ErrImageNeverPull', 'not present'))\n") == [
        "pod/web/app: ErrImageNeverPull: not present"
    ]


def test_the_renderer_keeps_each_containers_last_line_of_output() -> None:
    code = (
        "renderer.log(pod, 'app', LogLine(stream='stdout', text='starting'))\n"
        "renderer.log(pod, 'app', LogLine(stream='stderr', text='cannot open db'))\n"
        "renderer.log(pod, 'app', LogLine(stream='stdout', text='  '))\n"
        "print(renderer.last_line('web', 'app'), renderer.last_line('web', 'b'))\n"
    )
    assert child(RENDERER + code).stdout.splitlines()[-1] == "cannot open db None"


def pod(status: PodStatus) -> Pod:
    return Pod(metadata=ObjectMeta(name="web", namespace="default"), status=status)


def container(name: str, state: ContainerState) -> ContainerStatus:
    return ContainerStatus(
        name=name, image="x", imageID="", ready=False, restartCount=0, state=state
    )


def test_a_pods_line_names_the_container_holding_it_back_without_repeating_the_status() -> None:
    state = ContainerState(
        waiting=ContainerStateWaiting(reason="ErrImagePull", message="no such host")
    )
    status = PodStatus(phase="Pending", containerStatuses=[container("app", state)])
    assert pod_state(pod(status)) == "app: ErrImagePull: no such host"


def test_a_pods_line_keeps_its_status_and_each_failed_exit() -> None:
    done = ContainerState(terminated=ContainerStateTerminated(exitCode=2, reason="Error"))
    status = PodStatus(phase="Running", containerStatuses=[container("app", done)])
    assert pod_state(pod(status)) == "Error; app: exited 2 (Error)"


@pytest.mark.parametrize("command", [["run"], ["apply", "--wait"]])
def test_a_negative_max_restarts_is_refused_naming_the_option(
    command: list[str], tmp_path: Path
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")
    files = [str(manifest)] if command == ["run"] else ["-f", str(manifest)]
    code, _, err = invoke(tmp_path / "state", *command, *files, "--max-restarts", "-1")
    assert (code, err) == (2, "error: --max-restarts must be 0 or more, not -1\n")


def _owned(uid: str, *, owner: str, revision: str | None) -> dict[str, object]:
    annotations = {} if revision is None else {"deployment.kubernetes.io/revision": revision}
    return {
        "metadata": {
            "uid": uid,
            "annotations": annotations,
            "ownerReferences": [{"uid": owner, "controller": True, "kind": "Deployment"}],
        }
    }


def test_a_rollouts_wait_counts_the_current_replicasets_pods_only() -> None:
    from asynckubelet.cli.applywait import _owner_chain

    key = ("Deployment", "default", "shop")
    deployment = {
        "metadata": {"uid": "d1", "annotations": {"deployment.kubernetes.io/revision": "2"}}
    }
    old = _owned("rs-old", owner="d1", revision="1")
    new = _owned("rs-new", owner="d1", revision="2")
    owners = _owner_chain({key: deployment}, [old, new])
    assert owners == {"d1": key, "rs-new": key}
    unrevised = {"metadata": {"uid": "d1"}}
    assert _owner_chain({key: unrevised}, [old, new]) == {
        "d1": key,
        "rs-old": key,
        "rs-new": key,
    }
