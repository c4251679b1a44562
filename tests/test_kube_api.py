"""The node's Kubernetes API over real TLS on loopback, on a node over a fake engine: only
the kubeconfig's client certificate is served, discovery in both forms, the API server's
``Status`` words, lists with resourceVersions and watches that resume from them."""

from __future__ import annotations

import datetime
import socket
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from daemon_helpers import IMAGES
from kube_helpers import Served, pod, served, watch_lines
from lightkube.models.core_v1 import PodStatus

from asynckubelet.api.kube import discovery, history, kubeconfigs, pki
from asynckubelet.api.kube.server import KubeAPI, serve_kube_api
from asynckubelet.kubectl.tables import TABLE_ACCEPT
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.runtime import containers as ctr
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

KUBECTL_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)

__all__ = ["served"]
"""The fixtures this module takes from its helpers."""


def other_pair(tmp_path: Path, *, signer: tuple[Any, Any] | None = None) -> tuple[Path, Path]:
    """A client pair: self-signed, or signed by ``signer`` (certificate, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "intruder")])
    issuer, signing_key = (signer[0].subject, signer[1]) if signer else (name, key)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(signing_key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "other.crt", tmp_path / "other.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


async def test_a_request_without_a_client_certificate_is_unauthorized(served: Served) -> None:
    code, _, body = await served.request("/api/v1/pods", context=served.context())
    assert (code, body) == (401, UNAUTHORIZED)


@pytest.mark.parametrize(
    "path", ["/apis/local.asynckubelet/v1/restarts", "/apis/local.asynckubelet/v1/applies"]
)
async def test_the_nodes_own_writes_without_a_client_certificate_are_unauthorized(
    served: Served, path: str
) -> None:
    code, _, body = await served.request(path, method="POST", context=served.context())
    assert (code, body) == (401, UNAUTHORIZED)


async def test_a_certificate_of_another_ca_fails_the_handshake(
    served: Served, tmp_path: Path
) -> None:
    cert, key = other_pair(tmp_path)
    with pytest.raises(aiohttp.ClientError):
        await served.request("/api/v1/pods", context=served.context(cert=cert, key=key))


async def test_another_certificate_the_nodes_ca_signed_is_unauthorized(
    served: Served, tmp_path: Path
) -> None:
    directory = served.state / pki.PKI_DIR
    ca = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    cert, key = other_pair(tmp_path, signer=(ca, ca_key))
    code, _, body = await served.request("/version", context=served.context(cert=cert, key=key))
    assert (code, body) == (401, UNAUTHORIZED)


async def test_the_kubeconfig_points_at_the_bound_port(served: Served) -> None:
    config = kubeconfigs.read_kubeconfig(served.state, "kubeconfig")
    assert config is not None
    assert config["clusters"][0]["cluster"]["server"] == f"https://127.0.0.1:{served.api.port}"


async def test_version_names_the_release_served(served: Served) -> None:
    code, _, body = await served.request("/version")
    assert code == 200
    assert (body["major"], body["minor"]) == ("1", "33")
    assert body["gitVersion"].startswith("v1.33.0+asynckubelet.")


async def test_kubectls_discovery_request_gets_the_aggregated_form(served: Served) -> None:
    code, content_type, body = await served.request("/apis", accept=KUBECTL_DISCOVERY)
    assert code == 200
    assert content_type == discovery.AGGREGATED
    assert [g["metadata"]["name"] for g in body["items"]] == [
        "apps",
        "events.k8s.io",
        "batch",
        "discovery.k8s.io",
        "metrics.k8s.io",
        "local.asynckubelet",
    ]
    own = body["items"][-1]["versions"][0]["resources"]
    assert [(r["resource"], r["scope"], r["verbs"]) for r in own] == [
        ("applies", "Cluster", ["create"]),
        ("restarts", "Cluster", ["create"]),
    ]
    _, _, core = await served.request("/api", accept=KUBECTL_DISCOVERY)
    [group] = core["items"]
    pods = next(r for r in group["versions"][0]["resources"] if r["resource"] == "pods")
    assert pods["verbs"] == [
        "get",
        "list",
        "watch",
        "create",
        "delete",
        "deletecollection",
        "patch",
        "update",
    ]
    assert pods["shortNames"] == ["po"]
    assert [s["subresource"] for s in pods["subresources"]] == [
        "ephemeralcontainers",
        "log",
        "resize",
        "status",
    ]


async def test_a_plain_json_client_gets_legacy_discovery(served: Served) -> None:
    _, content_type, body = await served.request("/api")
    assert content_type.startswith("application/json")
    assert body["kind"] == "APIVersions"
    _, _, groups = await served.request("/apis")
    assert [g["name"] for g in groups["groups"]] == [
        "apps",
        "events.k8s.io",
        "batch",
        "discovery.k8s.io",
        "metrics.k8s.io",
        "local.asynckubelet",
    ]
    _, _, own = await served.request("/apis/local.asynckubelet/v1")
    assert [(r["name"], r["kind"], r["verbs"]) for r in own["resources"]] == [
        ("applies", "Apply", ["create"]),
        ("restarts", "Restart", ["create"]),
    ]
    _, _, apps = await served.request("/apis/apps/v1")
    assert {r["name"] for r in apps["resources"]} == {
        "controllerrevisions",
        "daemonsets",
        "daemonsets/status",
        "deployments",
        "deployments/scale",
        "deployments/status",
        "replicasets",
        "replicasets/scale",
        "replicasets/status",
        "statefulsets",
        "statefulsets/scale",
        "statefulsets/status",
    }
    status = next(r for r in apps["resources"] if r["name"] == "statefulsets/status")
    assert (status["kind"], status["verbs"]) == ("StatefulSet", ["get"])
    code, _, _ = await served.request("/apis/networking.k8s.io/v1")
    assert code == 404


async def test_a_missing_pod_is_not_found_in_the_api_servers_words(served: Served) -> None:
    code, _, body = await served.request("/api/v1/namespaces/default/pods/nope")
    assert code == 404
    assert body["message"] == 'pods "nope" not found'
    assert body["reason"] == "NotFound"
    assert body["details"] == {"name": "nope", "kind": "pods"}


async def test_a_missing_deployment_is_named_with_its_group(served: Served) -> None:
    _, _, body = await served.request("/apis/apps/v1/namespaces/default/deployments/nope")
    assert body["message"] == 'deployments.apps "nope" not found'


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/v1/nodes"),
        ("PUT", "/api/v1/nodes/n1"),
        ("PATCH", "/api/v1/namespaces/default/events/e"),
        ("DELETE", "/api/v1/namespaces/default/endpoints/web"),
    ],
)
async def test_writes_of_what_the_node_makes_are_not_allowed(
    served: Served, method: str, path: str
) -> None:
    code, _, body = await served.request(path, method=method)
    assert code == 405
    assert body["reason"] == "MethodNotAllowed"
    assert body["message"] == "the server does not allow this method on the requested resource"


async def test_an_unknown_path_is_the_api_servers_not_found(served: Served) -> None:
    code, _, body = await served.request("/api/v1/widgets")
    assert (code, body["reason"]) == (404, "NotFound")
    assert body["message"] == "the server could not find the requested resource"
    assert body["details"] == {}


async def test_pods_are_listed_at_a_resource_version_and_each_carries_its_own(
    served: Served,
) -> None:
    await served.node.apply([pod("web", app="web"), pod("db", app="db")])
    _, _, listed = await served.request("/api/v1/namespaces/default/pods")
    assert listed["kind"] == "PodList"
    version = int(listed["metadata"]["resourceVersion"])
    assert [p["metadata"]["name"] for p in listed["items"]] == ["db", "web"]
    assert all(0 < int(p["metadata"]["resourceVersion"]) <= version for p in listed["items"])


async def test_a_table_of_pods_has_kubectls_row_objects_and_a_resource_version(
    served: Served,
) -> None:
    await served.node.apply(pod("web"))
    _, _, table = await served.request("/api/v1/pods", accept=TABLE_ACCEPT)
    assert table["kind"] == "Table"
    assert table["metadata"]["resourceVersion"]
    [row] = table["rows"]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["name"] == "web"


async def test_label_and_field_selectors_select_pods(served: Served) -> None:
    await served.node.apply([pod("web", app="web"), pod("db", app="db")])
    _, _, by_label = await served.request("/api/v1/pods?labelSelector=app%3Dweb")
    assert [p["metadata"]["name"] for p in by_label["items"]] == ["web"]
    _, _, by_field = await served.request("/api/v1/pods?fieldSelector=metadata.name!%3Dweb")
    assert [p["metadata"]["name"] for p in by_field["items"]] == ["db"]
    _, _, on_node = await served.request("/api/v1/pods?fieldSelector=spec.nodeName%3Dother")
    assert on_node["items"] == []


async def test_an_unknown_field_selector_is_a_bad_request(served: Served) -> None:
    code, _, body = await served.request("/api/v1/pods?fieldSelector=foo%3Dbar")
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"] == "field label not supported: foo"


async def test_this_node_is_listed_ready(served: Served) -> None:
    _, _, nodes = await served.request("/api/v1/nodes")
    [node] = nodes["items"]
    assert node["metadata"]["name"] == "n1"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"
    _, _, table = await served.request("/api/v1/nodes/n1", accept=TABLE_ACCEPT)
    assert table["rows"][0]["cells"][:3] == ["n1", "Ready", "<none>"]
    code, _, missing = await served.request("/api/v1/nodes/other")
    assert (code, missing["message"]) == (404, 'nodes "other" not found')


async def test_a_watch_from_a_lists_version_sees_only_what_came_after(served: Served) -> None:
    await served.node.apply(pod("web"))
    _, _, listed = await served.request("/api/v1/namespaces/default/pods")
    version = listed["metadata"]["resourceVersion"]
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            got: list[dict[str, Any]] = []

            async def watch() -> None:
                path = f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={version}"
                got.extend(await watch_lines(served, path, 1))

            tg.start_soon(watch)
            await served.node.apply(pod("db"))
    [event] = got
    assert event["type"] == "ADDED"
    assert event["object"]["metadata"]["name"] == "db"
    assert int(event["object"]["metadata"]["resourceVersion"]) > int(version)


async def test_a_watch_without_a_version_starts_with_every_pod_added(served: Served) -> None:
    await served.node.apply([pod("web"), pod("db")])
    with anyio.fail_after(20):
        events = await watch_lines(served, "/api/v1/pods?watch=true", 2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "db"),
        ("ADDED", "web"),
    ]


async def test_a_watch_ends_after_its_timeout_seconds(served: Served) -> None:
    with anyio.fail_after(20):
        events = await watch_lines(served, "/api/v1/pods?watch=1&timeoutSeconds=0", 99)
    assert events == []


async def test_a_watch_from_a_version_older_than_the_window_ends_expired(
    served: Served,
) -> None:
    ghost = pod("ghost")
    assert ghost.metadata is not None
    ghost.metadata.uid = "uid-ghost"
    for round_ in range(history.WINDOW + 2):
        served.node.status.set(ghost, PodStatus(phase="Pending", message=str(round_)))
    with anyio.fail_after(20):
        [event] = await watch_lines(served, "/api/v1/pods?watch=1&resourceVersion=1", 1)
    assert event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    assert event["object"]["message"].startswith("too old resource version: 1 (")


async def test_events_are_selected_by_involved_object_as_kubectl_describe_asks(
    served: Served,
) -> None:
    await served.node.apply([pod("web"), pod("db")])
    with anyio.fail_after(20):
        while not any(e.pod == "db" for e in served.node.recorder.list()):
            await served.node.status.changed()
    query = "involvedObject.kind%3DPod,involvedObject.namespace%3Ddefault,involvedObject.name%3Dweb"
    _, _, listed = await served.request(f"/api/v1/namespaces/default/events?fieldSelector={query}")
    assert listed["items"]
    assert {e["involvedObject"]["name"] for e in listed["items"]} == {"web"}
    _, _, table = await served.request(
        f"/api/v1/namespaces/default/events?fieldSelector={query}", accept=TABLE_ACCEPT
    )
    assert len(table["rows"]) == len(listed["items"])


async def test_other_kinds_are_selected_by_name_and_another_field_is_refused(
    served: Served,
) -> None:
    _, _, listed = await served.request("/api/v1/namespaces?fieldSelector=metadata.name%3Ddefault")
    assert [n["metadata"]["name"] for n in listed["items"]] == ["default"]
    _, _, none = await served.request(
        "/api/v1/namespaces?fieldSelector=metadata.name%3Dother", accept=TABLE_ACCEPT
    )
    assert none["rows"] == []
    code, _, refused = await served.request("/api/v1/configmaps?fieldSelector=data.x%3D1")
    assert (code, refused["message"]) == (400, "field label not supported: data.x")


def test_a_node_serves_the_kubernetes_api_only_with_its_local_api() -> None:
    from asynckubelet import KubeAPIEndpoint, NodeConfig

    with pytest.raises(ValueError, match=r"NodeConfig\.kube_api needs local_api"):
        NodeConfig(kube_api=KubeAPIEndpoint())


async def test_this_nodes_steady_conditions_date_from_its_start(served: Served) -> None:
    _, _, node = await served.request("/api/v1/nodes/n1")
    created = node["metadata"]["creationTimestamp"]
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == created
    assert ready["lastHeartbeatTime"] >= created


async def test_a_taken_port_makes_way_for_the_next_free_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    node = Kubelet(
        KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600),
        docker=FakeDocker(images=IMAGES),
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with node, anyio.create_task_group() as tg:
            api: KubeAPI = await tg.start(
                lambda task_status: serve_kube_api(
                    node, state_dir=state, port=port, next_free=True, task_status=task_status
                )
            )
            tg.cancel_scope.cancel()
    assert api.port > port
    assert api.url == f"https://127.0.0.1:{api.port}"


async def test_a_taken_port_asked_for_is_an_error(tmp_path: Path) -> None:
    state = tmp_path / "state"
    node = Kubelet(
        KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600),
        docker=FakeDocker(images=IMAGES),
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with node:
            with pytest.raises(OSError, match="address already in use"):
                await serve_kube_api(node, state_dir=state, port=port)


async def test_when_the_next_ports_are_taken_too_any_free_port_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynckubelet.api.kube import server

    monkeypatch.setattr(server, "PORT_TRIES", 1)
    state = tmp_path / "state"
    node = Kubelet(
        KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600),
        docker=FakeDocker(images=IMAGES),
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with node, anyio.create_task_group() as tg:
            api: KubeAPI = await tg.start(
                lambda task_status: serve_kube_api(
                    node, state_dir=state, port=port, next_free=True, task_status=task_status
                )
            )
            tg.cancel_scope.cancel()
    assert api.port not in (0, port)


async def test_lightkube_lists_and_watches_pods_with_the_nodes_kubeconfig(
    served: Served,
) -> None:
    from lightkube import AsyncClient, KubeConfig
    from lightkube.resources.core_v1 import Pod as PodResource

    await served.node.apply(pod("web"))
    config = KubeConfig.from_file(served.api.kubeconfig)
    client = AsyncClient(config)
    try:
        names = [
            ctr.pod_identity(p)[0] async for p in client.list(PodResource, namespace="default")
        ]
        assert names == ["web"]
        with anyio.fail_after(20):
            async for kind, found in client.watch(PodResource, namespace="default"):
                assert (kind, ctr.pod_identity(found)[0]) == ("ADDED", "web")
                break
    finally:
        await client.close()


async def test_an_apply_of_the_nodes_own_group_is_created_over_tls_too(served: Served) -> None:
    """The command line's ``apply`` is an ``Apply`` of ``local.asynckubelet/v1``: over the
    TLS endpoint as on the socket, its files are admitted together and its status holds
    each object's verdict; another kind of object is refused naming both."""
    config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"
    body = {
        "apiVersion": "local.asynckubelet/v1",
        "kind": "Apply",
        "spec": {"files": [{"source": "cm.yaml", "manifest": config}]},
    }
    path = "/apis/local.asynckubelet/v1/applies"
    async with (
        aiohttp.ClientSession() as session,
        session.post(served.api.url + path, json=body, ssl=served.admin()) as response,
    ):
        assert response.status == 201
        created = await response.json()
    assert (created["kind"], created["spec"]) == ("Apply", body["spec"])
    [item] = created["status"]["items"]
    assert (item["kind"], item["name"], item["verdict"]) == ("ConfigMap", "settings", "created")
    assert served.node.objects.get("ConfigMap", "default", "settings") is not None
    wrong = {**body, "kind": "ConfigMap"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(served.api.url + path, json=wrong, ssl=served.admin()) as response,
    ):
        assert response.status == 400
        refused = await response.json()
    assert refused["message"] == (
        "the object must be an Apply of local.asynckubelet/v1, "
        "not 'ConfigMap' of 'local.asynckubelet/v1'"
    )


async def test_a_workloads_status_subresource_answers_the_workload(served: Served) -> None:
    """``GET .../deployments/NAME/status`` is the Deployment, as the API server answers
    it; a missing one is its NotFound."""
    await served.node.apply(
        load_manifests_text(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
            "spec:\n  selector: {matchLabels: {app: web}}\n  template:\n"
            "    metadata: {labels: {app: web}}\n"
            "    spec: {containers: [{name: a, image: akltest.local/busybox:1.35}]}\n"
        )
    )
    path = "/apis/apps/v1/namespaces/default/deployments"
    code, _, body = await served.request(f"{path}/web/status")
    assert code == 200
    assert (body["kind"], body["metadata"]["name"]) == ("Deployment", "web")
    code, _, body = await served.request(f"{path}/nope/status")
    assert (code, body["message"]) == (404, 'deployments.apps "nope" not found')
