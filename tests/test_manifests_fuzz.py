"""Generated and mutated manifests: nothing but ManifestError escapes, every error has a path.

Real manifests are taken apart at random (values replaced by any JSON-ish value, keys
dropped or misspelt, lists emptied or doubled) and, in a share of cases, the YAML text itself
is damaged. Whatever comes in, the loader must answer with field errors, never a crash.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asynckubelet.errors import ManifestError
from asynckubelet.manifests import LEVELS, load_manifests_text

EXAMPLES = Path(__file__).resolve().parents[2] / "shared" / "examples"

_SEED_TEXT = """
apiVersion: v1
kind: Pod
metadata: {name: seed, namespace: ns, labels: {app: web}, annotations: {a: b}}
spec:
  hostNetwork: false
  restartPolicy: OnFailure
  activeDeadlineSeconds: 30
  securityContext:
    runAsUser: 1000
    fsGroup: 2000
    sysctls: [{name: kernel.shm_rmid_forced, value: "1"}]
  volumes:
  - {name: data, emptyDir: {sizeLimit: 1Gi}}
  - {name: cfg, configMap: {name: c, items: [{key: k, path: p}]}}
  - {name: host, hostPath: {path: /tmp, type: Directory}}
  - name: proj
    projected:
      sources:
      - {secret: {name: s}}
      - {downwardAPI: {items: [{path: n, fieldRef: {fieldPath: metadata.name}}]}}
  initContainers:
  - name: side
    image: busybox:1
    restartPolicy: Always
    startupProbe: {exec: {command: [test, -f, /x]}, periodSeconds: 2}
    readinessProbe: {grpc: {port: 9000}}
  containers:
  - name: app
    image: nginx:1.25
    ports: [{name: http, containerPort: 80, hostPort: 8080, protocol: TCP}]
    env:
    - {name: A, value: x}
    - {name: B, valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}}
    - {name: C, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
    - {name: D, valueFrom: {secretKeyRef: {name: s, key: k}}}
    envFrom: [{prefix: P_, configMapRef: {name: c}}]
    resources: {limits: {cpu: 500m, memory: 1Gi, example.com/dev: 1}, requests: {cpu: 0.1}}
    volumeMounts: [{name: data, mountPath: /data, subPath: sub}]
    livenessProbe: {httpGet: {path: /healthz, port: http, httpHeaders: [{name: X, value: y}]}}
    lifecycle: {preStop: {sleep: {seconds: 5}}, postStart: {tcpSocket: {port: 80}}}
    securityContext:
      capabilities: {add: [NET_ADMIN], drop: [ALL]}
      allowPrivilegeEscalation: false
  ephemeralContainers: [{name: debug, image: busybox:1, targetContainerName: app}]
---
apiVersion: v1
kind: Secret
metadata: {name: s}
data: {k: dmFsdWU=}
stringData: {other: text}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
data: {k: v}
binaryData: {b: AAEC}
---
apiVersion: v1
kind: Namespace
metadata: {name: ns, labels: {pod-security.kubernetes.io/enforce: privileged}}
"""


def _seeds() -> list[Any]:
    docs = [d for d in yaml.safe_load_all(_SEED_TEXT) if d]
    if EXAMPLES.is_dir():
        for path in sorted(EXAMPLES.glob("*.yaml")):
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


SEEDS = _seeds()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "0", "-1", "1e3", "100m", "Always", "a..b", "UPPER", "x" * 300]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _nodes(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key-or-index) in a document, for picking a mutation site."""
    found: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                found.append((node, key))
                stack.append(value)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                found.append((node, i))
                stack.append(value)
    return found


def _mutate(doc: Any, data: st.DataObject) -> Any:
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        nodes = _nodes(doc)
        if not nodes:
            return data.draw(values)
        parent, key = nodes[data.draw(st.integers(min_value=0, max_value=len(nodes) - 1))]
        op = data.draw(st.sampled_from(["replace", "delete", "rename", "double", "wrap"]))
        if op == "replace":
            parent[key] = data.draw(values)
        elif op == "delete":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[str(key) + data.draw(st.sampled_from(["e", "_", "X", ""]))] = parent.pop(key)
        elif op == "double" and isinstance(parent[key], list):
            parent[key] = parent[key] * 2
        elif op == "wrap":
            parent[key] = [parent[key]]
    return doc


def _damage(text: str, data: st.DataObject) -> str:
    if not text:
        return text
    at = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    insert = data.draw(st.sampled_from(["", ":", "-", "[", "{", "'", '"', "\t", "  ", "\n- "]))
    return text[:at] + insert + text[at + data.draw(st.integers(0, 3)) :]


@settings(
    max_examples=10_000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_any_manifest_yields_field_errors_and_nothing_else(data: st.DataObject) -> None:
    docs = [
        _mutate(copy.deepcopy(data.draw(st.sampled_from(SEEDS))), data)
        for _ in range(data.draw(st.integers(min_value=1, max_value=2)))
    ]
    if data.draw(st.booleans()):
        text = "\n---\n".join(json.dumps(d, default=str) for d in docs)
    else:
        text = yaml.dump_all(docs, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
    if data.draw(st.integers(min_value=0, max_value=9)) == 0:
        text = _damage(text, data)
    level = data.draw(st.sampled_from(LEVELS))
    try:
        load_manifests_text(
            text,
            source_name="fuzz.yaml",
            lenient=data.draw(st.booleans()),
            pod_security=level,
            node_name="fuzz",
        )
    except ManifestError as e:
        assert e.errors
        for error in e.errors:
            assert error.field, error
            assert error.reason, error
            assert error.source.startswith("fuzz.yaml"), error
