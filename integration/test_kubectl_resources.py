"""Real kubectl (the machine's and PyPI's) and lightkube against a real ``serve`` reading
the resources the node derives or issues: ``get endpoints -w`` following a pod's
readiness, EndpointSlices, ``events.k8s.io`` Events and ``kubectl events``, a pod's
``status`` subresource, and ``kubectl create token`` giving a token that verifies with
the node's public key."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import anyio
import jwt

from integration.kubectl_helpers import Kubectl, kubectl, node, seen_until, streaming
from integration.serve_helpers import LONG, Daemon, manifest

__all__ = ["kubectl", "node"]
"""The fixtures this module takes from its helpers."""

SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: NAME}
spec:
  selector: {app: NAME}
  ports: [{port: 80}]
"""
LABELLED = LONG.replace("metadata: {name: NAME}", "metadata: {name: NAME, labels: {app: NAME}}")


def test_kubectl_get_endpoints_watch_follows_a_pod(kubectl: Kubectl, tmp_path: Path) -> None:
    name = f"ep{uuid.uuid4().hex[:6]}"
    applied = kubectl.node.cli(
        "apply", "-f", manifest(tmp_path, "s.yaml", SERVICE.replace("NAME", name))
    )
    assert applied.returncode == 0, applied.stderr
    try:
        with streaming(kubectl, "get", "endpoints", name, "-w") as lines:
            assert seen_until(lines, [name, "<none>"])[-1][:2] == [name, "<none>"]
            pod = manifest(tmp_path, "p.yaml", LABELLED.replace("NAME", name))
            assert kubectl.node.cli("apply", "-f", pod).returncode == 0
            ready = seen_until(lines, [name])
            while ready and ready[-1][1] == "<none>":
                ready = seen_until(lines, [name])
            ip = kubectl.ok("get", "pod", name, "-o", "jsonpath={.status.podIP}").strip()
            assert ready[-1][:2] == [name, f"{ip}:80"], ready
            assert kubectl.node.cli("delete", "pod", name).returncode == 0
            gone = seen_until(lines, [name, "<none>"])
            assert gone[-1][:2] == [name, "<none>"], gone
    finally:
        kubectl.node.cli("delete", "pod", name)
        kubectl.node.cli("delete", "service", name)


def test_kubectl_get_endpointslices_as_upstreams_controller_names_them(
    kubectl: Kubectl,
) -> None:
    rows = kubectl.ok("get", "endpointslices", "-l", "kubernetes.io/service-name=api").splitlines()
    assert rows[0].split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    [row] = [line.split() for line in rows[1:]]
    assert row[0].startswith("api-")
    assert row[1] == "IPv4"
    body = json.loads(kubectl.ok("get", "endpointslice", row[0], "-o", "json"))
    labels = body["metadata"]["labels"]
    assert labels["endpointslice.kubernetes.io/managed-by"] == "endpointslice-controller.k8s.io"
    assert body["metadata"]["generateName"] == "api-"
    assert body["metadata"]["ownerReferences"][0]["kind"] == "Service"
    endpoints = kubectl("get", "endpoints", "api")
    assert endpoints.returncode == 0, endpoints.stderr
    assert "Warning: v1 Endpoints is deprecated in v1.33+" in endpoints.stderr
    resources = kubectl.ok("api-resources", "--api-group=discovery.k8s.io").splitlines()
    assert resources[1].split() == [
        "endpointslices",
        "discovery.k8s.io/v1",
        "true",
        "EndpointSlice",
    ]
    explained = kubectl.ok("explain", "endpointslices.addressType")
    assert "KIND:" in explained
    assert "EndpointSlice" in explained


def test_kubectl_reads_events_of_both_groups(kubectl: Kubectl) -> None:
    rows = kubectl.ok(
        "get", "events.v1.events.k8s.io", "--field-selector", "regarding.name=web"
    ).splitlines()
    assert rows[0].split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert any("pod/web" in line for line in rows[1:]), rows
    body = json.loads(kubectl.ok("get", "events.events.k8s.io", "-o", "json"))
    assert body["items"]
    assert {e["apiVersion"] for e in body["items"]} == {"events.k8s.io/v1"}
    assert {"regarding", "note", "reportingController"} <= set(body["items"][0])
    listed = kubectl.ok("events", "--for", "pod/web").splitlines()
    assert listed[0].split()[:2] == ["LAST", "SEEN"]
    assert any("Pod/web" in line.split() for line in listed[1:]), listed


def test_kubectl_gets_a_pods_status_subresource(kubectl: Kubectl) -> None:
    rows = kubectl.ok("get", "pod", "web", "--subresource=status").splitlines()
    assert rows[1].split()[:3] == ["web", "1/1", "Running"]


def test_kubectl_create_token_is_signed_by_the_nodes_key(kubectl: Kubectl, tmp_path: Path) -> None:
    name = f"sa{uuid.uuid4().hex[:6]}"
    account = f"apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}}}\n"
    assert kubectl.node.cli("apply", "-f", manifest(tmp_path, "sa.yaml", account)).returncode == 0
    try:
        token = kubectl.ok("create", "token", name, "--audience=vault", "--duration=15m").strip()
        public = (kubectl.node.state / "serviceaccount" / "signing-key.pub").read_bytes()
        claims = jwt.decode(token, public, algorithms=["RS256"], audience="vault")
        assert claims["sub"] == f"system:serviceaccount:default:{name}"
        assert claims["exp"] - claims["iat"] == 900
        default = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default}\n"
        assert (
            kubectl.node.cli("apply", "-f", manifest(tmp_path, "d.yaml", default)).returncode == 0
        )
        bound = kubectl.ok(
            "create", "token", "default", "--bound-object-kind=Pod", "--bound-object-name=web"
        ).strip()
        private = jwt.decode(bound, public, algorithms=["RS256"], options={"verify_aud": False})[
            "kubernetes.io"
        ]
        uid = kubectl.ok("get", "pod", "web", "-o", "jsonpath={.metadata.uid}").strip()
        assert private["pod"] == {"name": "web", "uid": uid}
        missing = kubectl("create", "token", f"{name}-gone")
        assert missing.returncode != 0
        assert f'serviceaccounts "{name}-gone" not found' in missing.stderr
    finally:
        kubectl.node.cli("delete", "serviceaccount", name)
        kubectl.node.cli("delete", "serviceaccount", "default")


def test_lightkube_watches_a_services_endpointslice_appear(node: Daemon, tmp_path: Path) -> None:
    from lightkube import AsyncClient, KubeConfig
    from lightkube.resources.discovery_v1 import EndpointSlice

    name = f"lw{uuid.uuid4().hex[:6]}"

    async def main() -> tuple[str, str]:
        client = AsyncClient(KubeConfig.from_file(node.state / "kubeconfig"))
        try:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:

                    async def apply() -> None:
                        path = manifest(tmp_path, "svc.yaml", SERVICE.replace("NAME", name))
                        await anyio.to_thread.run_sync(node.cli, "apply", "-f", path)

                    tg.start_soon(apply)
                    async for kind, found in client.watch(
                        EndpointSlice,
                        namespace="default",
                        labels={"kubernetes.io/service-name": name},
                    ):
                        assert found.metadata is not None
                        return kind, str(found.metadata.name)
        finally:
            await client.close()
        raise AssertionError("the watch ended without an event")

    try:
        kind, slice_name = anyio.run(main)
    finally:
        node.cli("delete", "service", name)
    assert kind == "ADDED"
    assert slice_name.startswith(f"{name}-")


GATED = LONG.replace("spec:\n", "spec:\n  readinessGates: [{conditionType: example.com/lb}]\n", 1)


def test_kubectl_patch_status_opens_a_readiness_gate(kubectl: Kubectl, tmp_path: Path) -> None:
    name = f"rg{uuid.uuid4().hex[:6]}"
    assert (
        kubectl.node.cli(
            "apply", "-f", manifest(tmp_path, "g.yaml", GATED.replace("NAME", name))
        ).returncode
        == 0
    )
    try:
        reason = "jsonpath={.status.conditions[?(@.type=='Ready')].reason}=ReadinessGatesNotReady"
        kubectl.ok("wait", f"pod/{name}", f"--for={reason}", "--timeout=60s")
        condition = '{"status":{"conditions":[{"type":"example.com/lb","status":"True"}]}}'
        kubectl.ok("patch", "pod", name, "--subresource=status", "-p", condition)
        kubectl.ok("wait", f"pod/{name}", "--for=condition=Ready", "--timeout=60s")
        shown = kubectl.ok("get", "pod", name, "-o", "wide").splitlines()
        assert shown[0].split()[-1] == "GATES"
        assert shown[1].split()[-1] == "1/1"
    finally:
        kubectl.node.cli("delete", "pod", name)


def test_lightkube_watches_a_services_endpoints_follow_its_pod(
    node: Daemon, tmp_path: Path
) -> None:
    from lightkube import AsyncClient, KubeConfig
    from lightkube.resources.core_v1 import Endpoints

    name = f"le{uuid.uuid4().hex[:6]}"
    service = manifest(tmp_path, "svc.yaml", SERVICE.replace("NAME", name))
    assert node.cli("apply", "-f", service).returncode == 0

    async def main() -> list[tuple[str, list[str]]]:
        client = AsyncClient(KubeConfig.from_file(node.state / "kubeconfig"))
        seen: list[tuple[str, list[str]]] = []
        try:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:

                    async def apply() -> None:
                        path = manifest(tmp_path, "pod.yaml", LABELLED.replace("NAME", name))
                        await anyio.to_thread.run_sync(node.cli, "apply", "-f", path)

                    async for kind, found in client.watch(
                        Endpoints, namespace="default", fields={"metadata.name": name}
                    ):
                        ready = [
                            address.ip
                            for subset in found.subsets or []
                            for address in subset.addresses or []
                        ]
                        seen.append((kind, ready))
                        if len(seen) == 1:
                            tg.start_soon(apply)
                        if ready:
                            break
        finally:
            await client.close()
        return seen

    try:
        seen = anyio.run(main)
        ip = json.loads(node.cli("get", "pod", name, "-o", "json").stdout)["status"]["podIP"]
    finally:
        node.cli("delete", "pod", name)
        node.cli("delete", "service", name)
    assert seen[0] == ("ADDED", [])
    assert seen[-1] == ("MODIFIED", [ip])


def test_kubectl_get_endpointslices_watch_sees_a_slice_fill(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = f"sw{uuid.uuid4().hex[:6]}"
    selector = f"kubernetes.io/service-name={name}"
    try:
        with streaming(kubectl, "get", "endpointslices", "-l", selector, "-w") as lines:
            service = manifest(tmp_path, "s.yaml", SERVICE.replace("NAME", name))
            assert kubectl.node.cli("apply", "-f", service).returncode == 0
            first = seen_until(lines, [])
            while first and not first[-1][0].startswith(f"{name}-"):
                first = seen_until(lines, [])
            assert first[-1][1:4] == ["IPv4", "<unset>", "<unset>"], first
            pod = manifest(tmp_path, "p.yaml", LABELLED.replace("NAME", name))
            assert kubectl.node.cli("apply", "-f", pod).returncode == 0
            filled = seen_until(lines, [first[-1][0], "IPv4", "80"])
            ip = kubectl.ok("get", "pod", name, "-o", "jsonpath={.status.podIP}").strip()
            assert filled[-1][:4] == [first[-1][0], "IPv4", "80", ip], filled
    finally:
        kubectl.node.cli("delete", "pod", name)
        kubectl.node.cli("delete", "service", name)


def test_kubectl_watches_the_events_group(kubectl: Kubectl, tmp_path: Path) -> None:
    name = f"ew{uuid.uuid4().hex[:6]}"
    args = ("get", "events.v1.events.k8s.io", "-w", "--output-watch-events")
    try:
        with streaming(kubectl, *args, "--field-selector", f"regarding.name={name}") as lines:
            pod = manifest(tmp_path, "p.yaml", LONG.replace("NAME", name))
            assert kubectl.node.cli("apply", "-f", pod).returncode == 0
            seen = seen_until(lines, ["ADDED"])
            assert seen[0][:3] == ["EVENT", "LAST", "SEEN"], seen
            assert seen[-1][0] == "ADDED", seen
            assert f"pod/{name}" in seen[-1], seen
    finally:
        kubectl.node.cli("delete", "pod", name)
