"""The node's metrics render as Prometheus text that a Prometheus parser accepts."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from asynckubelet.node.metrics import Histogram, NodeMetrics


def metrics() -> NodeMetrics:
    m = NodeMetrics(running_pods=lambda: 2, running_containers=lambda: {"running": 3})
    m.pod_start_duration.observe(1.5)
    m.runtime_operations_duration.observe(0.02, operation_type="sync_pod")
    m.runtime_operations_errors.inc(operation_type="start_container")
    m.pleg_relist_duration.observe(0.004)
    return m


def families() -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(metrics().render())}


def test_the_text_parses_and_names_the_kubelets_metrics() -> None:
    names = set(families())
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


def test_gauges_carry_the_values_read_at_render_time() -> None:
    family = {f.name: f for f in text_string_to_metric_families(metrics().render())}
    (sample,) = family["kubelet_running_pods"].samples
    assert sample.value == 2
    (running,) = family["kubelet_running_containers"].samples
    assert running.labels == {"container_state": "running"}


def test_histogram_buckets_are_cumulative_and_end_with_inf() -> None:
    h = Histogram("x_seconds", "x", buckets=(1, 2))
    for v in (0.5, 1.5, 5):
        h.observe(v)
    lines = h.render()
    assert 'x_seconds_bucket{le="1"} 1' in lines
    assert 'x_seconds_bucket{le="2"} 2' in lines
    assert 'x_seconds_bucket{le="+Inf"} 3' in lines
    assert "x_seconds_count 3" in lines


def test_label_values_are_escaped() -> None:
    m = NodeMetrics(running_pods=lambda: 0, running_containers=lambda: {})
    m.runtime_operations_errors.inc(operation_type='we"ird\\')
    family = {f.name: f for f in text_string_to_metric_families(m.render())}
    (sample,) = family["kubelet_runtime_operations_errors"].samples
    assert sample.labels["operation_type"] == 'we"ird\\'
