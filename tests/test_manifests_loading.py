"""Loading: sources, documents, kinds, strict fields, defaults, identity and warnings."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from lightkube.models.core_v1 import ConfigMap, Container, Pod

from asynckubelet.errors import ManifestError
from asynckubelet.manifests import (
    inspect_manifests,
    inspect_manifests_text,
    load_manifests,
    load_manifests_text,
    pod_uid,
)
from asynckubelet.manifests.defaults import image_pull_policy
from asynckubelet.manifests.strict import schema_of

EXAMPLES = Path(__file__).resolve().parent / "data" / "examples"

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: nginx:1.25
"""


def only_pod(text: str, **kwargs: Any) -> Pod:
    manifests = load_manifests_text(text, node_name="node-a", **kwargs)
    assert len(manifests.pods) == 1
    return manifests.pods[0]


def pod_dict(text: str = POD, **kwargs: Any) -> dict[str, Any]:
    return only_pod(text, **kwargs).to_dict()


# --- sources ------------------------------------------------------------------------------


def test_every_example_in_the_examples_directory_loads_without_errors() -> None:
    report = inspect_manifests(EXAMPLES, node_name="node-a")
    assert report.errors == ()
    names = {p.metadata.name for p in report.manifests.pods if p.metadata}
    assert {"two-containers", "init-demo", "test-pod", "nginx", "qos-demo"} <= names
    assert {c.metadata.name for c in report.manifests.configmaps if c.metadata} == {
        "special-config",
        "env-config",
    }
    assert report.manifests.secret_data[("default", "test-secret")] == {
        "username": b"my-app",
        "password": b"39528$vdg7Jb",
    }


def test_example_warnings_say_what_is_not_honoured() -> None:
    report = inspect_manifests(EXAMPLES, node_name="node-a")
    for warning in report.warnings:
        if warning.reason == "Duplicate value":
            assert "this later definition replaces it" in warning.detail
        else:
            assert "not honoured on this node" in warning.detail, warning
    fields = {(w.source.rsplit("/", 1)[-1], w.field) for w in report.warnings}
    assert ("pod-with-scheduling-gates.yaml[0]", "spec.schedulingGates") not in fields
    assert (
        "pod-projected-svc-token.yaml[0]",
        "spec.volumes[0].projected.sources[0].serviceAccountToken",
    ) not in fields


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_each_example_file_loads_on_its_own(path: Path) -> None:
    assert inspect_manifests(path, node_name="node-a").errors == ()


def test_a_directory_loads_yaml_yml_and_json_files_only(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(POD)
    (tmp_path / "b.yml").write_text(POD.replace("web", "web-b"))
    (tmp_path / "c.json").write_text(json.dumps({**_pod_doc(), "metadata": {"name": "web-c"}}))
    (tmp_path / "notes.txt").write_text("not a manifest")
    manifests = load_manifests(tmp_path, node_name="n")
    assert sorted(str(p.metadata.name) for p in manifests.pods if p.metadata) == [
        "web",
        "web-b",
        "web-c",
    ]


def test_a_sequence_of_sources_is_loaded_in_order(tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text(POD)
    (tmp_path / "two.yaml").write_text(POD.replace("web", "api"))
    manifests = load_manifests([tmp_path / "one.yaml", str(tmp_path / "two.yaml")], node_name="n")
    assert [p.metadata.name for p in manifests.pods if p.metadata] == ["web", "api"]


def test_dash_reads_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(POD))
    manifests = load_manifests("-", node_name="n")
    assert manifests.pods[0].metadata is not None
    assert manifests.pods[0].metadata.name == "web"


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    report = inspect_manifests(tmp_path / "nope.yaml", node_name="n")
    assert [(e.field, e.reason, e.source) for e in report.errors] == [
        ("<document>", "Not found", str(tmp_path / "nope.yaml"))
    ]


# --- documents ----------------------------------------------------------------------------


def _pod_doc(name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]},
    }


def test_multi_document_yaml_yields_every_object() -> None:
    text = POD + "---\n" + POD.replace("web", "api") + "---\n# only a comment\n"
    manifests = load_manifests_text(text, node_name="n")
    assert [p.metadata.name for p in manifests.pods if p.metadata] == ["web", "api"]


def test_a_list_kind_is_expanded() -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [_pod_doc("a"), _pod_doc("b")]}
    manifests = load_manifests_text(json.dumps(doc), node_name="n")
    assert [p.metadata.name for p in manifests.pods if p.metadata] == ["a", "b"]


def test_errors_in_list_items_name_the_item() -> None:
    bad = _pod_doc("b")
    bad["spec"]["containers"][0]["image"] = ""
    doc = {"apiVersion": "v1", "kind": "List", "items": [_pod_doc("a"), bad]}
    report = inspect_manifests_text(json.dumps(doc), source_name="list.yaml", node_name="n")
    assert [(e.source, str(e)) for e in report.errors] == [
        ("list.yaml[0]", "items[1].spec.containers[0].image: Required value")
    ]


def test_an_unsupported_kind_names_file_document_and_kind() -> None:
    text = POD + "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: d}\n"
    report = inspect_manifests_text(text, source_name="app.yaml", node_name="n")
    assert [(e.source, str(e)) for e in report.errors] == [
        (
            "app.yaml[1]",
            'kind: Unsupported value: "Ingress": supported values: '
            '"ConfigMap", "ControllerRevision", "CronJob", "DaemonSet", "Deployment", "Job", '
            '"List", "Namespace", "Pod", "ReplicaSet", "Secret", "Service", "ServiceAccount", '
            '"StatefulSet"',
        )
    ]


def test_a_wrong_api_version_is_an_error() -> None:
    report = inspect_manifests_text(POD.replace("v1", "v2"), node_name="n")
    assert [str(e) for e in report.errors] == [
        'apiVersion: Unsupported value: "v2": supported values: "v1"'
    ]


def test_a_yaml_syntax_error_names_file_line_and_column() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [web\n"
    report = inspect_manifests_text(text, source_name="pod.yaml", node_name="n")
    (error,) = report.errors
    assert error.source == "pod.yaml"
    assert error.field == "<document>"
    assert error.detail.startswith("line 5, column 1: ")


def test_a_key_given_twice_is_an_error_not_last_wins() -> None:
    text = POD + "    image: nginx:1.26\n"
    (error,) = inspect_manifests_text(text, node_name="n").errors
    assert 'mapping key "image" already defined at line 8' in error.detail


def test_flow_style_with_trailing_commas_is_accepted() -> None:
    text = (
        '{apiVersion: "v1", kind: "Pod", metadata: {name: "x",},'
        ' spec: {containers: [{name: "a", image: "b:1",}],},}'
    )
    assert only_pod(text).metadata is not None


def test_yaml_timestamps_stay_strings() -> None:
    text = POD + "    env: [{name: DAY, value: 2024-01-01}]\n"
    env = pod_dict(text)["spec"]["containers"][0]["env"]
    assert env == [{"name": "DAY", "value": "2024-01-01"}]


def test_load_raises_one_manifest_error_carrying_every_field_error() -> None:
    text = POD.replace("nginx:1.25", "''") + "---\n" + POD.replace("name: app", "name: App")
    with pytest.raises(ManifestError) as info:
        load_manifests_text(text, source_name="two.yaml", node_name="n")
    assert [(e.source, e.field) for e in info.value.errors] == [
        ("two.yaml[0]", "spec.containers[0].image"),
        ("two.yaml[1]", "spec.containers[0].name"),
    ]
    assert "two.yaml[1]: spec.containers[0].name: Invalid value" in str(info.value)


# --- strict fields ------------------------------------------------------------------------


def test_an_unknown_field_is_an_error_with_its_full_path() -> None:
    text = POD.replace("image:", "imagee:")
    errors = [str(e) for e in inspect_manifests_text(text, node_name="n").errors]
    path = "spec.containers[0].imagee"
    assert f'{path}: strict decoding error: unknown field "{path}"' in errors


def test_lenient_turns_unknown_fields_into_warnings() -> None:
    text = POD + "    colour: blue\n"
    manifests = load_manifests_text(text, lenient=True, node_name="n")
    assert len(manifests.pods) == 1
    assert [str(w) for w in manifests.warnings] == [
        'spec.containers[0].colour: Ignored: unknown field "spec.containers[0].colour"'
    ]


def test_a_wrongly_typed_value_is_an_error_with_its_path() -> None:
    text = POD + "    ports: [{containerPort: http}]\n"
    assert [str(e) for e in inspect_manifests_text(text, node_name="n").errors] == [
        'spec.containers[0].ports[0].containerPort: Invalid value: "http": must be an integer'
    ]


def test_known_fields_come_from_lightkube_with_json_names() -> None:
    from lightkube.models.apiextensions_v1 import JSONSchemaProps
    from lightkube.models.meta_v1 import ListMeta

    assert "continue" in schema_of(ListMeta)
    assert "continue_" not in schema_of(ListMeta)
    assert {"not", "$ref", "x-kubernetes-int-or-string"} <= set(schema_of(JSONSchemaProps))
    assert "imagePullPolicy" in schema_of(Container)


# --- defaults -----------------------------------------------------------------------------


def test_pod_defaults_match_set_defaults_pod() -> None:
    d = pod_dict()
    assert d["metadata"]["namespace"] == "default"
    spec = d["spec"]
    assert {k: spec[k] for k in spec if k != "containers"} == {
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
    }
    assert spec["containers"][0] == {
        "name": "app",
        "image": "nginx:1.25",
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("registry.k8s.io/pause:3.9", "IfNotPresent"),
        ("localhost:5000/app", "Always"),
        ("localhost:5000/app:v2", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
        ("nginx:latest@sha256:" + "a" * 64, "Always"),
    ],
)
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


def test_an_explicit_pull_policy_is_kept() -> None:
    text = POD.replace("nginx:1.25", "nginx") + "    imagePullPolicy: IfNotPresent\n"
    assert pod_dict(text)["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_probes_ports_and_handlers_get_their_defaults() -> None:
    text = POD + (
        "    ports: [{containerPort: 80}]\n"
        "    livenessProbe: {httpGet: {port: 80}}\n"
        "    readinessProbe: {tcpSocket: {port: 80}, periodSeconds: 3}\n"
        "    lifecycle: {preStop: {httpGet: {port: 80}}}\n"
    )
    c = pod_dict(text)["spec"]["containers"][0]
    assert c["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert c["livenessProbe"] == {
        "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
        "failureThreshold": 3,
        "periodSeconds": 10,
        "successThreshold": 1,
        "timeoutSeconds": 1,
    }
    assert c["readinessProbe"]["periodSeconds"] == 3
    assert c["lifecycle"]["preStop"]["httpGet"] == {"port": 80, "path": "/", "scheme": "HTTP"}


def test_volume_defaults() -> None:
    text = POD + (
        "  volumes:\n"
        "  - name: scratch\n"
        "  - {name: cfg, configMap: {name: c}}\n"
        "  - {name: sec, secret: {secretName: s}}\n"
        "  - {name: host, hostPath: {path: /tmp}}\n"
    )
    volumes = pod_dict(text, pod_security="privileged")["spec"]["volumes"]
    assert volumes == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "cfg", "configMap": {"defaultMode": 420, "name": "c"}},
        {"name": "sec", "secret": {"defaultMode": 420, "secretName": "s"}},
        {"name": "host", "hostPath": {"path": "/tmp", "type": ""}},
    ]


def test_requests_default_to_limits() -> None:
    text = POD + "    resources: {limits: {cpu: 500m, memory: 1Gi}, requests: {cpu: 100m}}\n"
    resources = pod_dict(text)["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "100m", "memory": "1Gi"}


def test_init_and_ephemeral_containers_are_defaulted_too() -> None:
    text = POD + (
        "  initContainers: [{name: init, image: busybox, ports: [{containerPort: 1}]}]\n"
        "  ephemeralContainers: [{name: debug, image: busybox:1}]\n"
    )
    spec = pod_dict(text)["spec"]
    assert spec["initContainers"][0]["imagePullPolicy"] == "Always"
    assert spec["initContainers"][0]["ports"][0]["protocol"] == "TCP"
    assert spec["ephemeralContainers"][0]["terminationMessagePolicy"] == "File"


def test_a_user_value_is_never_replaced_by_a_default() -> None:
    text = POD + "  restartPolicy: Never\n  dnsPolicy: Default\n"
    text += "  terminationGracePeriodSeconds: 5\n"
    spec = pod_dict(text)["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["terminationGracePeriodSeconds"]) == (
        "Never",
        "Default",
        5,
    )


# --- identity -----------------------------------------------------------------------------


def test_the_uid_is_stable_across_loads() -> None:
    first = only_pod(POD).metadata
    second = only_pod(POD.replace("nginx:1.25", "nginx:1.26")).metadata
    assert first is not None
    assert second is not None
    assert first.uid == second.uid == pod_uid(node_name="node-a", namespace="default", name="web")


def test_the_uid_differs_per_node_namespace_and_name() -> None:
    uids = {
        pod_uid(node_name="a", namespace="default", name="web"),
        pod_uid(node_name="b", namespace="default", name="web"),
        pod_uid(node_name="a", namespace="prod", name="web"),
        pod_uid(node_name="a", namespace="default", name="api"),
    }
    assert len(uids) == 4


def test_a_given_uuid_is_kept() -> None:
    uid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    text = POD.replace("name: web", f"name: web\n  uid: '{uid}'")
    meta = only_pod(text).metadata
    assert meta is not None
    assert meta.uid == uid


# --- other kinds --------------------------------------------------------------------------


def test_secret_data_is_decoded_and_string_data_merged() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds"},
            "data": {"user": base64.b64encode(b"admin").decode(), "pw": "b2xk"},
            "stringData": {"pw": "new"},
        }
    )
    manifests = load_manifests_text(text, node_name="n")
    assert manifests.secret_data[("default", "creds")] == {"user": b"admin", "pw": b"new"}
    (secret,) = manifests.secrets
    assert secret.type == "Opaque"
    assert secret.stringData is None
    assert secret.data == {"user": "YWRtaW4=", "pw": "bmV3"}


def test_bad_base64_in_a_secret_is_an_error_without_echoing_it() -> None:
    text = json.dumps(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "ab$d"}}
    )
    assert [str(e) for e in inspect_manifests_text(text, node_name="n").errors] == [
        "data[k]: Invalid value: illegal base64 data at input byte 2"
    ]


def test_configmap_keys_are_validated() -> None:
    text = json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a b": "x"}}
    )
    (error,) = inspect_manifests_text(text, node_name="n").errors
    assert str(error).startswith(
        'data[a b]: Invalid value: "a b": a valid config key must consist of alphanumeric '
        "characters, '-', '_' or '.'"
    )


def test_bad_base64_in_configmap_binary_data_is_an_error() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c"},
            "binaryData": {"k": "ab$d"},
        }
    )
    assert [str(e) for e in inspect_manifests_text(text, node_name="n").errors] == [
        "binaryData[k]: Invalid value: illegal base64 data at input byte 2"
    ]


def test_a_key_in_both_data_and_binary_data_is_refused_as_the_api_server_does() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c"},
            "data": {"k": "v"},
            "binaryData": {"k": "/wD+AQ=="},
        }
    )
    assert [str(e) for e in inspect_manifests_text(text, node_name="n").errors] == [
        'data[k]: Invalid value: "k": duplicate of key present in binaryData'
    ]


def test_configmaps_are_lightkube_objects_in_their_namespace() -> None:
    text = json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    )
    (cm,) = load_manifests_text(text, node_name="n").configmaps
    assert isinstance(cm, ConfigMap)
    assert cm.metadata is not None
    assert cm.metadata.namespace == "default"


# --- warnings -----------------------------------------------------------------------------


def test_each_unhonoured_field_gives_one_warning() -> None:
    text = POD + (
        "  nodeSelector: {disk: ssd}\n"
        "  tolerations: [{key: k, operator: Exists}]\n"
        "  serviceAccountName: builder\n"
        "  priorityClassName: high\n"
        "  affinity: {nodeAffinity: {}}\n"
        "  topologySpreadConstraints:\n"
        "  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}\n"
    )
    warnings = load_manifests_text(text, node_name="n").warnings
    assert [w.field for w in warnings] == [
        "spec.nodeSelector",
        "spec.affinity",
        "spec.tolerations",
        "spec.topologySpreadConstraints",
        "spec.priorityClassName",
        "spec.serviceAccountName",
    ]
    assert all("not honoured on this node" in str(w) for w in warnings)


def test_host_users_false_loads_without_a_warning_for_admission_to_refuse() -> None:
    loaded = load_manifests_text(POD + "  hostUsers: false\n", node_name="n")
    assert loaded.warnings == ()
    assert len(loaded.pods) == 1


def test_binary_data_counts_its_decoded_bytes_against_the_size_limit() -> None:
    blob = base64.b64encode(b"\0" * 900_000).decode()
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c"},
            "binaryData": {"b": blob},
        }
    )
    assert inspect_manifests_text(text, node_name="n").errors == ()


def test_a_later_pod_with_the_same_name_replaces_the_earlier_with_a_warning() -> None:
    manifests = load_manifests_text(
        POD + "---\n" + POD.replace("nginx:1.25", "nginx:1.26"), source_name="f", node_name="n"
    )
    (pod,) = manifests.pods
    assert pod.spec is not None
    assert pod.spec.containers[0].image == "nginx:1.26"
    (warning,) = manifests.warnings
    assert warning.source == "f[1]"
    assert "also defined in f[0]" in warning.detail


def test_a_folders_manifest_files_are_read_in_lexical_order_and_with_recursive_its_tree(
    tmp_path: Path,
) -> None:
    from asynckubelet.manifests import manifest_files, read_sources

    for name in ("b.yaml", "a/z.yml", "a/deeper/c.json", "c.txt", "m/x.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "link").symlink_to(tmp_path / "m")
    assert [p.relative_to(tmp_path).as_posix() for p in manifest_files(tmp_path)] == ["b.yaml"]
    assert [
        p.relative_to(tmp_path).as_posix() for p in manifest_files(tmp_path, recursive=True)
    ] == ["a/deeper/c.json", "a/z.yml", "b.yaml", "m/x.yaml"]
    assert [name for name, _ in read_sources(tmp_path, recursive=True)] == [
        str(tmp_path / "a/deeper/c.json"),
        str(tmp_path / "a/z.yml"),
        str(tmp_path / "b.yaml"),
        str(tmp_path / "m/x.yaml"),
    ]
