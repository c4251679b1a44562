"""ValidatePod's rules, one table row per rule, each with the API server's exact message."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import inspect_manifests_text, validation
from asynckubelet.manifests.defaults import default_pod

Doc = dict[str, Any]

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
ENV_MSG = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', "
    "'-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or "
    "'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
)
QUANTITY_MSG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
INIT_FORBIDDEN = "Forbidden: may not be set for init containers without restartPolicy=Always"
RESTART_42 = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}


def base_pod() -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]},
    }


def errors_of(doc: Doc) -> list[str]:
    report = inspect_manifests_text(json.dumps(doc), node_name="node-a", pod_security="privileged")
    return [str(e) for e in report.errors]


def edit(change: Callable[[Doc], object]) -> Doc:
    doc = base_pod()
    change(doc)
    return doc


def ctr(doc: Doc, i: int = 0) -> Doc:
    return doc["spec"]["containers"][i]  # type: ignore[no-any-return]


def add_container(doc: Doc, **fields: Any) -> Doc:
    added = {"name": "side", "image": "busybox:1", **fields}
    doc["spec"]["containers"].append(added)
    return added


def set_spec(**fields: Any) -> Callable[[Doc], None]:
    return lambda doc: doc["spec"].update(fields)


def set_ctr(i: int = 0, **fields: Any) -> Callable[[Doc], None]:
    return lambda doc: ctr(doc, i).update(fields)


def init(**fields: Any) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        doc["spec"]["initContainers"] = [{"name": "init", "image": "busybox:1", **fields}]

    return change


EXEC = {"exec": {"command": ["true"]}}

CASES: list[tuple[str, Callable[[Doc], object], str]] = [
    (
        "pod name is a DNS-1123 subdomain",
        lambda d: d["metadata"].update(name="Web_1"),
        f'metadata.name: Invalid value: "Web_1": {SUBDOMAIN_MSG}',
    ),
    (
        "pod name is required",
        lambda d: d["metadata"].pop("name"),
        "metadata.name: Required value: name or generateName is required",
    ),
    (
        "pod name at most 253 characters",
        lambda d: d["metadata"].update(name="a" * 254),
        f'metadata.name: Invalid value: "{"a" * 254}": must be no more than 253 characters',
    ),
    (
        "namespace is a DNS-1123 label",
        lambda d: d["metadata"].update(namespace="Prod"),
        f'metadata.namespace: Invalid value: "Prod": {LABEL_MSG}',
    ),
    (
        "container name is a DNS-1123 label",
        set_ctr(name="App"),
        f'spec.containers[0].name: Invalid value: "App": {LABEL_MSG}',
    ),
    (
        "container name has no dots",
        set_ctr(name="a.b"),
        'spec.containers[0].name: Invalid value: "a.b": must not contain dots',
    ),
    (
        "container name at most 63 characters",
        set_ctr(name="a" * 64),
        f'spec.containers[0].name: Invalid value: "{"a" * 64}": must be no more than 63 characters',
    ),
    (
        "container name is required",
        set_ctr(name=None),
        "spec.containers[0].name: Required value",
    ),
    (
        "container names are unique among regular containers",
        lambda d: add_container(d, name="app"),
        'spec.containers[1].name: Duplicate value: "app"',
    ),
    (
        "init container names do not repeat regular ones",
        init(name="app"),
        'spec.initContainers[0].name: Duplicate value: "app"',
    ),
    (
        "ephemeral container names do not repeat any other",
        set_spec(ephemeralContainers=[{"name": "app", "image": "busybox:1"}]),
        'spec.ephemeralContainers[0].name: Duplicate value: "app"',
    ),
    (
        "at least one container",
        set_spec(containers=[]),
        "spec.containers: Required value",
    ),
    ("image is required", set_ctr(image=None), "spec.containers[0].image: Required value"),
    (
        "init container image is required",
        init(image=""),
        "spec.initContainers[0].image: Required value",
    ),
    (
        "pod restartPolicy is one of three",
        set_spec(restartPolicy="Sometimes"),
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always", "OnFailure", "Never"',
    ),
    (
        "an init container's restartPolicy is one of three",
        init(restartPolicy="Sometimes"),
        'spec.initContainers[0].restartPolicy: Unsupported value: "Sometimes": '
        'supported values: "Always", "OnFailure", "Never"',
    ),
    (
        "a container's restartPolicy is one of three",
        set_ctr(restartPolicy="Sometimes"),
        'spec.containers[0].restartPolicy: Unsupported value: "Sometimes": '
        'supported values: "Always", "OnFailure", "Never"',
    ),
    (
        "restart rules need the container's own restartPolicy",
        set_ctr(restartPolicyRules=[RESTART_42]),
        "spec.containers[0].restartPolicy: Required value: "
        "must specify restartPolicy when restart rules are used",
    ),
    (
        "an init container's restart rules need its own restartPolicy",
        init(restartPolicyRules=[RESTART_42]),
        "spec.initContainers[0].restartPolicy: Required value: "
        "must specify restartPolicy when restart rules are used",
    ),
    (
        "a restart rule's action is Restart",
        set_ctr(restartPolicy="Never", restartPolicyRules=[{**RESTART_42, "action": "Stop"}]),
        'spec.containers[0].restartPolicyRules[0].action: Unsupported value: "Stop": '
        'supported values: "Restart", "RestartAllContainers"',
    ),
    (
        "a restart rule needs exit codes",
        set_ctr(restartPolicy="Never", restartPolicyRules=[{"action": "Restart"}]),
        "spec.containers[0].restartPolicyRules[0].exitCodes: Required value: must be specified",
    ),
    (
        "a restart rule's operator is In or NotIn",
        set_ctr(
            restartPolicy="Never",
            restartPolicyRules=[{"action": "Restart", "exitCodes": {"operator": "Equals"}}],
        ),
        "spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "
        '"Equals": supported values: "In", "NotIn"',
    ),
    (
        "at most 20 restart rules",
        set_ctr(restartPolicy="Never", restartPolicyRules=[RESTART_42] * 21),
        "spec.containers[0].restartPolicyRules: Too many: 21: must have at most 20 items",
    ),
    (
        "at most 255 exit codes in a rule",
        set_ctr(
            restartPolicy="Never",
            restartPolicyRules=[
                {"action": "Restart", "exitCodes": {"operator": "In", "values": list(range(256))}}
            ],
        ),
        "spec.containers[0].restartPolicyRules[0].exitCodes.values: Too many: 256: "
        "must have at most 255 items",
    ),
    (
        "dnsPolicy is one of four",
        set_spec(dnsPolicy="Cluster"),
        'spec.dnsPolicy: Unsupported value: "Cluster": supported values: '
        '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"',
    ),
    (
        "imagePullPolicy is one of three",
        set_ctr(imagePullPolicy="Sometimes"),
        'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always", "IfNotPresent", "Never"',
    ),
    (
        "terminationMessagePolicy is one of two",
        set_ctr(terminationMessagePolicy="Stdout"),
        'spec.containers[0].terminationMessagePolicy: Unsupported value: "Stdout": '
        'supported values: "File", "FallbackToLogsOnError"',
    ),
    (
        "containerPort is between 1 and 65535",
        lambda d: add_container(d, ports=[{"containerPort": 70000}]),
        "spec.containers[1].ports[0].containerPort: Invalid value: 70000: "
        "must be between 1 and 65535, inclusive",
    ),
    (
        "containerPort is required",
        set_ctr(ports=[{"name": "http"}]),
        "spec.containers[0].ports[0].containerPort: Required value",
    ),
    (
        "hostPort is between 1 and 65535",
        set_ctr(ports=[{"containerPort": 80, "hostPort": -1}]),
        "spec.containers[0].ports[0].hostPort: Invalid value: -1: "
        "must be between 1 and 65535, inclusive",
    ),
    (
        "port names are unique",
        set_ctr(
            ports=[{"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81}]
        ),
        'spec.containers[0].ports[1].name: Duplicate value: "http"',
    ),
    (
        "port names at most 15 characters",
        set_ctr(ports=[{"name": "a-very-long-port-name", "containerPort": 80}]),
        'spec.containers[0].ports[0].name: Invalid value: "a-very-long-port-name": '
        "must be no more than 15 characters",
    ),
    (
        "port names have no double hyphen",
        set_ctr(ports=[{"name": "web--1", "containerPort": 80}]),
        'spec.containers[0].ports[0].name: Invalid value: "web--1": '
        "must not contain consecutive hyphens",
    ),
    (
        "port names have a letter",
        set_ctr(ports=[{"name": "8080", "containerPort": 80}]),
        'spec.containers[0].ports[0].name: Invalid value: "8080": '
        "must contain at least one letter (a-z)",
    ),
    (
        "port names are lower case",
        set_ctr(ports=[{"name": "Web", "containerPort": 80}]),
        'spec.containers[0].ports[0].name: Invalid value: "Web": '
        "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
    ),
    (
        "port protocol is TCP, UDP or SCTP",
        set_ctr(ports=[{"containerPort": 80, "protocol": "ICMP"}]),
        'spec.containers[0].ports[0].protocol: Unsupported value: "ICMP": '
        'supported values: "SCTP", "TCP", "UDP"',
    ),
    (
        "host ports do not collide across containers",
        lambda d: (
            ctr(d).update(ports=[{"containerPort": 80, "hostPort": 8080}]),
            add_container(d, ports=[{"containerPort": 81, "hostPort": 8080}]),
        ),
        'spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"',
    ),
    (
        "hostPort equals containerPort under hostNetwork",
        lambda d: (
            d["spec"].update(hostNetwork=True),
            ctr(d).update(ports=[{"containerPort": 80, "hostPort": 8080}]),
        ),
        "spec.containers[0].ports[0].hostPort: Invalid value: 8080: "
        "must match `containerPort` when `hostNetwork` is true",
    ),
    (
        "volume names are DNS-1123 labels",
        set_spec(volumes=[{"name": "Data", "emptyDir": {}}]),
        f'spec.volumes[0].name: Invalid value: "Data": {LABEL_MSG}',
    ),
    (
        "volume names are unique",
        set_spec(volumes=[{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]),
        'spec.volumes[1].name: Duplicate value: "data"',
    ),
    (
        "a volume has one type",
        set_spec(volumes=[{"name": "data", "emptyDir": {}, "hostPath": {"path": "/x"}}]),
        "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
    ),
    (
        "hostPath type is a known one",
        set_spec(volumes=[{"name": "data", "hostPath": {"path": "/x", "type": "Dir"}}]),
        'spec.volumes[0].hostPath.type: Unsupported value: "Dir": supported values: "", '
        '"BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", '
        '"FileOrCreate", "Socket"',
    ),
    (
        "a volume mount names a volume",
        set_ctr(volumeMounts=[{"name": "data", "mountPath": "/data"}]),
        'spec.containers[0].volumeMounts[0].name: Not found: "data"',
    ),
    (
        "a mount of an invalid volume is not found either",
        lambda d: (
            d["spec"].update(volumes=[{"name": "Data", "emptyDir": {}}]),
            ctr(d).update(volumeMounts=[{"name": "Data", "mountPath": "/data"}]),
        ),
        'spec.containers[0].volumeMounts[0].name: Not found: "Data"',
    ),
    (
        "a volume mount has a path",
        lambda d: (
            d["spec"].update(volumes=[{"name": "data"}]),
            ctr(d).update(volumeMounts=[{"name": "data"}]),
        ),
        "spec.containers[0].volumeMounts[0].mountPath: Required value",
    ),
    (
        "mount paths are unique in a container",
        lambda d: (
            d["spec"].update(volumes=[{"name": "a"}, {"name": "b"}]),
            ctr(d).update(
                volumeMounts=[{"name": "a", "mountPath": "/d"}, {"name": "b", "mountPath": "/d"}]
            ),
        ),
        'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/d": must be unique',
    ),
    (
        "env var names follow the C-identifier-like rule",
        set_ctr(env=[{"name": "1ST", "value": "x"}]),
        f'spec.containers[0].env[0].name: Invalid value: "1ST": {ENV_MSG}',
    ),
    (
        "env var names are required",
        set_ctr(env=[{"value": "x"}]),
        "spec.containers[0].env[0].name: Required value",
    ),
    (
        "env var name is not '..'",
        set_ctr(env=[{"name": "..", "value": "x"}]),
        "spec.containers[0].env[0].name: Invalid value: \"..\": must not be '..'",
    ),
    (
        "env value and valueFrom exclude each other",
        set_ctr(
            env=[
                {
                    "name": "A",
                    "value": "x",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                }
            ]
        ),
        'spec.containers[0].env[0].valueFrom: Invalid value: "": '
        "may not be specified when `value` is not empty",
    ),
    (
        "env valueFrom names a source",
        set_ctr(env=[{"name": "A", "valueFrom": {}}]),
        'spec.containers[0].env[0].valueFrom: Invalid value: "": must specify one of: '
        "`fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
    ),
    (
        "env fieldRef paths are the supported ones",
        set_ctr(env=[{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.hostname"}}}]),
        "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "
        '"spec.hostname": supported values: "metadata.name", "metadata.namespace", '
        '"metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", '
        '"status.hostIPs", "status.podIP", "status.podIPs"',
    ),
    (
        "env configMapKeyRef has a key",
        set_ctr(env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm"}}}]),
        "spec.containers[0].env[0].valueFrom.configMapKeyRef.key: Required value",
    ),
    (
        "quantities follow the Kubernetes grammar",
        set_ctr(resources={"limits": {"cpu": "one"}}),
        f'spec.containers[0].resources.limits[cpu]: Invalid value: "one": {QUANTITY_MSG}',
    ),
    (
        "requests do not exceed limits (canonical quantities)",
        set_ctr(resources={"limits": {"memory": "1Gi"}, "requests": {"memory": "1.5Gi"}}),
        'spec.containers[0].resources.requests: Invalid value: "1536Mi": '
        "must be less than or equal to memory limit of 1Gi",
    ),
    (
        "cpu requests compare across notations",
        set_ctr(resources={"limits": {"cpu": "500m"}, "requests": {"cpu": 1}}),
        'spec.containers[0].resources.requests: Invalid value: "1": '
        "must be less than or equal to cpu limit of 500m",
    ),
    (
        "quantities are not negative",
        set_ctr(resources={"requests": {"memory": "-1Mi"}}),
        'spec.containers[0].resources.requests[memory]: Invalid value: "-1Mi": '
        "must be greater than or equal to 0",
    ),
    (
        "resource names are standard or fully qualified",
        set_ctr(resources={"limits": {"gpu": "1"}}),
        'spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": '
        "must be a standard resource for containers",
    ),
    (
        "extended resources are not overcommitted",
        set_ctr(
            resources={"limits": {"example.com/dongle": 2}, "requests": {"example.com/dongle": 1}}
        ),
        'spec.containers[0].resources.requests: Invalid value: "1": '
        "must be equal to example.com/dongle limit of 2",
    ),
    (
        "extended resources are whole numbers",
        set_ctr(resources={"limits": {"example.com/dongle": "500m"}}),
        'spec.containers[0].resources.limits[example.com/dongle]: Invalid value: "500m": '
        "must be an integer",
    ),
    (
        "a probe has a handler",
        set_ctr(livenessProbe={"periodSeconds": 5}),
        "spec.containers[0].livenessProbe: Required value: must specify a handler type",
    ),
    (
        "a probe has only one handler",
        set_ctr(readinessProbe={"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}),
        "spec.containers[0].readinessProbe.tcpSocket: Forbidden: "
        "may not specify more than 1 handler type",
    ),
    (
        "an exec handler has a command",
        set_ctr(livenessProbe={"exec": {}}),
        "spec.containers[0].livenessProbe.exec.command: Required value",
    ),
    (
        "liveness successThreshold is 1",
        set_ctr(livenessProbe={**EXEC, "successThreshold": 3}),
        "spec.containers[0].livenessProbe.successThreshold: Invalid value: 3: must be 1",
    ),
    (
        "startup successThreshold is 1",
        set_ctr(startupProbe={**EXEC, "successThreshold": 2}),
        "spec.containers[0].startupProbe.successThreshold: Invalid value: 2: must be 1",
    ),
    (
        "probe timings are not negative",
        set_ctr(readinessProbe={**EXEC, "periodSeconds": -1}),
        "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -1: "
        "must be greater than or equal to 0",
    ),
    (
        "probe ports are valid port numbers",
        set_ctr(livenessProbe={"httpGet": {"port": 0}}),
        "spec.containers[0].livenessProbe.httpGet.port: Invalid value: 0: "
        "must be between 1 and 65535, inclusive",
    ),
    (
        "a lifecycle hook has a handler",
        set_ctr(lifecycle={"postStart": {}}),
        "spec.containers[0].lifecycle.postStart: Required value: must specify a handler type",
    ),
    (
        "a lifecycle hook has only one handler",
        set_ctr(lifecycle={"preStop": {"exec": {"command": ["x"]}, "sleep": {"seconds": 1}}}),
        "spec.containers[0].lifecycle.preStop.sleep: Forbidden: "
        "may not specify more than 1 handler type",
    ),
    (
        "a sleep hook fits in the grace period",
        set_ctr(lifecycle={"preStop": {"sleep": {"seconds": 60}}}),
        "spec.containers[0].lifecycle.preStop.sleep: Invalid value: 60: "
        "must be non-negative and less than terminationGracePeriodSeconds (30)",
    ),
    (
        "no readiness probe on a plain init container",
        init(readinessProbe=EXEC),
        f"spec.initContainers[0].readinessProbe: {INIT_FORBIDDEN}",
    ),
    (
        "no liveness probe on a plain init container",
        init(livenessProbe=EXEC),
        f"spec.initContainers[0].livenessProbe: {INIT_FORBIDDEN}",
    ),
    (
        "no startup probe on a plain init container",
        init(startupProbe=EXEC),
        f"spec.initContainers[0].startupProbe: {INIT_FORBIDDEN}",
    ),
    (
        "no lifecycle on a plain init container",
        init(lifecycle={"preStop": EXEC}),
        f"spec.initContainers[0].lifecycle: {INIT_FORBIDDEN}",
    ),
    (
        "sidecar probes are validated like regular ones",
        init(restartPolicy="Always", livenessProbe={**EXEC, "successThreshold": 2}),
        "spec.initContainers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
    ),
    (
        "ephemeral containers have no ports",
        set_spec(
            ephemeralContainers=[
                {"name": "debug", "image": "busybox:1", "ports": [{"containerPort": 80}]}
            ]
        ),
        "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
    ),
    (
        "ephemeral containers target an existing container",
        set_spec(
            ephemeralContainers=[
                {"name": "debug", "image": "busybox:1", "targetContainerName": "nope"}
            ]
        ),
        'spec.ephemeralContainers[0].targetContainerName: Not found: "nope"',
    ),
    (
        "activeDeadlineSeconds is positive",
        set_spec(activeDeadlineSeconds=0),
        "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
    ),
    (
        "activeDeadlineSeconds is not negative",
        set_spec(activeDeadlineSeconds=-5),
        "spec.activeDeadlineSeconds: Invalid value: -5: "
        "must be between 1 and 2147483647, inclusive",
    ),
    (
        "dnsPolicy None needs a dnsConfig",
        set_spec(dnsPolicy="None"),
        "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",
    ),
    (
        "hostname is a DNS-1123 label",
        set_spec(hostname="my.host"),
        'spec.hostname: Invalid value: "my.host": must not contain dots',
    ),
    (
        "label values follow the label rule",
        lambda d: d["metadata"].update(labels={"app": "-web"}),
        'metadata.labels: Invalid value: "-web": a valid label must be an empty string or '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
        "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ),
    (
        "runAsUser is a valid user id",
        set_ctr(securityContext={"runAsUser": -1}),
        "spec.containers[0].securityContext.runAsUser: Invalid value: -1: "
        "must be between 0 and 2147483647, inclusive",
    ),
    (
        "a token lives at least ten minutes",
        set_spec(
            volumes=[
                {
                    "name": "t",
                    "projected": {
                        "sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 60}}]
                    },
                }
            ]
        ),
        "spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: "
        "Invalid value: 60: may not specify a duration less than 10 minutes",
    ),
    (
        "a token lives at most 2^32 seconds",
        set_spec(
            volumes=[
                {
                    "name": "t",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"path": "t", "expirationSeconds": 2**33}}
                        ]
                    },
                }
            ]
        ),
        "spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: "
        "Invalid value: 8589934592: may not specify a duration larger than 2^32 seconds",
    ),
    (
        "a token has a path",
        set_spec(volumes=[{"name": "t", "projected": {"sources": [{"serviceAccountToken": {}}]}}]),
        "spec.volumes[0].projected.path: Required value",
    ),
    (
        "seLinuxChangePolicy is Recursive or MountOption",
        set_spec(securityContext={"seLinuxChangePolicy": "Never"}),
        'spec.securityContext.seLinuxChangePolicy: Unsupported value: "Never": '
        'supported values: "MountOption", "Recursive"',
    ),
    (
        "an unmasked /proc needs hostUsers false",
        set_ctr(securityContext={"procMount": "Unmasked"}),
        'spec.containers[0].securityContext.procMount: Invalid value: "Unmasked": '
        "`hostUsers` must be false to use `Unmasked`",
    ),
]


@pytest.mark.parametrize(("rule", "change", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rule_is_reported_in_the_api_servers_words(
    rule: str, change: Callable[[Doc], object], expected: str
) -> None:
    assert expected in errors_of(edit(change))


def test_the_base_pod_is_valid() -> None:
    assert errors_of(base_pod()) == []


@pytest.mark.parametrize(
    "quantity", ["100m", "1Gi", "1e3", "0.5", "1.5", "2", "512Mi", "1k", "1E", 3, 0.25]
)
def test_quantities_in_the_kubernetes_grammar_are_accepted(quantity: object) -> None:
    doc = edit(set_ctr(resources={"limits": {"cpu": quantity}}))
    assert errors_of(doc) == []


def test_every_error_is_collected_not_only_the_first() -> None:
    doc = base_pod()
    ctr(doc).update(image=None, ports=[{"containerPort": 70000}])
    doc["spec"]["restartPolicy"] = "Sometimes"
    add_container(doc, name="app")
    errors = errors_of(doc)
    assert errors == [
        "spec.containers[0].image: Required value",
        "spec.containers[0].ports[0].containerPort: Invalid value: 70000: "
        "must be between 1 and 65535, inclusive",
        'spec.containers[1].name: Duplicate value: "app"',
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always", "OnFailure", "Never"',
    ]


def test_a_readiness_probe_on_a_sidecar_is_allowed() -> None:
    doc = edit(init(restartPolicy="Always", readinessProbe=EXEC, startupProbe=EXEC))
    assert errors_of(doc) == []


def test_readiness_success_threshold_may_exceed_one() -> None:
    assert errors_of(edit(set_ctr(readinessProbe={**EXEC, "successThreshold": 3}))) == []


def test_an_unmasked_proc_mount_is_valid_with_host_users_false() -> None:
    doc = edit(set_ctr(securityContext={"procMount": "Unmasked"}))
    doc["spec"]["hostUsers"] = False
    assert errors_of(doc) == []


def test_validation_does_not_mutate_between_runs() -> None:
    doc = edit(set_ctr(ports=[{"containerPort": 70000}]))
    first = errors_of(copy.deepcopy(doc))
    assert errors_of(doc) == first


@pytest.mark.parametrize(
    "change",
    [
        lambda d: set_ctr(restartPolicy="OnFailure")(d),
        lambda d: set_ctr(restartPolicy="Never", restartPolicyRules=[RESTART_42])(d),
        lambda d: init(restartPolicy="Never", restartPolicyRules=[RESTART_42])(d),
        lambda d: set_ctr(
            restartPolicy="Never",
            restartPolicyRules=[{"action": "Restart", "exitCodes": {"operator": "NotIn"}}],
        )(d),
    ],
    ids=[
        "a container with its own policy",
        "a container with an exit-code rule",
        "an init container with its own policy and a rule",
        "a rule with no values",
    ],
)
def test_restart_rules_the_api_server_accepts_are_valid(change: Callable[[Doc], object]) -> None:
    assert errors_of(edit(change)) == []


def test_restart_all_containers_is_valid_as_the_node_carries_it_out() -> None:
    doc = edit(
        set_ctr(
            restartPolicy="Never",
            restartPolicyRules=[{**RESTART_42, "action": "RestartAllContainers"}],
        )
    )
    assert errors_of(doc) == []


def _gate_off_errors(change: Callable[[Doc], object]) -> list[str]:
    doc = edit(change)
    default_pod(doc)
    pod = cast(Pod, Pod.from_dict(doc))
    return [str(e) for e in validation.validate_pod(pod, restart_all_containers=False)]


def test_restart_all_containers_is_refused_with_its_gate_off() -> None:
    change = set_ctr(
        restartPolicy="Never",
        restartPolicyRules=[{**RESTART_42, "action": "RestartAllContainers"}],
    )
    assert _gate_off_errors(change) == [
        "spec.containers[0].restartPolicyRules[0].action: Unsupported value: "
        '"RestartAllContainers": supported values: "Restart"'
    ]


def test_a_sidecar_takes_no_restart_rules_with_the_gate_off() -> None:
    change = init(restartPolicy="Always", restartPolicyRules=[RESTART_42])
    assert _gate_off_errors(change) == [
        "spec.initContainers[0].restartPolicyRules: Forbidden: "
        "may not be set for init containers with restartPolicy=Always"
    ]


def test_an_ephemeral_container_takes_no_restart_rules() -> None:
    doc = base_pod()
    doc["spec"]["ephemeralContainers"] = [
        {"name": "debug", "image": "busybox:1", "restartPolicyRules": [RESTART_42]}
    ]
    assert (
        "spec.ephemeralContainers[0].restartPolicyRules: Forbidden: "
        "cannot be set for an Ephemeral Container"
    ) in errors_of(doc)
