"""The node's resource usage as its clients read it.

Three forms of one reading (:func:`asynckubelet.node.usage.read_usage`):

- the ``metrics.k8s.io/v1beta1`` API (``NodeMetrics``, ``PodMetrics``), which metrics-server
  serves in a cluster and ``kubectl top`` reads; here the node's own APIs serve it;
- the kubelet's Summary API, ``/stats/summary`` (``stats/v1alpha1``), which metrics-server
  scrapes;
- the kubelet's ``/metrics/resource``, Prometheus text with the kubelet's metric names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiohttp import web

from asynckubelet import errors
from asynckubelet.api.answers import label_selector, not_found, selected
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.rows import pod_labels
from asynckubelet.docker.engine import is_local_daemon
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.usage import (
    ContainerUsage,
    NodeUsage,
    PodUsage,
    cpu_quantity,
    duration,
    memory_quantity,
    read_usage,
    rfc3339,
)

GROUP_VERSION = "metrics.k8s.io/v1beta1"
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


async def node_usage(node: Kubelet, *, rates: bool = True) -> NodeUsage:
    """The node's usage now; an engine that does not answer is 503 with its reason."""
    try:
        return await read_usage(
            node.runtime.docker, node_name=node.node_name, rates=rates, local=_local(node)
        )
    except errors.AsyncKubeletError as e:
        raise web.HTTPServiceUnavailable(text=f"reading the engine's stats failed: {e}\n") from e


def _local(node: Kubelet) -> bool:
    return is_local_daemon(node.runtime.docker.url)


# -- metrics.k8s.io -------------------------------------------------------------------------


def _usage(nano_cores: int | None, working_set: int) -> dict[str, str]:
    return {"cpu": cpu_quantity(nano_cores or 0), "memory": memory_quantity(working_set)}


def _window(value: float | None) -> str:
    return duration(value if value is not None else 0.0)


def node_metrics(usage: NodeUsage, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """One ``NodeMetrics``."""
    return {
        "kind": "NodeMetrics",
        "apiVersion": GROUP_VERSION,
        "metadata": {
            "name": usage.node_name,
            "creationTimestamp": rfc3339(usage.timestamp),
            **({"labels": labels} if labels else {}),
        },
        "timestamp": rfc3339(usage.timestamp),
        "window": _window(usage.window),
        "usage": _usage(usage.nano_cores, usage.working_set_bytes),
    }


def pod_metrics(pod: PodUsage, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """One ``PodMetrics``."""
    return {
        "kind": "PodMetrics",
        "apiVersion": GROUP_VERSION,
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "creationTimestamp": rfc3339(pod.timestamp),
            **({"labels": labels} if labels else {}),
        },
        "timestamp": rfc3339(pod.timestamp),
        "window": _window(pod.window),
        "containers": [
            {"name": c.name, "usage": _usage(c.nano_cores, c.working_set_bytes)}
            for c in pod.containers
        ],
    }


def _metrics_list(kind: str, items: Iterable[dict[str, Any]]) -> web.Response:
    body = {"kind": kind, "apiVersion": GROUP_VERSION, "metadata": {}, "items": list(items)}
    return web.json_response(body)


async def list_node_metrics(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    selector = label_selector(request)
    labels = {"kubernetes.io/hostname": node.node_name}
    if not selected(selector, labels):
        return _metrics_list("NodeMetricsList", [])
    usage = await node_usage(node)
    return _metrics_list("NodeMetricsList", [node_metrics(usage, labels=labels)])


async def get_node_metrics(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    name = request.match_info["name"]
    if name != node.node_name:
        return not_found("nodemetrics.metrics.k8s.io", name)
    usage = await node_usage(node)
    return web.json_response(node_metrics(usage, labels={"kubernetes.io/hostname": node.node_name}))


def _pod_labels(node: Kubelet, pod: PodUsage) -> dict[str, str]:
    found = node.get(pod.namespace, pod.name)
    return pod_labels(found) if found is not None else {}


async def list_pod_metrics(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    namespace = request.match_info.get("namespace")
    selector = label_selector(request)
    usage = await node_usage(node)
    items = []
    for pod in usage.pods:
        if namespace is not None and pod.namespace != namespace:
            continue
        labels = _pod_labels(node, pod)
        if selected(selector, labels):
            items.append(pod_metrics(pod, labels=labels))
    return _metrics_list("PodMetricsList", items)


async def get_pod_metrics(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    usage = await node_usage(node)
    for pod in usage.pods:
        if pod.namespace == namespace and pod.name == name:
            return web.json_response(pod_metrics(pod, labels=_pod_labels(node, pod)))
    return not_found("podmetrics.metrics.k8s.io", name)


def add_routes(router: web.UrlDispatcher) -> None:
    """``metrics.k8s.io/v1beta1``'s nodes and pods (reads only)."""
    base = f"/apis/{GROUP_VERSION}"
    router.add_get(f"{base}/nodes", list_node_metrics)
    router.add_get(f"{base}/nodes/{{name}}", get_node_metrics)
    router.add_get(f"{base}/pods", list_pod_metrics)
    router.add_get(f"{base}/namespaces/{{namespace}}/pods", list_pod_metrics)
    router.add_get(f"{base}/namespaces/{{namespace}}/pods/{{name}}", get_pod_metrics)


# -- the kubelet's Summary API --------------------------------------------------------------


def _cpu(time: float, nano_cores: int | None, seconds: float) -> dict[str, Any]:
    body: dict[str, Any] = {"time": rfc3339(time)}
    if nano_cores is not None:
        body["usageNanoCores"] = nano_cores
    body["usageCoreNanoSeconds"] = round(seconds * 1e9)
    return body


def _memory(time: float, usage: int, working_set: int, rss: int) -> dict[str, Any]:
    return {
        "time": rfc3339(time),
        "usageBytes": usage,
        "workingSetBytes": working_set,
        "rssBytes": rss,
    }


def _container_summary(c: ContainerUsage) -> dict[str, Any]:
    return {
        "name": c.name,
        "startTime": rfc3339(c.start_time),
        "cpu": _cpu(c.timestamp, c.nano_cores, c.cpu_seconds),
        "memory": _memory(c.timestamp, c.usage_bytes, c.working_set_bytes, c.rss_bytes),
    }


def summary(usage: NodeUsage, *, start_time: float) -> dict[str, Any]:
    """``/stats/summary``: the node and its pods, as ``stats/v1alpha1`` ``Summary``."""
    return {
        "node": {
            "nodeName": usage.node_name,
            "startTime": rfc3339(start_time),
            "cpu": _cpu(usage.timestamp, usage.nano_cores, usage.cpu_seconds),
            "memory": _memory(
                usage.timestamp, usage.usage_bytes, usage.working_set_bytes, usage.rss_bytes
            ),
        },
        "pods": [
            {
                "podRef": {"name": p.name, "namespace": p.namespace, "uid": p.uid},
                "startTime": rfc3339(p.start_time),
                "containers": [_container_summary(c) for c in p.containers],
                "cpu": _cpu(p.timestamp, p.nano_cores, p.cpu_seconds),
                "memory": _memory(p.timestamp, p.usage_bytes, p.working_set_bytes, p.rss_bytes),
            }
            for p in usage.pods
        ],
    }


START_TIME_KEY = web.AppKey("started_at", float)


async def stats_summary(request: web.Request) -> web.Response:
    usage = await node_usage(request.app[NODE_KEY])
    return web.json_response(summary(usage, start_time=request.app[START_TIME_KEY]))


# -- the kubelet's /metrics/resource --------------------------------------------------------

_FAMILIES = (
    (
        "container_cpu_usage_seconds_total",
        "counter",
        "STABLE",
        "Cumulative cpu time consumed by the container in core-seconds",
    ),
    (
        "container_memory_working_set_bytes",
        "gauge",
        "STABLE",
        "Current working set of the container in bytes",
    ),
    (
        "container_start_time_seconds",
        "gauge",
        "STABLE",
        "Start time of the container since unix epoch in seconds",
    ),
    (
        "node_cpu_usage_seconds_total",
        "counter",
        "STABLE",
        "Cumulative cpu time consumed by the node in core-seconds",
    ),
    (
        "node_memory_working_set_bytes",
        "gauge",
        "STABLE",
        "Current working set of the node in bytes",
    ),
    (
        "pod_cpu_usage_seconds_total",
        "counter",
        "STABLE",
        "Cumulative cpu time consumed by the pod in core-seconds",
    ),
    ("pod_memory_working_set_bytes", "gauge", "STABLE", "Current working set of the pod in bytes"),
    (
        "resource_scrape_error",
        "gauge",
        "STABLE",
        "1 if there was an error while getting container metrics, 0 otherwise",
    ),
    (
        "scrape_error",
        "gauge",
        "ALPHA",
        "1 if there was an error while getting container metrics, 0 otherwise",
    ),
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def prometheus_text(usage: NodeUsage | None) -> str:
    """``/metrics/resource`` of ``usage`` (None: the engine did not answer, which
    ``scrape_error`` says)."""
    samples: dict[str, list[str]] = {name: [] for name, *_ in _FAMILIES}

    def add(name: str, labels: dict[str, str], value: float, time: float) -> None:
        text = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
        samples[name].append(
            f"{name}{{{text}}} {_number(value)} {round(time * 1000)}"
            if text
            else f"{name} {_number(value)} {round(time * 1000)}"
        )

    if usage is not None:
        for p in usage.pods:
            for c in p.containers:
                labels = {"container": c.name, "namespace": p.namespace, "pod": p.name}
                add("container_cpu_usage_seconds_total", labels, c.cpu_seconds, c.timestamp)
                add("container_memory_working_set_bytes", labels, c.working_set_bytes, c.timestamp)
                add("container_start_time_seconds", labels, c.start_time, c.timestamp)
            labels = {"namespace": p.namespace, "pod": p.name}
            add("pod_cpu_usage_seconds_total", labels, p.cpu_seconds, p.timestamp)
            add("pod_memory_working_set_bytes", labels, p.working_set_bytes, p.timestamp)
        add("node_cpu_usage_seconds_total", {}, usage.cpu_seconds, usage.timestamp)
        add("node_memory_working_set_bytes", {}, usage.working_set_bytes, usage.timestamp)
    failed = "1" if usage is None else "0"
    lines: list[str] = []
    for name, kind, level, text in _FAMILIES:
        if name.endswith("scrape_error"):
            samples[name] = [f"{name} {failed}"]
        if not samples[name]:
            continue
        lines += [f"# HELP {name} [{level}] {text}", f"# TYPE {name} {kind}", *samples[name]]
    return "\n".join(lines) + "\n"


async def metrics_resource(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    try:
        usage: NodeUsage | None = await read_usage(
            node.runtime.docker, node_name=node.node_name, rates=False, local=_local(node)
        )
    except errors.AsyncKubeletError:
        usage = None
    return web.Response(
        body=prometheus_text(usage).encode(), headers={"Content-Type": PROMETHEUS_TEXT}
    )


__all__ = [
    "GROUP_VERSION",
    "START_TIME_KEY",
    "add_routes",
    "get_node_metrics",
    "get_pod_metrics",
    "list_node_metrics",
    "list_pod_metrics",
    "metrics_resource",
    "node_metrics",
    "node_usage",
    "pod_metrics",
    "prometheus_text",
    "stats_summary",
    "summary",
]
