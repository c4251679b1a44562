"""The node's metrics render as Prometheus text that a Prometheus parser accepts, under the
kubelet's names, and the runtime reports its operations to them."""

from __future__ import annotations

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from asynckubelet import errors
from asynckubelet.node.metrics import LoopLagMonitor, NodeMetrics
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker


def metrics() -> NodeMetrics:
    m = NodeMetrics(running_pods=lambda: 2, running_containers=lambda: {"running": 3})
    m.pod_start_duration.observe(1.5)
    m.operation_finished("sync_pod", seconds=0.02)
    m.operation_failed("start_container")
    m.pleg_relist_duration.observe(0.004)
    return m


def families(m: NodeMetrics) -> dict[str, list[Sample]]:
    return {f.name: f.samples for f in text_string_to_metric_families(m.render())}


def test_the_text_parses_and_names_the_kubelets_metrics() -> None:
    names = set(families(metrics()))
    assert {
        "kubelet_running_pods",
        "kubelet_running_containers",
        "kubelet_pod_start_duration_seconds",
        "kubelet_runtime_operations_duration_seconds",
        "kubelet_runtime_operations_errors",
        "kubelet_pleg_relist_duration_seconds",
        "process_cpu_seconds",
        "process_resident_memory_bytes",
    } <= names


def test_no_created_series_are_exposed_as_the_kubelet_exposes_none() -> None:
    assert not any(name.endswith("_created") for name in families(metrics()))


def test_gauges_carry_the_values_read_at_render_time() -> None:
    family = families(metrics())
    (sample,) = family["kubelet_running_pods"]
    assert sample.value == 2
    (running,) = family["kubelet_running_containers"]
    assert running.labels == {"container_state": "running"}


def test_histogram_buckets_are_cumulative_and_end_with_inf() -> None:
    m = NodeMetrics(running_pods=lambda: 0, running_containers=lambda: {})
    for v in (0.003, 0.02, 50):
        m.pleg_relist_duration.observe(v)
    samples = families(m)["kubelet_pleg_relist_duration_seconds"]
    buckets = {s.labels["le"]: s.value for s in samples if s.name.endswith("_bucket")}
    assert (buckets["0.005"], buckets["0.025"], buckets["10.0"], buckets["+Inf"]) == (1, 2, 2, 3)
    (count,) = [s.value for s in samples if s.name.endswith("_count")]
    assert count == 3


def test_label_values_are_escaped() -> None:
    m = NodeMetrics(running_pods=lambda: 0, running_containers=lambda: {})
    m.operation_failed('we"ird\\')
    (sample,) = families(m)["kubelet_runtime_operations_errors"]
    assert sample.labels["operation_type"] == 'we"ird\\'


def test_two_nodes_keep_their_own_metrics() -> None:
    a = NodeMetrics(running_pods=lambda: 0, running_containers=lambda: {})
    b = NodeMetrics(running_pods=lambda: 0, running_containers=lambda: {})
    a.operation_failed("kill_pod")
    assert "kubelet_runtime_operations_errors" in {
        name for name, samples in families(a).items() if samples
    }
    assert families(b)["kubelet_runtime_operations_errors"] == []


@pytest.mark.anyio
async def test_the_runtime_times_each_operation_and_counts_its_failures() -> None:
    m = NodeMetrics(running_pods=lambda: 0, running_containers=lambda: {})
    docker = FakeDocker()
    rm = RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker, metrics=m)
    await rm.get_pod_status(uid="u1", name="p", namespace="default")
    docker.fail("list_containers", errors.RuntimeUnavailable("engine gone"))
    with pytest.raises(errors.RuntimeUnavailable):
        await rm.get_pod_status(uid="u1", name="p", namespace="default")
    family = families(m)
    (count,) = [
        s.value
        for s in family["kubelet_runtime_operations_duration_seconds"]
        if s.name.endswith("_count")
    ]
    (failures,) = family["kubelet_runtime_operations_errors"]
    assert count == 2
    assert (failures.labels, failures.value) == ({"operation_type": "get_pod_status"}, 1)


@pytest.mark.anyio
async def test_the_loop_lag_monitor_records_how_late_each_sleep_woke() -> None:
    lags: list[float] = []
    monitor = LoopLagMonitor(lags.append, period=0.01)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(monitor.run)
            while len(lags) < 3:  # noqa: ASYNC110
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert all(lag >= 0 for lag in lags)
