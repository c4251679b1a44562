"""Resource usage from the engine's stats: cAdvisor's working set, the CPU rate between the
engine's two samples, Kubernetes quantities, and the three forms clients read (the
``metrics.k8s.io`` objects, the Summary API, the kubelet's Prometheus text)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from asynckubelet.api import resourcemetrics
from asynckubelet.api.kube import discovery
from asynckubelet.node import usage
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

NODE = "node-a"


def stats(
    *,
    cpu: int,
    precpu: int = 0,
    read: str = "2026-12-07T01:00:01.000000000Z",
    preread: str = "2026-12-07T01:00:00.000000000Z",
    usage_bytes: int = 0,
    inactive_file: int = 0,
    rss: int = 0,
    cgroup_v2: bool = False,
) -> dict[str, Any]:
    memory_stats = (
        {"inactive_file": inactive_file, "anon": rss}
        if cgroup_v2
        else {"total_inactive_file": inactive_file, "total_rss": rss, "rss": rss}
    )
    return {
        "read": read,
        "preread": preread,
        "cpu_stats": {"cpu_usage": {"total_usage": cpu}},
        "precpu_stats": {"cpu_usage": {"total_usage": precpu}},
        "memory_stats": {"usage": usage_bytes, "stats": memory_stats},
    }


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2026-12-07T01:00:00Z", 1796605200.0),
        ("2026-12-07T01:00:00.5Z", 1796605200.5),
        ("2026-12-07T01:00:00.250000000Z", 1796605200.25),
        ("2026-12-07T02:00:00.25+01:00", 1796605200.25),
        ("0001-01-01T00:00:00Z", None),
        ("yesterday", None),
        (None, None),
    ],
)
def test_engine_timestamps_read_with_nanoseconds_and_zones(
    text: str | None, seconds: float | None
) -> None:
    assert usage.parse_time(text) == seconds


@pytest.mark.parametrize("cgroup_v2", [False, True])
def test_working_set_is_usage_less_inactive_file_cache(cgroup_v2: bool) -> None:
    memory = stats(cpu=0, usage_bytes=10_000, inactive_file=3_000, cgroup_v2=cgroup_v2)
    assert usage.working_set(memory["memory_stats"]) == 7_000


def test_working_set_never_goes_below_zero() -> None:
    memory = stats(cpu=0, usage_bytes=1_000, inactive_file=3_000)["memory_stats"]
    assert usage.working_set(memory) == 0


@pytest.mark.parametrize("cgroup_v2", [False, True])
def test_rss_is_read_from_either_cgroup_version(cgroup_v2: bool) -> None:
    memory = stats(cpu=0, rss=4096, cgroup_v2=cgroup_v2)["memory_stats"]
    assert usage.rss(memory) == 4096


def test_cpu_rate_is_cpu_time_over_the_time_between_samples() -> None:
    # 250 ms of CPU over half a second: half a core.
    sample = stats(
        cpu=1_250_000_000,
        precpu=1_000_000_000,
        read="2026-12-07T01:00:00.500Z",
        preread="2026-12-07T01:00:00Z",
    )
    assert usage.cpu_rate(sample) == 500_000_000
    assert usage.window(sample) == 0.5


def test_cpu_rate_is_unknown_without_an_earlier_sample() -> None:
    one_shot = stats(cpu=5, preread="0001-01-01T00:00:00Z")
    assert usage.cpu_rate(one_shot) is None
    assert usage.cpu_rate(stats(cpu=5, precpu=0)) is None


@pytest.mark.parametrize(
    ("nano_cores", "text"),
    [(0, "0"), (2 * 10**9, "2"), (12_000_000, "12m"), (1_500_000, "1500u"), (123, "123n")],
)
def test_cpu_quantities_as_the_api_server_writes_them(nano_cores: int, text: str) -> None:
    assert usage.cpu_quantity(nano_cores) == text


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0"), (3456 * 1024, "3456Ki"), (12 * 2**20, "12Mi"), (2**30, "1Gi"), (1001, "1001")],
)
def test_memory_quantities_in_binary_units(size: int, text: str) -> None:
    assert usage.memory_quantity(size) == text


@pytest.mark.parametrize(("seconds", "text"), [(1.0, "1s"), (1.0042, "1.004s"), (0.5, "0.5s")])
def test_windows_print_as_go_durations(seconds: float, text: str) -> None:
    assert usage.duration(seconds) == text


def _container(docker: FakeDocker, pod: str, container: str, *, uid: str, state: str) -> str:
    labels = {
        naming.LABEL_NODE: NODE,
        naming.LABEL_TYPE: naming.TYPE_CONTAINER,
        naming.LABEL_POD_NAME: pod,
        naming.LABEL_POD_NAMESPACE: "default",
        naming.LABEL_POD_UID: uid,
        naming.LABEL_CONTAINER_NAME: container,
    }
    return docker.add_container(labels=labels, state=state).id


@pytest.fixture
def docker() -> FakeDocker:
    docker = FakeDocker()
    web = _container(docker, "web", "app", uid="u1", state="running")
    side = _container(docker, "web", "proxy", uid="u1", state="running")
    db = _container(docker, "db", "db", uid="u2", state="running")
    _container(docker, "old", "done", uid="u3", state="exited")
    docker.stats[web] = stats(cpu=3 * 10**9, precpu=2 * 10**9, usage_bytes=2**20, rss=4096)
    docker.stats[side] = stats(cpu=10**9, precpu=10**9 - 10**7, usage_bytes=2**20)
    docker.stats[db] = stats(cpu=5 * 10**8, precpu=5 * 10**8, usage_bytes=3 * 2**20)
    return docker


@pytest.mark.anyio
async def test_usage_sums_running_containers_per_pod_and_node(docker: FakeDocker) -> None:
    found = await usage.read_usage(docker, node_name=NODE)
    pods = {p.name: p for p in found.pods}
    assert sorted(pods) == ["db", "web"]
    assert [c.name for c in pods["web"].containers] == ["app", "proxy"]
    assert pods["web"].nano_cores == 10**9 + 10**7
    assert pods["web"].working_set_bytes == 2 * 2**20
    assert pods["web"].cpu_seconds == 4.0
    assert found.nano_cores == 10**9 + 10**7
    assert found.working_set_bytes == 5 * 2**20


@pytest.mark.anyio
async def test_a_container_gone_between_list_and_stats_is_left_out(docker: FakeDocker) -> None:
    docker.fail("container_stats", usage_errors_not_found(), target=next(iter(docker.stats)))
    found = await usage.read_usage(docker, node_name=NODE)
    assert sum(len(p.containers) for p in found.pods) == 2


def usage_errors_not_found() -> Exception:
    from asynckubelet import errors

    return errors.NotFound("No such container")


@pytest.mark.anyio
async def test_metrics_objects_carry_quantities_window_and_timestamp(docker: FakeDocker) -> None:
    found = await usage.read_usage(docker, node_name=NODE)
    web = next(p for p in found.pods if p.name == "web")
    body = resourcemetrics.pod_metrics(web)
    assert body["kind"] == "PodMetrics"
    assert body["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert body["timestamp"] == "2026-12-07T01:00:01Z"
    assert body["window"] == "1s"
    assert body["containers"] == [
        {"name": "app", "usage": {"cpu": "1", "memory": "1Mi"}},
        {"name": "proxy", "usage": {"cpu": "10m", "memory": "1Mi"}},
    ]
    node = resourcemetrics.node_metrics(found)
    assert node["usage"] == {"cpu": "1010m", "memory": "5Mi"}


@pytest.mark.anyio
async def test_summary_reports_rates_cumulative_cpu_and_memory(docker: FakeDocker) -> None:
    found = await usage.read_usage(docker, node_name=NODE)
    body = resourcemetrics.summary(found, start_time=0.0)
    assert body["node"]["nodeName"] == NODE
    assert body["node"]["cpu"]["usageNanoCores"] == 10**9 + 10**7
    assert body["node"]["memory"]["workingSetBytes"] == 5 * 2**20
    web = next(p for p in body["pods"] if p["podRef"]["name"] == "web")
    assert web["podRef"] == {"name": "web", "namespace": "default", "uid": "u1"}
    app = web["containers"][0]
    assert app["cpu"]["usageCoreNanoSeconds"] == 3 * 10**9
    assert app["memory"] == {
        "time": "2026-12-07T01:00:01Z",
        "usageBytes": 2**20,
        "workingSetBytes": 2**20,
        "rssBytes": 4096,
    }


@pytest.mark.anyio
async def test_prometheus_text_parses_with_the_kubelets_names_and_labels(
    docker: FakeDocker,
) -> None:
    found = await usage.read_usage(docker, node_name=NODE, rates=False)
    families = {
        f.name: f for f in text_string_to_metric_families(resourcemetrics.prometheus_text(found))
    }
    assert set(families) >= {
        "container_cpu_usage_seconds",
        "container_memory_working_set_bytes",
        "container_start_time_seconds",
        "pod_cpu_usage_seconds",
        "pod_memory_working_set_bytes",
        "node_cpu_usage_seconds",
        "node_memory_working_set_bytes",
        "scrape_error",
        "resource_scrape_error",
    }
    cpu = {
        (s.labels["pod"], s.labels["container"]): s
        for s in families["container_cpu_usage_seconds"].samples
    }
    app = cpu[("web", "app")]
    assert app.labels == {"container": "app", "namespace": "default", "pod": "web"}
    assert app.value == 3.0
    assert app.timestamp == 1796605201.0
    assert families["scrape_error"].samples[0].value == 0
    (node,) = families["node_memory_working_set_bytes"].samples
    assert node.value == 5 * 2**20


def test_prometheus_text_says_a_failed_scrape() -> None:
    families = {
        f.name: f for f in text_string_to_metric_families(resourcemetrics.prometheus_text(None))
    }
    assert families["scrape_error"].samples[0].value == 1
    assert "container_cpu_usage_seconds" not in families


def test_label_values_are_escaped_in_prometheus_text() -> None:
    pod = usage.PodUsage(
        namespace="default",
        name='we"ird\\pod',
        uid="u",
        containers=(usage.container_usage("c", stats(cpu=1), start_time=1.0),),
    )
    text = resourcemetrics.prometheus_text(usage.NodeUsage(NODE, 1.0, (pod,)))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (sample,) = families["pod_cpu_usage_seconds"].samples
    assert sample.labels["pod"] == 'we"ird\\pod'


def test_metrics_group_is_discovered_in_both_forms() -> None:
    groups = discovery.api_group_list()["groups"]
    metrics = next(g for g in groups if g["name"] == "metrics.k8s.io")
    assert metrics["preferredVersion"]["groupVersion"] == "metrics.k8s.io/v1beta1"
    listed = discovery.resource_list("metrics.k8s.io/v1beta1")
    assert listed is not None
    assert {(r["name"], r["kind"], tuple(r["verbs"])) for r in listed["resources"]} == {
        ("nodes", "NodeMetrics", ("get", "list")),
        ("pods", "PodMetrics", ("get", "list")),
    }
    aggregated = discovery.aggregated(core=False)["items"]
    group = next(g for g in aggregated if g["metadata"]["name"] == "metrics.k8s.io")
    assert group["versions"][0]["version"] == "v1beta1"
