"""port-forward's targets: the pod of a pod, Service or Deployment, and the pod port each
``[LOCAL:]REMOTE`` reaches, as kubectl resolves them."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from asynckubelet.cli.commands.port_forward import PortSpec, parse_ports, resolve


def _pod(name: str, phase: str = "Running", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {"app": "web"}},
        "spec": {
            "containers": [
                {"name": "c", "ports": [{"name": "http", "containerPort": 8080}]},
                {"name": "d", "ports": [{"name": "metrics", "containerPort": 9090}]},
            ]
        },
        "status": {"phase": phase},
    }


SERVICE = {
    "metadata": {"name": "front"},
    "spec": {
        "selector": {"app": "web"},
        "ports": [
            {"name": "main", "port": 80, "targetPort": "http"},
            {"name": "num", "port": 81, "targetPort": 9090},
            {"port": 82},
        ],
    },
}
DEPLOYMENT = {"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}}


class _Node:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.selectors: list[str] = []

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        if resource == "pods":
            return next(p for p in self.pods if p["metadata"]["name"] == name)
        return {"services": SERVICE, "deployments": DEPLOYMENT}[resource]

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        self.selectors.append(selector)
        return self.pods


def _resolve(target: str, *ports: str, pods: list[dict[str, Any]] | None = None) -> Any:
    node = _Node(pods if pods is not None else [_pod("web-b"), _pod("web-a", "Pending")])
    pod, pairs = resolve(
        target, parse_ports(ports), namespace="default", get=node.get, list_pods=node.list_pods
    )
    return pod["metadata"]["name"], pairs, node.selectors


def _error(target: str, *ports: str, pods: list[dict[str, Any]] | None = None) -> str:
    with pytest.raises(typer.TyperException) as caught:
        _resolve(target, *ports, pods=pods)
    return str(caught.value)


def test_port_specs_read_as_kubectl_reads_them() -> None:
    assert parse_ports(["8080", "9000:80", ":81", "0:82", "1234:http"]) == [
        PortSpec(None, "8080"),
        PortSpec(9000, "80"),
        PortSpec(0, "81"),
        PortSpec(0, "82"),
        PortSpec(1234, "http"),
    ]


@pytest.mark.parametrize("bad", ["x:80", "70000:80", "80:", "80:0", "80:70000"])
def test_bad_port_specs_are_refused(bad: str) -> None:
    with pytest.raises(typer.TyperException):
        parse_ports([bad])


def test_a_pod_by_name_and_its_named_port() -> None:
    assert _resolve("pod/web-b", "8080", ":http")[:2] == ("web-b", [(8080, 8080), (0, 8080)])
    assert _resolve("web-b", "metrics")[:2] == ("web-b", [(9090, 9090)])


def test_a_service_sends_to_its_target_port_on_its_first_running_pod() -> None:
    name, pairs, selectors = _resolve("svc/front", "8000:80", "81", "main", ":82")
    assert name == "web-b"
    assert pairs == [(8000, 8080), (81, 9090), (8080, 8080), (0, 82)]
    assert selectors == ["app=web"]


def test_a_deployment_forwards_to_its_first_running_pod() -> None:
    pods = [_pod("web-c"), _pod("web-b"), _pod("web-a", "Pending")]
    assert _resolve("deploy/web", "8080", pods=pods)[:2] == ("web-b", [(8080, 8080)])


def test_errors_in_kubectls_words() -> None:
    assert _error("svc/front", "83") == "Service front does not have a service port 83"
    assert _error("pod/web-b", "nope") == "Pod 'web-b' does not have a named port 'nope'"
    assert _error("pod/web-a", "80") == (
        "unable to forward port because pod is not running. Current status=Pending"
    )
    assert _error("job/x", "80") == 'the server doesn\'t have a resource type "job"'
    assert _error("deploy/web", "80", pods=[]) == "no pods found for deployment/web"
