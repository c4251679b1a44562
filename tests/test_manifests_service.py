"""A v1 Service is defaulted and validated as the API server does it: the same defaults
(``kubectl get svc -o yaml`` shows them), the same refusals with the same field paths."""

from __future__ import annotations

import pytest

from asynckubelet.manifests import inspect_manifests_text

BASE = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: http}
"""


def errors(text: str) -> list[str]:
    report = inspect_manifests_text(text, source_name="svc.yaml", node_name="n1")
    return [str(e) for e in report.errors]


def service(text: str) -> dict[str, object]:
    report = inspect_manifests_text(text, source_name="svc.yaml", node_name="n1")
    assert report.errors == ()
    (svc,) = report.manifests.services
    body = svc.to_dict()
    assert isinstance(body, dict)
    return body


def test_a_service_gets_the_api_servers_defaults() -> None:
    body = service(BASE.replace("targetPort: http", "protocol: TCP"))
    spec = body["spec"]
    assert isinstance(spec, dict)
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ports"] == [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]
    assert body["metadata"] == {"name": "web", "namespace": "default"}


def test_a_named_target_port_is_kept_as_a_name() -> None:
    spec = service(BASE)["spec"]
    assert isinstance(spec, dict)
    assert spec["ports"][0]["targetPort"] == "http"


def test_a_node_port_service_gets_the_external_traffic_policy() -> None:
    spec = service(BASE.replace("spec:\n", "spec:\n  type: NodePort\n"))["spec"]
    assert isinstance(spec, dict)
    assert spec["externalTrafficPolicy"] == "Cluster"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("name: web}", "name: 1web}"),
            'metadata.name: Invalid value: "1web": a DNS-1035 label must consist of lower '
            "case alphanumeric characters or '-', start with an alphabetic character",
        ),
        (("spec:\n", "spec:\n  type: Magic\n"), 'spec.type: Unsupported value: "Magic"'),
        (("port: 80,", "port: 0,"), "spec.ports[0].port: Invalid value: 0: must be between"),
        (
            ("targetPort: http", "targetPort: 70000"),
            "spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535",
        ),
        (
            ("targetPort: http", "targetPort: Not_A_Name"),
            'spec.ports[0].targetPort: Invalid value: "Not_A_Name": must contain only',
        ),
        (
            ("targetPort: http}", "targetPort: http, protocol: ICMP}"),
            'spec.ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", '
            '"TCP", "UDP"',
        ),
        (
            ("targetPort: http}", "targetPort: http, nodePort: 30080}"),
            "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
        ),
        (
            ("spec:\n", "spec:\n  type: NodePort\n  clusterIP: None\n"),
            "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for "
            "NodePort services",
        ),
        (
            ("spec:\n", "spec:\n  clusterIP: 10.96.0.300\n"),
            "spec.clusterIPs[0]: Invalid value: \"10.96.0.300\": must be empty, 'None', or a "
            "valid IP address",
        ),
        (
            ("selector: {app: web}", "selector: {app: -web}"),
            'spec.selector: Invalid value: "-web"',
        ),
        (("  ports:\n  - {name: http, port: 80, targetPort: http}\n", ""), "spec.ports: Required"),
        (
            ("targetPort: http}", "targetPort: http}\n  - {port: 81}"),
            "spec.ports[1].name: Required value",
        ),
        (
            ("targetPort: http}", "targetPort: http}\n  - {name: http, port: 81}"),
            'spec.ports[1].name: Duplicate value: "http"',
        ),
    ],
)
def test_an_invalid_service_is_refused_in_the_api_servers_words(
    edit: tuple[str, str], message: str
) -> None:
    found = errors(BASE.replace(*edit))
    assert any(message in e for e in found), found


def test_a_headless_service_needs_no_ports() -> None:
    text = BASE.replace("spec:\n", "spec:\n  clusterIP: None\n").split("  ports:")[0]
    body = service(text)
    assert body["spec"]["clusterIP"] == "None"  # type: ignore[index]
    assert body["spec"]["clusterIPs"] == ["None"]  # type: ignore[index]


def test_an_external_name_service_needs_its_name() -> None:
    text = "apiVersion: v1\nkind: Service\nmetadata: {name: ext}\nspec: {type: ExternalName}\n"
    assert any("spec.externalName: Required value" in e for e in errors(text))


def test_client_ip_affinity_is_accepted_with_a_warning_that_it_is_not_honoured() -> None:
    text = BASE.replace("spec:\n", "spec:\n  sessionAffinity: ClientIP\n")
    report = inspect_manifests_text(text, source_name="svc.yaml", node_name="n1")
    assert report.errors == ()
    assert [w.field for w in report.warnings] == ["spec.sessionAffinity"]
