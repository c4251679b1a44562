"""Today's lifecycle fields as the API server validates them and as the node admits them.

``sleep`` hooks (zero allowed since 1.34, at most the grace period), ``lifecycle.stopSignal``
(needs ``spec.os.name``, one of that system's signals), pod-level ``resources`` (CPU,
memory and huge pages; requests within limits and covering the containers'), and the
features this node refuses at admission with a reason naming the field.
"""

from __future__ import annotations

import json
import signal
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import builders
import pytest

from asynckubelet.docker.types import ContainerInspect
from asynckubelet.manifests import inspect_manifests_text
from asynckubelet.manifests.podresources import effective_container_requests
from asynckubelet.manifests.probes import STOP_SIGNALS_LINUX
from asynckubelet.node.admission import NodeInfo, NodeResources, Rejection, admit
from asynckubelet.node.container_status import stop_signal_name
from asynckubelet.node.status import generate
from asynckubelet.runtime.containers import container_status_from_inspect
from asynckubelet.runtime.qos import qos_class
from asynckubelet.runtime.types import PodRuntimeStatus

GRACE_MESSAGE = "must be non-negative and less than terminationGracePeriodSeconds"
NODE = NodeInfo(
    name="node-a",
    allocatable=NodeResources(cpu_millis=4000, memory=8 * 1024**3, pods=110),
)


def errors_of(spec: dict[str, Any], **ctr: Any) -> list[str]:
    container = {"name": "app", "image": "busybox:1", **ctr}
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [container], **spec},
    }
    report = inspect_manifests_text(json.dumps(doc), node_name="n", pod_security="privileged")
    return [str(e) for e in report.errors]


def sleep_hook(hook: str, seconds: object) -> dict[str, Any]:
    return {"lifecycle": {hook: {"sleep": {"seconds": seconds}}}}


@pytest.mark.parametrize("hook", ["preStop", "postStart"])
@pytest.mark.parametrize("seconds", [0, 1, 30])
def test_a_sleep_hook_within_the_grace_period_is_valid(hook: str, seconds: int) -> None:
    assert errors_of({}, **sleep_hook(hook, seconds)) == []


@pytest.mark.parametrize("hook", ["preStop", "postStart"])
@pytest.mark.parametrize("seconds", [-1, 31, 2**31, 2**63 - 1])
def test_a_sleep_outside_zero_to_the_grace_period_is_invalid(hook: str, seconds: int) -> None:
    assert errors_of({}, **sleep_hook(hook, seconds)) == [
        f"spec.containers[0].lifecycle.{hook}.sleep: Invalid value: {seconds}: {GRACE_MESSAGE} (30)"
    ]


def test_a_sleep_is_measured_against_the_pods_own_grace_period() -> None:
    spec = {"terminationGracePeriodSeconds": 5}
    assert errors_of(spec, **sleep_hook("preStop", 5)) == []
    assert errors_of(spec, **sleep_hook("preStop", 6)) == [
        f"spec.containers[0].lifecycle.preStop.sleep: Invalid value: 6: {GRACE_MESSAGE} (5)"
    ]


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (2**63, "Invalid value: 9223372036854775808: must be between"),
        ("5", 'Invalid value: "5": must be an integer'),
        (1.5, "Invalid value: 1.5: must be an integer"),
        (True, "Invalid value: true: must be an integer"),
    ],
)
def test_a_sleep_of_a_value_no_int64_holds_is_refused_at_decoding(
    seconds: object, expected: str
) -> None:
    errors = errors_of({}, **sleep_hook("preStop", seconds))
    assert len(errors) == 1
    assert errors[0].startswith("spec.containers[0].lifecycle.preStop.sleep.seconds: ")
    assert expected in errors[0]


def test_a_hook_with_sleep_and_another_handler_is_invalid() -> None:
    hook = {"sleep": {"seconds": 1}, "httpGet": {"port": 80, "path": "/"}}
    assert errors_of({}, lifecycle={"postStart": hook}) == [
        "spec.containers[0].lifecycle.postStart.sleep: Forbidden: "
        "may not specify more than 1 handler type"
    ]


def test_a_sleep_hook_on_a_sidecar_is_validated_too() -> None:
    sidecar = {"name": "side", "image": "busybox:1", "restartPolicy": "Always"}
    sidecar.update(sleep_hook("preStop", -5))
    assert errors_of({"initContainers": [sidecar]}) == [
        f"spec.initContainers[0].lifecycle.preStop.sleep: Invalid value: -5: {GRACE_MESSAGE} (30)"
    ]


@pytest.mark.parametrize("signal", ["SIGINT", "SIGQUIT", "SIGUSR1", "SIGRTMIN+15", "SIGRTMAX"])
def test_a_linux_stop_signal_is_valid_with_the_os_named(signal: str) -> None:
    assert errors_of({"os": {"name": "linux"}}, lifecycle={"stopSignal": signal}) == []


def test_a_stop_signal_needs_the_pods_os_name() -> None:
    assert errors_of({}, lifecycle={"stopSignal": "SIGINT"}) == [
        "spec.containers[0].lifecycle.stopSignal: Forbidden: "
        "may not be set for containers with empty `spec.os.name`"
    ]


@pytest.mark.parametrize(
    "signal", ["INT", "sigint", "SIGRTMIN+16", "SIGRTMAX-15", "9", "", "SIGINT; rm -rf /"]
)
def test_a_stop_signal_linux_does_not_name_is_unsupported(signal: str) -> None:
    errors = errors_of({"os": {"name": "linux"}}, lifecycle={"stopSignal": signal})
    assert len(errors) == 1
    assert errors[0].startswith(
        f"spec.containers[0].lifecycle.stopSignal: Unsupported value: {json.dumps(signal)}: "
        'supported values: "SIGABRT", "SIGALRM",'
    )


def test_windows_pods_may_stop_only_with_term_or_kill() -> None:
    assert errors_of({"os": {"name": "windows"}}, lifecycle={"stopSignal": "SIGKILL"}) == []
    assert errors_of({"os": {"name": "windows"}}, lifecycle={"stopSignal": "SIGINT"}) == [
        "spec.containers[0].lifecycle.stopSignal: Unsupported value: "
        '"SIGINT": supported values: "SIGKILL", "SIGTERM"'
    ]


def test_the_linux_signal_list_is_upstreams_sixty_five() -> None:
    assert len(STOP_SIGNALS_LINUX) == 65


def test_pod_level_cpu_and_memory_requests_are_valid() -> None:
    spec = {"resources": {"requests": {"cpu": "500m", "memory": "128Mi", "hugepages-2Mi": "0"}}}
    assert errors_of(spec) == []


@pytest.mark.parametrize("name", ["ephemeral-storage", "nvidia.com/gpu", "pods"])
def test_pod_level_resources_other_than_cpu_memory_and_hugepages_are_unsupported(
    name: str,
) -> None:
    assert errors_of({"resources": {"requests": {name: "1"}}}) == [
        f'spec.resources.requests[{name}]: Unsupported value: "{name}": '
        'supported values: "cpu", "memory"'
    ]


def test_a_pod_level_request_above_its_limit_is_invalid() -> None:
    spec = {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}
    assert errors_of(spec) == [
        'spec.resources.requests[cpu]: Invalid value: "2": must be less than or equal to '
        "cpu limit of 1"
    ]


@pytest.mark.parametrize("value", ["-1", "1e400000", "lots"])
def test_a_pod_level_quantity_that_is_negative_or_malformed_is_invalid(value: str) -> None:
    errors = errors_of({"resources": {"limits": {"memory": value}}})
    assert [e.split(": ", 2)[:2] for e in errors] == [
        ["spec.resources.limits[memory]", "Invalid value"],
        ["spec.resources.requests[memory]", "Invalid value"],
    ], "the request defaulted from the bad limit is reported too, as by the API server"
    assert all(f'Invalid value: "{value}"' in e for e in errors)


def test_a_pod_level_request_below_the_containers_requests_is_invalid() -> None:
    spec = {"resources": {"requests": {"cpu": "100m"}}}
    assert errors_of(spec, resources={"requests": {"cpu": "250m"}}) == [
        'spec.resources.requests[cpu]: Invalid value: "100m": must be greater than or equal '
        "to aggregate container requests of 250m"
    ]


def test_a_container_limit_above_the_pod_limit_is_invalid() -> None:
    spec = {"resources": {"limits": {"memory": "64Mi"}}}
    assert errors_of(spec, resources={"limits": {"memory": "128Mi"}}) == [
        'spec.resources.requests[memory]: Invalid value: "128Mi": must be less than or equal '
        "to memory limit of 64Mi",
        'spec.resources.limits[memory]: Invalid value: "128Mi": '
        "must be less than or equal to pod limits",
    ]


def defaulted_pod_resources(spec: dict[str, Any], *containers: dict[str, Any]) -> Any:
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": list(containers), **spec},
    }
    report = inspect_manifests_text(json.dumps(doc), node_name="n", pod_security="privileged")
    (pod,) = report.manifests.pods
    assert pod.spec is not None
    assert pod.spec.resources is not None
    return pod.spec.resources.to_dict()


def test_pod_level_requests_default_to_the_pod_limits_when_no_container_asks() -> None:
    app = {"name": "app", "image": "busybox:1"}
    limits = {"cpu": "1", "memory": "64Mi"}
    assert defaulted_pod_resources({"resources": {"limits": limits}}, app) == {
        "limits": limits,
        "requests": limits,
    }


def test_pod_level_requests_default_to_what_the_containers_ask_for_together() -> None:
    def app(name: str, cpu: str) -> dict[str, Any]:
        return {"name": name, "image": "busybox:1", "resources": {"requests": {"cpu": cpu}}}

    spec = {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"memory": "1"}}}
    assert defaulted_pod_resources(spec, app("a", "250m"), app("b", "500m")) == {
        "limits": {"cpu": "2", "memory": "1Gi"},
        "requests": {"cpu": "750m", "memory": "1"},
    }


def test_pod_level_requests_alone_are_not_defaulted() -> None:
    app = {"name": "app", "image": "busybox:1", "resources": {"requests": {"cpu": "1"}}}
    spec = {"resources": {"requests": {"cpu": "2"}}}
    assert defaulted_pod_resources(spec, app) == {"requests": {"cpu": "2"}}


def test_the_containers_requests_count_sidecars_and_the_largest_init_container() -> None:
    def ctr(cpu: str, **extra: Any) -> dict[str, Any]:
        return builders.container("c", "busybox:1", resources={"requests": {"cpu": cpu}}, **extra)

    pod = builders.pod(
        "web",
        containers=[ctr("100m"), ctr("100m")],
        initContainers=[ctr("1"), ctr("50m", restartPolicy="Always"), ctr("300m")],
    )
    assert pod.spec is not None
    totals = effective_container_requests(pod.spec)
    assert str(totals["cpu"]) == "1"


def rejection(**spec: Any) -> Rejection | None:
    pod = builders.pod("web", containers=[builders.container("app", "busybox:1")], **spec)
    return admit(pod, node=NODE)


def test_a_pod_asking_for_its_own_user_namespace_is_refused_naming_the_field() -> None:
    refused = rejection(hostUsers=False)
    assert refused is not None
    assert refused.reason == "PodFeatureUnsupported"
    assert refused.message.startswith("spec.hostUsers: false asks for a user namespace")


def test_host_users_true_is_admitted() -> None:
    assert rejection(hostUsers=True) is None


def test_an_image_volume_is_refused_naming_the_volume() -> None:
    volumes = [
        {"name": "data", "emptyDir": {}},
        {"name": "tools", "image": {"reference": "busybox:1", "pullPolicy": "IfNotPresent"}},
    ]
    refused = rejection(volumes=volumes)
    assert refused is not None
    assert refused.reason == "PodFeatureUnsupported"
    assert refused.message.startswith("spec.volumes[1].image: image volumes are not supported")


def test_pod_level_limits_are_refused_naming_the_field() -> None:
    refused = rejection(resources={"limits": {"memory": "64Mi", "cpu": "1"}})
    assert refused == Rejection(
        "PodLevelResourcesNotSupported",
        "spec.resources.limits (cpu, memory): pod-level limits are not enforced by this "
        "node (no pod cgroup carries them); set the limits on the containers",
    )


def test_pod_level_requests_alone_are_admitted() -> None:
    assert rejection(resources={"requests": {"cpu": "100m"}}) is None


@pytest.mark.parametrize(
    ("engine", "reported"),
    [
        ("", "SIGTERM"),
        ("SIGINT", "SIGINT"),
        ("QUIT", "SIGQUIT"),
        ("usr1", "SIGUSR1"),
        ("3", "SIGQUIT"),
        (str(int(signal.SIGRTMIN) + 2), "SIGRTMIN+2"),
        (str(int(signal.SIGRTMAX) - 1), "SIGRTMAX-1"),
        ("SIGRTMIN+4", "SIGRTMIN+4"),
    ],
)
def test_the_engines_stop_signal_is_reported_in_upstreams_spelling(
    engine: str, reported: str
) -> None:
    assert stop_signal_name(engine) == reported


def test_a_containers_status_reports_its_effective_stop_signal_from_inspect() -> None:
    info: ContainerInspect = {
        "Id": "c1",
        "Created": "2026-01-01T00:00:00Z",
        "State": {"Status": "running", "Running": True},
        "Config": {"Labels": {}, "StopSignal": "SIGUSR1"},
    }
    record = replace(container_status_from_inspect(info), name="app")
    assert record.stop_signal == "SIGUSR1"
    pod = builders.pod("web", containers=[builders.container("app", "busybox:1")])
    runtime = PodRuntimeStatus(uid="u", name="web", namespace="default", containers=(record,))
    status = generate(pod, runtime, now=datetime.now(UTC))
    assert [s.stopSignal for s in status.containerStatuses or []] == ["SIGUSR1"]


@pytest.mark.parametrize(
    ("pod_level", "container", "qos"),
    [
        ({"requests": {"cpu": "100m"}}, {}, "Burstable"),
        ({"limits": {"cpu": "1", "memory": "64Mi"}}, {}, "Guaranteed"),
        ({"requests": {"cpu": "1"}}, {"limits": {"cpu": "1", "memory": "1Gi"}}, "Burstable"),
        ({}, {"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
        ({"requests": {"hugepages-2Mi": "2Mi"}}, {}, "BestEffort"),
    ],
)
def test_pod_level_cpu_or_memory_alone_decide_the_qos_class(
    pod_level: dict[str, Any], container: dict[str, Any], qos: str
) -> None:
    ctr = builders.container("app", "busybox:1", resources=container)
    pod = builders.pod("web", containers=[ctr], resources=pod_level)
    assert qos_class(pod) == qos
