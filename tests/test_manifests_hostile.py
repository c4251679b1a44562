"""Hostile manifests, one table row per attack, each refused with its exact field error.

Whoever can hand the node a manifest must get no more than the Pod Security level in force
allows: no file written outside its volume, no identity that is a path, no line smuggled
into a host file or a firewall batch, no policy switched off from inside the manifest, and
no input that makes the loader itself fall over.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import builders
import pytest

from asynckubelet.manifests import inspect_manifests_text

Doc = dict[str, Any]

FILE_MODE = "must be a number between 0 and 0777 (octal), both inclusive"
IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
UUID = (
    "must be a lowercase RFC 4122 UUID (e.g. '6f1d3c0e-8a4b-5c2d-9e7f-a1b2c3d4e5f6', regex "
    "used for validation is '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')"
)
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
SEARCH = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    r"'_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')"
)
LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
WORD = "must not contain whitespace or control characters"


def pod(**spec: Any) -> Doc:
    return builders.pod_doc(
        "web", **{"containers": [builders.container("app", "nginx:1.25")], **spec}
    )


def with_volume(volume: Doc, **mount: Any) -> Doc:
    doc = pod(volumes=[{"name": "v", **volume}])
    if mount:
        doc["spec"]["containers"][0]["volumeMounts"] = [{"name": "v", "mountPath": "/v", **mount}]
    return doc


def with_meta(**meta: Any) -> Doc:
    doc = pod()
    doc["metadata"].update(meta)
    return doc


def with_container(**fields: Any) -> Doc:
    doc = pod()
    doc["spec"]["containers"][0].update(fields)
    return doc


def projected(*sources: Doc) -> Doc:
    return with_volume({"projected": {"sources": list(sources)}})


def errors(text: str, *, level: str = "privileged", **kwargs: Any) -> list[str]:
    report = inspect_manifests_text(text, node_name="n", pod_security=level, **kwargs)  # type: ignore[arg-type]
    return [str(e) for e in report.errors]


def errors_of(doc: Doc, *, level: str = "privileged") -> list[str]:
    return errors(json.dumps(doc), level=level)


HOSTILE: list[tuple[str, Callable[[], Doc], str]] = [
    # -- paths --------------------------------------------------------------------------
    (
        "an absolute configMap item path",
        lambda: with_volume(
            {"configMap": {"name": "c", "items": [{"key": "k", "path": "/etc/cron.d/x"}]}}
        ),
        'spec.volumes[0].configMap.items[0].path: Invalid value: "/etc/cron.d/x": '
        "must be a relative path",
    ),
    (
        "a secret item path climbing out",
        lambda: with_volume(
            {"secret": {"secretName": "s", "items": [{"key": "k", "path": "a/../../../etc/x"}]}}
        ),
        'spec.volumes[0].secret.items[0].path: Invalid value: "a/../../../etc/x": '
        "must not contain '..'",
    ),
    (
        "an item path in the atomic writer's reserved names",
        lambda: with_volume(
            {"configMap": {"name": "c", "items": [{"key": "k", "path": "..data"}]}}
        ),
        'spec.volumes[0].configMap.items[0].path: Invalid value: "..data": '
        "must not start with '..'",
    ),
    (
        "an empty item path",
        lambda: with_volume({"configMap": {"name": "c", "items": [{"key": "k", "path": ""}]}}),
        "spec.volumes[0].configMap.items[0].path: Required value",
    ),
    (
        "a downwardAPI item path climbing out (reported on the source, as upstream does)",
        lambda: with_volume(
            {
                "downwardAPI": {
                    "items": [{"path": "../x", "fieldRef": {"fieldPath": "metadata.name"}}]
                }
            }
        ),
        "spec.volumes[0].downwardAPI.path: Invalid value: \"../x\": must not contain '..'",
    ),
    (
        "a projected secret item with an absolute path",
        lambda: projected({"secret": {"name": "s", "items": [{"key": "k", "path": "/root/x"}]}}),
        'spec.volumes[0].projected.sources[0].secret.items[0].path: Invalid value: "/root/x": '
        "must be a relative path",
    ),
    (
        "a projected downwardAPI item climbing out",
        lambda: projected(
            {
                "downwardAPI": {
                    "items": [{"path": "../x", "fieldRef": {"fieldPath": "metadata.uid"}}]
                }
            }
        ),
        'spec.volumes[0].projected.sources[0].downwardAPI.path: Invalid value: "../x": '
        "must not contain '..'",
    ),
    (
        "a service-account token path climbing out",
        lambda: projected({"serviceAccountToken": {"path": "../../token"}}),
        "spec.volumes[0].projected.path: Invalid value: \"../../token\": must not contain '..'",
    ),
    (
        "a service-account token at an absolute path",
        lambda: projected({"serviceAccountToken": {"path": "/etc/shadow"}}),
        'spec.volumes[0].projected.path: Invalid value: "/etc/shadow": must be a relative path',
    ),
    (
        "two projected sources writing one file",
        lambda: projected(
            {"configMap": {"name": "a", "items": [{"key": "k", "path": "x"}]}},
            {"secret": {"name": "b", "items": [{"key": "k", "path": "x"}]}},
        ),
        'spec.volumes[0].projected: Invalid value: "b": conflicting duplicate paths',
    ),
    (
        "a setuid item mode",
        lambda: with_volume(
            {"configMap": {"name": "c", "items": [{"key": "k", "path": "x", "mode": 0o4755}]}}
        ),
        f"spec.volumes[0].configMap.items[0].mode: Invalid value: 2541: {FILE_MODE}",
    ),
    (
        "a setgid default mode",
        lambda: with_volume({"secret": {"secretName": "s", "defaultMode": 0o2777}}),
        f"spec.volumes[0].secret.defaultMode: Invalid value: 1535: {FILE_MODE}",
    ),
    (
        "a negative downwardAPI item mode",
        lambda: with_volume(
            {
                "downwardAPI": {
                    "items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}, "mode": -1}]
                }
            }
        ),
        f"spec.volumes[0].downwardAPI.mode: Invalid value: -1: {FILE_MODE}",
    ),
    (
        "a sticky projected item mode",
        lambda: projected(
            {"secret": {"name": "s", "items": [{"key": "k", "path": "x", "mode": 0o1777}]}}
        ),
        f"spec.volumes[0].projected.sources[0].secret.items[0].mode: Invalid value: 1023: "
        f"{FILE_MODE}",
    ),
    (
        "an absolute subPath",
        lambda: with_volume({"emptyDir": {}}, subPath="/etc"),
        'spec.containers[0].volumeMounts.subPath: Invalid value: "/etc": must be a relative path',
    ),
    (
        "a subPath climbing out",
        lambda: with_volume({"emptyDir": {}}, subPath="a/../../.."),
        'spec.containers[0].volumeMounts.subPath: Invalid value: "a/../../..": '
        "must not contain '..'",
    ),
    (
        "an absolute subPath that also climbs (both errors, as upstream reports them)",
        lambda: with_volume({"emptyDir": {}}, subPath="/a/../../etc"),
        'spec.containers[0].volumeMounts.subPath: Invalid value: "/a/../../etc": '
        "must not contain '..'",
    ),
    (
        "a subPathExpr climbing out",
        lambda: with_volume({"emptyDir": {}}, subPathExpr="$(POD_NAME)/../.."),
        'spec.containers[0].volumeMounts.subPathExpr: Invalid value: "$(POD_NAME)/../..": '
        "must not contain '..'",
    ),
    (
        "a hostPath with a back-step",
        lambda: with_volume({"hostPath": {"path": "/var/lib/../../etc"}}),
        'spec.volumes[0].hostPath.path: Invalid value: "/var/lib/../../etc": '
        "must not contain '..'",
    ),
    (
        "a pod seccomp localhostProfile climbing out of the seccomp directory",
        lambda: pod(
            securityContext={
                "seccompProfile": {"type": "Localhost", "localhostProfile": "../../etc/shadow"}
            }
        ),
        "spec.securityContext.seccompProfile.localhostProfile: Invalid value: "
        "\"../../etc/shadow\": must not contain '..'",
    ),
    (
        "a container seccomp localhostProfile at an absolute path",
        lambda: with_container(
            securityContext={
                "seccompProfile": {"type": "Localhost", "localhostProfile": "/etc/shadow"}
            }
        ),
        "spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: "
        '"/etc/shadow": must be a relative path',
    ),
    (
        "a seccomp localhostProfile with a NUL byte",
        lambda: with_container(
            securityContext={"seccompProfile": {"type": "Localhost", "localhostProfile": "a\0b"}}
        ),
        "spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: "
        '"a\\x00b": must not contain control characters',
    ),
    (
        "a Localhost seccomp profile without a name",
        lambda: pod(securityContext={"seccompProfile": {"type": "Localhost"}}),
        "spec.securityContext.seccompProfile.localhostProfile: Required value: "
        "must be set when seccomp type is Localhost",
    ),
    (
        "a seccomp localhostProfile with another type",
        lambda: pod(
            securityContext={
                "seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "x.json"}
            }
        ),
        'spec.securityContext.seccompProfile.localhostProfile: Invalid value: "x.json": '
        "can only be set when seccomp type is Localhost",
    ),
    (
        "an AppArmor profile name padded with a newline",
        lambda: with_container(
            securityContext={"appArmorProfile": {"type": "Localhost", "localhostProfile": "p\n"}}
        ),
        "spec.containers[0].securityContext.appArmorProfile.localhostProfile: Invalid value: "
        '"p\\n": must not be padded with whitespace',
    ),
    (
        "an AppArmor profile name with a control character inside",
        lambda: with_container(
            securityContext={"appArmorProfile": {"type": "Localhost", "localhostProfile": "p\nq"}}
        ),
        "spec.containers[0].securityContext.appArmorProfile.localhostProfile: Invalid value: "
        '"p\\nq": must not contain control characters',
    ),
    (
        "an AppArmor profile name longer than PATH_MAX",
        lambda: pod(
            securityContext={
                "appArmorProfile": {"type": "Localhost", "localhostProfile": "p" * 4096}
            }
        ),
        "spec.securityContext.appArmorProfile.localhostProfile: Too long: "
        "must have at most 4095 bytes",
    ),
    # -- identity -----------------------------------------------------------------------
    (
        "a uid that is a path",
        lambda: with_meta(uid="../../../etc"),
        f'metadata.uid: Invalid value: "../../../etc": {UUID}',
    ),
    (
        "a uid with a shell separator",
        lambda: with_meta(uid="0f8fad5b-d9cb-469f-a165-70867728950e;rm -rf /"),
        'metadata.uid: Invalid value: "0f8fad5b-d9cb-469f-a165-70867728950e;rm -rf /": ' + UUID,
    ),
    (
        "a uid with a slash",
        lambda: with_meta(uid="0f8fad5b/d9cb"),
        f'metadata.uid: Invalid value: "0f8fad5b/d9cb": {UUID}',
    ),
    (
        "a uid in upper case",
        lambda: with_meta(uid="0F8FAD5B-D9CB-469F-A165-70867728950E"),
        f'metadata.uid: Invalid value: "0F8FAD5B-D9CB-469F-A165-70867728950E": {UUID}',
    ),
    (
        "a pod name with a trailing newline",
        lambda: with_meta(name="web\n"),
        f'metadata.name: Invalid value: "web\\n": {SUBDOMAIN}',
    ),
    (
        "a namespace with a trailing newline",
        lambda: with_meta(namespace="default\n"),
        f'metadata.namespace: Invalid value: "default\\n": {LABEL}',
    ),
    (
        "a container name with a trailing newline",
        lambda: with_container(name="app\n"),
        f'spec.containers[0].name: Invalid value: "app\\n": {LABEL}',
    ),
    (
        "a volume name with a trailing newline",
        lambda: pod(volumes=[{"name": "data\n", "emptyDir": {}}]),
        f'spec.volumes[0].name: Invalid value: "data\\n": {LABEL}',
    ),
    # -- text that reaches the host -----------------------------------------------------
    (
        "a hostIP carrying an nft rule",
        lambda: with_container(
            ports=[
                {
                    "containerPort": 80,
                    "hostPort": 8080,
                    "hostIP": "127.0.0.1\nadd rule ip filter input accept",
                }
            ]
        ),
        'spec.containers[0].ports[0].hostIP: Invalid value: "127.0.0.1\\nadd rule ip filter '
        f'input accept": {IP}',
    ),
    (
        "a hostIP with a zone and a command",
        lambda: with_container(
            ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "fe80::1%eth0 -j ACCEPT"}]
        ),
        f'spec.containers[0].ports[0].hostIP: Invalid value: "fe80::1%eth0 -j ACCEPT": {IP}',
    ),
    (
        "a hostIP that is a name",
        lambda: with_container(
            ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "localhost"}]
        ),
        f'spec.containers[0].ports[0].hostIP: Invalid value: "localhost": {IP}',
    ),
    (
        "a nameserver smuggling a second line into resolv.conf",
        lambda: pod(dnsConfig={"nameservers": ["1.1.1.1\nnameserver 6.6.6.6"]}),
        'spec.dnsConfig.nameservers[0]: Invalid value: "1.1.1.1\\nnameserver 6.6.6.6": ' + IP,
    ),
    (
        "more than three nameservers",
        lambda: pod(dnsConfig={"nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8", "9.9.9.9"]}),
        'spec.dnsConfig.nameservers: Invalid value: []string{"1.1.1.1", "1.0.0.1", "8.8.8.8", '
        '"9.9.9.9"}: must not have more than 3 nameservers',
    ),
    (
        "a search domain smuggling a line into resolv.conf",
        lambda: pod(dnsConfig={"searches": ["example.com\nnameserver 6.6.6.6"]}),
        'spec.dnsConfig.searches[0]: Invalid value: "example.com\\nnameserver 6.6.6.6": ' + SEARCH,
    ),
    (
        "a DNS option name smuggling a line into resolv.conf",
        lambda: pod(dnsConfig={"options": [{"name": "ndots:1\nnameserver 6.6.6.6"}]}),
        'spec.dnsConfig.options[0].name: Invalid value: "ndots:1\\nnameserver 6.6.6.6": ' + WORD,
    ),
    (
        "a DNS option value with a space",
        lambda: pod(dnsConfig={"options": [{"name": "ndots", "value": "1 rotate"}]}),
        f'spec.dnsConfig.options[0].value: Invalid value: "1 rotate": {WORD}',
    ),
    (
        "an empty DNS option name",
        lambda: pod(dnsConfig={"options": [{"value": "1"}]}),
        "spec.dnsConfig.options[0]: Required value: must not be empty",
    ),
    (
        "a hostAlias IP smuggling a line into /etc/hosts",
        lambda: pod(hostAliases=[{"ip": "127.0.0.1\n6.6.6.6", "hostnames": ["bank.example"]}]),
        f'spec.hostAliases[0].ip: Invalid value: "127.0.0.1\\n6.6.6.6": {IP}',
    ),
    (
        "a hostAlias hostname with a tab",
        lambda: pod(hostAliases=[{"ip": "10.0.0.1", "hostnames": ["a\tb"]}]),
        f'spec.hostAliases[0].hostnames[0]: Invalid value: "a\\tb": {SUBDOMAIN}',
    ),
    (
        "a hostAlias with no IP",
        lambda: pod(hostAliases=[{"hostnames": ["a"]}]),
        f'spec.hostAliases[0].ip: Invalid value: "": {IP}',
    ),
]


@pytest.mark.parametrize(("attack", "make", "expected"), HOSTILE, ids=[c[0] for c in HOSTILE])
def test_a_hostile_manifest_is_refused_with_its_field_error(
    attack: str, make: Callable[[], Doc], expected: str
) -> None:
    assert expected in errors_of(make())


def test_what_the_attacks_were_made_of_is_valid_when_harmless() -> None:
    doc = pod(
        volumes=[
            {
                "name": "c",
                "configMap": {"name": "c", "items": [{"key": "k", "path": "a/b", "mode": 0o640}]},
            },
            {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
        ],
        dnsConfig={
            "nameservers": ["10.0.0.10", "2001:db8::53"],
            "searches": ["svc.cluster.local.", "_tcp.example.com", "."],
            "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}],
        },
        hostAliases=[{"ip": "10.0.0.1", "hostnames": ["db.local", "db"]}],
        securityContext={
            "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"},
            "appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-apparmor-example"},
        },
    )
    doc["metadata"]["uid"] = "0f8fad5b-d9cb-469f-a165-70867728950e"
    doc["spec"]["containers"][0].update(
        ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "127.0.0.1"}],
        volumeMounts=[{"name": "c", "mountPath": "/c", "subPathExpr": "$(POD_NAME)/logs"}],
    )
    assert errors_of(doc) == []


def namespace(name: str, level: str) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": level}},
    }


PRIVILEGED_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "root", "namespace": "infra"},
    "spec": {
        "hostPID": True,
        "containers": [{"name": "sh", "image": "busybox", "securityContext": {"privileged": True}}],
    },
}
REFUSED = (
    'spec: Forbidden: violates PodSecurity "baseline:latest": host namespaces (hostPID=true), '
    'privileged (container "sh" must not set securityContext.privileged=true)'
)


@pytest.mark.parametrize("order", ["namespace first", "pod first"])
def test_a_namespace_label_cannot_lower_the_level_for_the_pods_beside_it(order: str) -> None:
    docs = [namespace("infra", "privileged"), PRIVILEGED_POD]
    if order == "pod first":
        docs.reverse()
    text = "\n---\n".join(json.dumps(d) for d in docs)
    assert errors(text, level="baseline") == [REFUSED]


def test_a_namespace_label_inside_a_list_cannot_lower_the_level_either() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [namespace("infra", "privileged"), PRIVILEGED_POD],
        }
    )
    assert errors(text, level="baseline") == [REFUSED]


def test_the_operator_may_let_namespace_labels_lower_the_level() -> None:
    text = "\n---\n".join(json.dumps(d) for d in [namespace("infra", "privileged"), PRIVILEGED_POD])
    assert errors(text, level="baseline", allow_namespace_policy=True) == []


def test_a_namespace_label_may_still_raise_the_level() -> None:
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "secure"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    text = "\n---\n".join(json.dumps(d) for d in [namespace("secure", "restricted"), plain])
    found = errors(text, level="baseline")
    assert len(found) == 1
    assert found[0].startswith('spec: Forbidden: violates PodSecurity "restricted:latest": ')


def test_a_localhost_apparmor_profile_named_unconfined_is_unconfined_to_pod_security() -> None:
    doc = with_container(
        securityContext={"appArmorProfile": {"type": "Localhost", "localhostProfile": "unconfined"}}
    )
    assert errors_of(doc, level="baseline") == [
        'spec: Forbidden: violates PodSecurity "baseline:latest": forbidden AppArmor profile '
        '(container "app" must not set AppArmor profile type to "Localhost/unconfined")'
    ]


def test_an_apparmor_annotation_naming_unconfined_is_refused_as_well() -> None:
    doc = with_meta(
        annotations={"container.apparmor.security.beta.kubernetes.io/app": "localhost/unconfined"}
    )
    found = errors_of(doc, level="baseline")
    assert found == [
        'spec: Forbidden: violates PodSecurity "baseline:latest": forbidden AppArmor profile '
        "(annotation must not set AppArmor profile type to "
        '"container.apparmor.security.beta.kubernetes.io/app="localhost/unconfined"")'
    ]
