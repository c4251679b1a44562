"""Generated and mutated manifests: nothing but ManifestError escapes, every error has a path.

Real manifests are taken apart at random (values replaced by any JSON-ish value, keys
dropped or misspelt, lists emptied or doubled) and, in a share of cases, the YAML text itself
is damaged; random YAML text, random alias graphs and huge numbers are thrown at the loader
too. Whatever comes in, the loader must answer with field errors, never a crash, and its
cost stays bounded: alias expansion within go-yaml's ratio, memory within a fixed budget
(both counted, never timed).

The mutation fuzz is costly: the unit suite runs a tenth of its examples and
``pytest tests/test_manifests_fuzz.py --hypothesis-profile=fuzz`` all 10,000.
"""

from __future__ import annotations

import copy
import json
import tracemalloc
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asynckubelet.errors import ManifestError
from asynckubelet.manifests import LEVELS, load_manifests_text
from asynckubelet.manifests.decoding import load_documents

EXAMPLES = Path(__file__).resolve().parent / "data" / "examples"

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
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


SEEDS = _seeds()

MUTATED_EXAMPLES = 10_000 if settings.get_current_profile_name() == "fuzz" else 1_000

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
    max_examples=MUTATED_EXAMPLES,
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
        failure = e
    else:
        return
    assert failure.errors
    for error in failure.errors:
        assert error.field, error
        assert error.reason, error
        assert error.source.startswith("fuzz.yaml"), error


# -- hostile text: random YAML, alias graphs, huge numbers -------------------------------

_FUZZ = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_YAML_ALPHABET = st.sampled_from(
    [*"abkind:Pod-[]{},&*!|>'\"#%@`?\n\t 0123456789.eE+~<=\\", "<<: ", "---\n", "\x00", "é"]
)


def _assert_only_field_errors(text: str, **kwargs: Any) -> None:
    try:
        load_manifests_text(text, source_name="fuzz.yaml", node_name="fuzz", **kwargs)
    except ManifestError as e:
        failure = e
    else:
        return
    assert failure.errors
    for error in failure.errors:
        assert error.field, error
        assert error.reason, error
        assert error.source.startswith("fuzz.yaml"), error
        assert len(str(error)) < 16 * 1024, error


@_FUZZ
@given(st.lists(_YAML_ALPHABET, max_size=400).map("".join))
def test_random_yaml_text_yields_field_errors_and_nothing_else(text: str) -> None:
    _assert_only_field_errors(text)


@st.composite
def alias_graphs(draw: st.DrawFn) -> str:
    """A document of anchors, each a scalar, or a list or mapping of aliases to earlier
    anchors: every alias graph is a DAG like this one, and a bomb is one of them."""
    lines = ["a0: &a0 x"]
    for i in range(1, draw(st.integers(min_value=1, max_value=12))):
        refs = draw(st.lists(st.integers(min_value=0, max_value=i - 1), min_size=1, max_size=12))
        if draw(st.booleans()):
            body = "[" + ", ".join(f"*a{r}" for r in refs) + "]"
        else:
            body = "{" + ", ".join(f"k{j}: *a{r}" for j, r in enumerate(refs)) + "}"
        lines.append(f"a{i}: &a{i} {body}")
    if draw(st.booleans()):
        lines.append(f"z: &z [*a{len(lines) - 1}, *z]" if draw(st.booleans()) else "z: *nowhere")
    return "\n".join(lines) + "\n"


def _decode_steps(value: Any, cap: int) -> int:
    """go-yaml's decode steps for ``value`` with every shared object expanded (stops at
    ``cap``): one per scalar, list or mapping, and one per mapping key."""
    steps = 0
    stack = [value]
    while stack and steps <= cap:
        item = stack.pop()
        steps += 1
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            steps += len(item)
            stack.extend(item.values())
    return steps


@_FUZZ
@given(alias_graphs())
def test_alias_expansion_stays_within_go_yamls_ratio(text: str) -> None:
    nodes = sum(
        isinstance(e, (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent))
        for e in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    )
    bound = max(1100, 100 * (nodes + 1))
    tracemalloc.start()
    try:
        documents = list(load_documents(text))
    except yaml.YAMLError:
        documents = []
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024
    for document in documents:
        assert _decode_steps(document, bound) <= bound
    _assert_only_field_errors(text)


_numbers = st.one_of(
    st.integers(min_value=0, max_value=200_000).map(lambda n: "9" * n or "0"),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.tuples(
        st.integers(min_value=1, max_value=2000), st.integers(min_value=-9999, max_value=9999)
    ).map(lambda t: f"{'7' * t[0]}e{t[1]}"),
    st.sampled_from([".inf", "-.inf", ".nan", "0x" + "f" * 5000, "0o777", "1_000", "1:30"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
_NUMBER_SITES = (
    "spec:\n  activeDeadlineSeconds: {n}\n  containers: [{{name: a, image: b}}]\n",
    "spec:\n  containers: [{{name: a, image: b, resources: {{limits: {{cpu: {n}}}}}}}]\n",
    "spec:\n  containers: [{{name: a, image: b, ports: [{{containerPort: {n}}}]}}]\n",
    "spec:\n  containers: [{{name: a, image: b}}]\n  priority: {n}\n",
    "spec:\n  containers: [{{name: a, image: b}}]\n  nodeSelector: {{a: {n}}}\n",
)


@_FUZZ
@given(_numbers, st.sampled_from(_NUMBER_SITES))
def test_huge_and_odd_numbers_yield_field_errors_in_bounded_memory(number: str, site: str) -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n" + site.format(n=number)
    tracemalloc.start()
    try:
        _assert_only_field_errors(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * len(text) + 4 * 1024 * 1024
