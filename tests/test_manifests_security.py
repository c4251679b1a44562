"""Pod Security Standards: each upstream check, at its level, in PodSecurity's wording."""

from __future__ import annotations

import json
from typing import Any

import builders
import pytest

from asynckubelet.manifests import Level, inspect_manifests_text, load_manifests_text
from asynckubelet.manifests.security import ENFORCE_LABEL, enforced_level

Doc = dict[str, Any]

RESTRICTED_SC = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def pod(spec: Doc | None = None, *, annotations: Doc | None = None, **ctr: Any) -> Doc:
    containers = [builders.container("x", "busybox:1", **ctr)]
    return builders.pod_doc(
        "p", annotations=annotations or None, containers=containers, **(spec or {})
    )


def rejection(doc: Doc, level: Level = "baseline") -> str | None:
    report = inspect_manifests_text(json.dumps(doc), node_name="n", pod_security=level)
    assert all(e.field == "spec" and e.reason == "Forbidden" for e in report.errors)
    return report.errors[0].detail if report.errors else None


BASELINE: list[tuple[str, Doc, str]] = [
    (
        "privileged",
        pod(securityContext={"privileged": True}),
        'privileged (container "x" must not set securityContext.privileged=true)',
    ),
    (
        "host namespaces",
        pod({"hostPID": True, "hostIPC": True}),
        "host namespaces (hostPID=true, hostIPC=true)",
    ),
    (
        "host ports",
        pod(ports=[{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9, "hostPort": 90}]),
        'hostPort (container "x" uses hostPorts 8080, 90)',
    ),
    (
        "capabilities beyond the default set",
        pod(securityContext={"capabilities": {"add": ["NET_ADMIN", "CHOWN", "SYS_TIME"]}}),
        'non-default capabilities (container "x" must not include "NET_ADMIN", "SYS_TIME" in '
        "securityContext.capabilities.add)",
    ),
    (
        "hostPath volumes",
        pod({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
        'hostPath volumes (volume "root")',
    ),
    (
        "unconfined AppArmor",
        pod(securityContext={"appArmorProfile": {"type": "Unconfined"}}),
        'forbidden AppArmor profile (container "x" must not set AppArmor profile type to '
        '"Unconfined")',
    ),
    (
        "AppArmor annotation",
        pod(annotations={"container.apparmor.security.beta.kubernetes.io/x": "unconfined"}),
        "forbidden AppArmor profile (annotation must not set AppArmor profile type to "
        '"container.apparmor.security.beta.kubernetes.io/x="unconfined"")',
    ),
    (
        "SELinux type",
        pod({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}),
        'seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "spc_t")',
    ),
    (
        "procMount",
        pod({"hostUsers": False}, securityContext={"procMount": "Unmasked"}),
        'procMount (container "x" must not set securityContext.procMount to "Unmasked")',
    ),
    (
        "seccomp unconfined",
        pod(securityContext={"seccompProfile": {"type": "Unconfined"}}),
        'seccompProfile (container "x" must not set securityContext.seccompProfile.type to '
        '"Unconfined")',
    ),
    (
        "unsafe sysctls",
        pod({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
        "forbidden sysctls (kernel.msgmax)",
    ),
    (
        "probe host",
        pod(livenessProbe={"httpGet": {"port": 80, "host": "10.0.0.1"}}),
        'probe or lifecycle host (container "x" uses probe or lifecycle host "10.0.0.1")',
    ),
    (
        "Windows host process",
        pod(securityContext={"windowsOptions": {"hostProcess": True}}),
        'hostProcess (container "x" must not set securityContext.windowsOptions.hostProcess=true)',
    ),
]


@pytest.mark.parametrize(("check", "doc", "detail"), BASELINE, ids=[c[0] for c in BASELINE])
def test_baseline_check_rejects_with_upstream_wording(check: str, doc: Doc, detail: str) -> None:
    assert rejection(doc) == f'violates PodSecurity "baseline:latest": {detail}'


@pytest.mark.parametrize(("check", "doc", "detail"), BASELINE, ids=[c[0] for c in BASELINE])
def test_privileged_level_admits_everything(check: str, doc: Doc, detail: str) -> None:
    assert rejection(doc, "privileged") is None


def test_several_failed_checks_are_joined_in_upstream_order() -> None:
    doc = pod({"hostNetwork": True}, securityContext={"privileged": True})
    assert rejection(doc) == (
        'violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), '
        'privileged (container "x" must not set securityContext.privileged=true)'
    )


def test_host_network_defaults_host_ports_and_baseline_sees_them() -> None:
    doc = pod({"hostNetwork": True}, ports=[{"containerPort": 80}])
    assert rejection(doc) == (
        'violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), '
        'hostPort (container "x" uses hostPort 80)'
    )


def test_a_plain_pod_passes_baseline_but_not_restricted() -> None:
    assert rejection(pod()) is None
    assert rejection(pod(), "restricted") == (
        'violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "x" must set '
        "securityContext.allowPrivilegeEscalation=false), "
        'unrestricted capabilities (container "x" must set '
        'securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "x" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "x" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")'
    )


def test_a_hardened_pod_passes_restricted() -> None:
    assert rejection(pod(securityContext=RESTRICTED_SC), "restricted") is None


RESTRICTED: list[tuple[str, Doc, str]] = [
    (
        "runAsUser 0",
        pod(securityContext={**RESTRICTED_SC, "runAsUser": 0}),
        'runAsUser=0 (container "x" must not set runAsUser=0)',
    ),
    (
        "runAsNonRoot false",
        pod(securityContext={**RESTRICTED_SC, "runAsNonRoot": False}),
        'runAsNonRoot != true (container "x" must not set securityContext.runAsNonRoot=false)',
    ),
    (
        "added capability",
        pod(
            securityContext={
                **RESTRICTED_SC,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "CHOWN"]},
            }
        ),
        'unrestricted capabilities (container "x" must not include "CHOWN" in '
        "securityContext.capabilities.add)",
    ),
    (
        "non-core volume types",
        pod(
            {"volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}]},
            securityContext=RESTRICTED_SC,
        ),
        'restricted volume types (volume "n" uses restricted volume type "nfs")',
    ),
]


@pytest.mark.parametrize(("check", "doc", "detail"), RESTRICTED, ids=[c[0] for c in RESTRICTED])
def test_restricted_check_rejects_with_upstream_wording(check: str, doc: Doc, detail: str) -> None:
    assert rejection(doc, "restricted") == f'violates PodSecurity "restricted:latest": {detail}'


def namespace(name: str, level: str) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": level}},
    }


def stream(*docs: Doc) -> str:
    return "\n---\n".join(json.dumps(d) for d in docs)


def test_a_namespace_label_relaxes_the_level_when_the_operator_allows_it() -> None:
    privileged = pod(securityContext={"privileged": True})
    privileged["metadata"]["namespace"] = "infra"
    manifests = load_manifests_text(
        stream(privileged, namespace("infra", "privileged")), allow_namespace_policy=True
    )
    assert [p.metadata.name for p in manifests.pods if p.metadata] == ["p"]


def test_a_namespace_label_tightens_the_level_for_its_pods() -> None:
    plain = pod()
    plain["metadata"]["namespace"] = "secure"
    report = inspect_manifests_text(stream(namespace("secure", "restricted"), plain))
    assert report.errors[0].detail.startswith('violates PodSecurity "restricted:latest"')


def test_a_namespace_label_cannot_relax_the_level_by_default() -> None:
    privileged = pod(securityContext={"privileged": True})
    privileged["metadata"]["namespace"] = "infra"
    report = inspect_manifests_text(stream(namespace("infra", "privileged"), privileged))
    assert [str(e) for e in report.errors] == [
        'spec: Forbidden: violates PodSecurity "baseline:latest": privileged (container "x" '
        "must not set securityContext.privileged=true)"
    ]
    assert [str(w) for w in report.warnings] == [
        "metadata.labels[pod-security.kubernetes.io/enforce]: Ignored: not honoured on this "
        'node (a namespace may only make this node\'s "baseline:latest" stricter; relaxing it '
        "is the operator's choice (--allow-namespace-policy))"
    ]


def test_an_unknown_level_label_is_an_error() -> None:
    report = inspect_manifests_text(json.dumps(namespace("infra", "open")))
    assert [str(e) for e in report.errors] == [
        'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "open": '
        "must be one of privileged, baseline, restricted"
    ]


def test_an_unknown_node_level_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="pod security level"):
        load_manifests_text(json.dumps(pod()), pod_security="lax")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("node", "label", "allow", "expected"),
    [
        ("baseline", None, False, "baseline"),
        ("baseline", "restricted", False, "restricted"),
        ("baseline", "privileged", False, "baseline"),
        ("baseline", "privileged", True, "privileged"),
        ("privileged", "baseline", False, "baseline"),
        ("restricted", "lax", True, "restricted"),
    ],
)
def test_the_level_in_force_for_a_namespace(
    node: Level, label: str | None, allow: bool, expected: Level
) -> None:
    labels = {ENFORCE_LABEL: label} if label is not None else {"team": "a"}
    assert enforced_level(node, labels, allow_namespace_policy=allow) == expected
