"""Request bodies in the Kubernetes protobuf encoding, read into the JSON form every
write takes.

kubectl's typed clients send ``application/vnd.kubernetes.protobuf`` and do not fall back
to JSON: ``kubectl create namespace|configmap|secret|serviceaccount|service|deployment|
job`` post their object that way. The envelope is the API server's (``k8s\\0``, then a
``runtime.Unknown`` holding the type and the object's own bytes); each message is read
by its field numbers from upstream's ``generated.proto`` (:data:`MESSAGES`). Only the
kinds listed there are read; another kind, or a field this table does not know, is
refused whole, so nothing a client sent is dropped on the way. Responses stay JSON
(clients ask for protobuf *or* JSON).

Go writes a struct's scalar fields even when they hold their zero value and omits them
from JSON; a zero scalar is left out here as Go's JSON would leave it out, except for the
pointer fields (:data:`POINTERS`), whose presence is the value.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

__all__ = ["KINDS", "PROTOBUF", "decode"]

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

Field = tuple[str, str, bool]
"""JSON name, type (a scalar, ``map``/``bytesmap`` or a message's name), repeated."""

MESSAGES: dict[str, dict[int, Field]] = {
    "Unknown": {
        1: ("typeMeta", "TypeMeta", False),
        2: ("raw", "raw", False),
        3: ("contentEncoding", "string", False),
        4: ("contentType", "string", False),
    },
    "TypeMeta": {1: ("apiVersion", "string", False), 2: ("kind", "string", False)},
    "ObjectMeta": {
        1: ("name", "string", False),
        2: ("generateName", "string", False),
        3: ("namespace", "string", False),
        4: ("selfLink", "string", False),
        5: ("uid", "string", False),
        6: ("resourceVersion", "string", False),
        7: ("generation", "int", False),
        8: ("creationTimestamp", "Time", False),
        9: ("deletionTimestamp", "Time", False),
        10: ("deletionGracePeriodSeconds", "int", False),
        11: ("labels", "map", False),
        12: ("annotations", "map", False),
        13: ("ownerReferences", "OwnerReference", True),
        14: ("finalizers", "string", True),
    },
    "OwnerReference": {
        1: ("kind", "string", False),
        3: ("name", "string", False),
        4: ("uid", "string", False),
        5: ("apiVersion", "string", False),
        6: ("controller", "bool", False),
        7: ("blockOwnerDeletion", "bool", False),
    },
    "Time": {1: ("seconds", "int", False), 2: ("nanos", "int", False)},
    "ConfigMap": {
        1: ("metadata", "ObjectMeta", False),
        2: ("data", "map", False),
        3: ("binaryData", "bytesmap", False),
        4: ("immutable", "bool", False),
    },
    "Secret": {
        1: ("metadata", "ObjectMeta", False),
        2: ("data", "bytesmap", False),
        3: ("type", "string", False),
        4: ("stringData", "map", False),
        5: ("immutable", "bool", False),
    },
    "Namespace": {
        1: ("metadata", "ObjectMeta", False),
        2: ("spec", "NamespaceSpec", False),
        3: ("status", "NamespaceStatus", False),
    },
    "NamespaceSpec": {1: ("finalizers", "string", True)},
    "NamespaceStatus": {1: ("phase", "string", False)},
    "ServiceAccount": {
        1: ("metadata", "ObjectMeta", False),
        2: ("secrets", "ObjectReference", True),
        3: ("imagePullSecrets", "LocalObjectReference", True),
        4: ("automountServiceAccountToken", "bool", False),
    },
    "ObjectReference": {
        1: ("kind", "string", False),
        2: ("namespace", "string", False),
        3: ("name", "string", False),
        4: ("uid", "string", False),
        5: ("apiVersion", "string", False),
        6: ("resourceVersion", "string", False),
        7: ("fieldPath", "string", False),
    },
    "LocalObjectReference": {1: ("name", "string", False)},
    "Service": {
        1: ("metadata", "ObjectMeta", False),
        2: ("spec", "ServiceSpec", False),
        3: ("status", "ServiceStatus", False),
    },
    "ServiceSpec": {
        1: ("ports", "ServicePort", True),
        2: ("selector", "map", False),
        3: ("clusterIP", "string", False),
        4: ("type", "string", False),
        5: ("externalIPs", "string", True),
        7: ("sessionAffinity", "string", False),
        8: ("loadBalancerIP", "string", False),
        9: ("loadBalancerSourceRanges", "string", True),
        10: ("externalName", "string", False),
        11: ("externalTrafficPolicy", "string", False),
        12: ("healthCheckNodePort", "int", False),
        13: ("publishNotReadyAddresses", "bool", False),
        17: ("ipFamilyPolicy", "string", False),
        18: ("clusterIPs", "string", True),
        19: ("ipFamilies", "string", True),
        20: ("allocateLoadBalancerNodePorts", "bool", False),
        21: ("loadBalancerClass", "string", False),
        22: ("internalTrafficPolicy", "string", False),
        23: ("trafficDistribution", "string", False),
    },
    "ServicePort": {
        1: ("name", "string", False),
        2: ("protocol", "string", False),
        3: ("port", "int", False),
        4: ("targetPort", "IntOrString", False),
        5: ("nodePort", "int", False),
        6: ("appProtocol", "string", False),
    },
    "IntOrString": {
        1: ("type", "int", False),
        2: ("intVal", "int", False),
        3: ("strVal", "string", False),
    },
    "ServiceStatus": {1: ("loadBalancer", "LoadBalancerStatus", False)},
    "LoadBalancerStatus": {},
    "Deployment": {
        1: ("metadata", "ObjectMeta", False),
        2: ("spec", "DeploymentSpec", False),
        3: ("status", "DeploymentStatus", False),
    },
    "DeploymentSpec": {
        1: ("replicas", "int", False),
        2: ("selector", "LabelSelector", False),
        3: ("template", "PodTemplateSpec", False),
        4: ("strategy", "DeploymentStrategy", False),
        5: ("minReadySeconds", "int", False),
        6: ("revisionHistoryLimit", "int", False),
        7: ("paused", "bool", False),
        9: ("progressDeadlineSeconds", "int", False),
    },
    "DeploymentStrategy": {
        1: ("type", "string", False),
        2: ("rollingUpdate", "RollingUpdateDeployment", False),
    },
    "RollingUpdateDeployment": {
        1: ("maxUnavailable", "IntOrString", False),
        2: ("maxSurge", "IntOrString", False),
    },
    "DeploymentStatus": {
        1: ("observedGeneration", "int", False),
        2: ("replicas", "int", False),
        3: ("updatedReplicas", "int", False),
        4: ("availableReplicas", "int", False),
        5: ("unavailableReplicas", "int", False),
        7: ("readyReplicas", "int", False),
        8: ("collisionCount", "int", False),
        9: ("terminatingReplicas", "int", False),
    },
    "Job": {
        1: ("metadata", "ObjectMeta", False),
        2: ("spec", "JobSpec", False),
        3: ("status", "JobStatus", False),
    },
    "JobSpec": {
        1: ("parallelism", "int", False),
        2: ("completions", "int", False),
        3: ("activeDeadlineSeconds", "int", False),
        4: ("selector", "LabelSelector", False),
        5: ("manualSelector", "bool", False),
        6: ("template", "PodTemplateSpec", False),
        7: ("backoffLimit", "int", False),
        8: ("ttlSecondsAfterFinished", "int", False),
        9: ("completionMode", "string", False),
        10: ("suspend", "bool", False),
        12: ("backoffLimitPerIndex", "int", False),
        13: ("maxFailedIndexes", "int", False),
        14: ("podReplacementPolicy", "string", False),
        15: ("managedBy", "string", False),
    },
    "JobStatus": {
        2: ("startTime", "Time", False),
        3: ("completionTime", "Time", False),
        4: ("active", "int", False),
        5: ("succeeded", "int", False),
        6: ("failed", "int", False),
        7: ("completedIndexes", "string", False),
        9: ("ready", "int", False),
        10: ("failedIndexes", "string", False),
        11: ("terminating", "int", False),
    },
    "LabelSelector": {
        1: ("matchLabels", "map", False),
        2: ("matchExpressions", "LabelSelectorRequirement", True),
    },
    "LabelSelectorRequirement": {
        1: ("key", "string", False),
        2: ("operator", "string", False),
        3: ("values", "string", True),
    },
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta", False), 2: ("spec", "PodSpec", False)},
    "PodSpec": {
        2: ("containers", "Container", True),
        3: ("restartPolicy", "string", False),
        4: ("terminationGracePeriodSeconds", "int", False),
        5: ("activeDeadlineSeconds", "int", False),
        6: ("dnsPolicy", "string", False),
        7: ("nodeSelector", "map", False),
        8: ("serviceAccountName", "string", False),
        9: ("serviceAccount", "string", False),
        10: ("nodeName", "string", False),
        11: ("hostNetwork", "bool", False),
        12: ("hostPID", "bool", False),
        13: ("hostIPC", "bool", False),
        15: ("imagePullSecrets", "LocalObjectReference", True),
        16: ("hostname", "string", False),
        17: ("subdomain", "string", False),
        19: ("schedulerName", "string", False),
        20: ("initContainers", "Container", True),
        21: ("automountServiceAccountToken", "bool", False),
        24: ("priorityClassName", "string", False),
        25: ("priority", "int", False),
        27: ("shareProcessNamespace", "bool", False),
        29: ("runtimeClassName", "string", False),
        30: ("enableServiceLinks", "bool", False),
        31: ("preemptionPolicy", "string", False),
        35: ("setHostnameAsFQDN", "bool", False),
        37: ("hostUsers", "bool", False),
        41: ("hostnameOverride", "string", False),
    },
    "Container": {
        1: ("name", "string", False),
        2: ("image", "string", False),
        3: ("command", "string", True),
        4: ("args", "string", True),
        5: ("workingDir", "string", False),
        6: ("ports", "ContainerPort", True),
        7: ("env", "EnvVar", True),
        8: ("resources", "ResourceRequirements", False),
        13: ("terminationMessagePath", "string", False),
        14: ("imagePullPolicy", "string", False),
        16: ("stdin", "bool", False),
        17: ("stdinOnce", "bool", False),
        18: ("tty", "bool", False),
        20: ("terminationMessagePolicy", "string", False),
        24: ("restartPolicy", "string", False),
    },
    "ContainerPort": {
        1: ("name", "string", False),
        2: ("hostPort", "int", False),
        3: ("containerPort", "int", False),
        4: ("protocol", "string", False),
        5: ("hostIP", "string", False),
    },
    "EnvVar": {1: ("name", "string", False), 2: ("value", "string", False)},
    "ResourceRequirements": {
        1: ("limits", "quantities", False),
        2: ("requests", "quantities", False),
    },
}
"""Upstream's field numbers (``generated.proto`` of core/v1, meta/v1, runtime, intstr)
of the messages the kinds in :data:`KINDS` are made of."""

KINDS = {
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
    ("batch/v1", "Job"),
}
"""(apiVersion, kind) read from protobuf."""

POINTERS = {
    ("ConfigMap", "immutable"),
    ("Secret", "immutable"),
    ("ServiceAccount", "automountServiceAccountToken"),
    ("ServiceSpec", "allocateLoadBalancerNodePorts"),
    ("OwnerReference", "controller"),
    ("OwnerReference", "blockOwnerDeletion"),
    ("DeploymentSpec", "replicas"),
    ("DeploymentSpec", "revisionHistoryLimit"),
    ("DeploymentSpec", "progressDeadlineSeconds"),
    ("DeploymentStatus", "terminatingReplicas"),
    *(
        ("PodSpec", f)
        for f in (
            "terminationGracePeriodSeconds",
            "activeDeadlineSeconds",
            "automountServiceAccountToken",
            "shareProcessNamespace",
            "priority",
            "enableServiceLinks",
            "setHostnameAsFQDN",
            "hostUsers",
        )
    ),
    ("Container", "restartPolicy"),
    *(
        ("JobSpec", f)
        for f in (
            "parallelism",
            "completions",
            "activeDeadlineSeconds",
            "manualSelector",
            "backoffLimit",
            "ttlSecondsAfterFinished",
            "suspend",
            "backoffLimitPerIndex",
            "maxFailedIndexes",
        )
    ),
    *(("JobStatus", f) for f in ("ready", "terminating")),
}
"""Fields Go keeps behind a pointer: written only when set, so a zero value is kept."""

MAX_DEPTH = 16


def decode(raw: bytes) -> dict[str, Any]:
    """The object a protobuf request body holds, as JSON would carry it. ValueError
    names what cannot be read (not this encoding, a kind or field not known here)."""
    if not raw.startswith(MAGIC):
        raise ValueError("the body does not start with the Kubernetes protobuf prefix")
    envelope = _message(raw[len(MAGIC) :], "Unknown", 0)
    if envelope.get("contentEncoding"):
        raise ValueError(f"content encoding {envelope['contentEncoding']!r} is not supported")
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if (api_version, kind) not in KINDS:
        raise ValueError(f"{kind or 'an object'} ({api_version or 'no apiVersion'}) is not read")
    body = _message(envelope.get("raw", b""), kind, 0)
    return {"apiVersion": api_version, "kind": kind, **body}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) in order."""
    found: list[tuple[int, int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            length, at = _varint(data, at)
            if at + length > len(data):
                raise ValueError("a truncated field")
            value, at = data[at : at + length], at + length
        elif wire == 1:
            value, at = int.from_bytes(data[at : at + 8], "little"), at + 8
        elif wire == 5:
            value, at = int.from_bytes(data[at : at + 4], "little"), at + 4
        else:
            raise ValueError(f"wire type {wire} is not supported")
        if at > len(data):
            raise ValueError("a truncated field")
        found.append((number, wire, value))
    return found


def _message(data: bytes, name: str, depth: int) -> Any:
    """The message's JSON form: an object, or for ``Time`` its RFC 3339 text (None when
    zero, as Go writes an unset time) and for ``IntOrString`` the number or text."""
    if depth > MAX_DEPTH:
        raise ValueError("the object is nested too deep")
    table = MESSAGES[name]
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data):
        if number not in table:
            raise ValueError(f"field {number} of {name} is not read")
        key, kind, repeated = table[number]
        decoded = _value(value, wire, kind, depth, where=f"{name}.{key}")
        if kind in ("map", "bytesmap", "quantities"):
            out.setdefault(key, {}).update(decoded)
        elif repeated:
            out.setdefault(key, []).append(decoded)
        else:
            out[key] = decoded
    if name == "Time":
        seconds = int(out.get("seconds", 0))
        if not seconds:
            return None
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if name == "IntOrString":
        return out.get("strVal", "") if out.get("type") == 1 else out.get("intVal", 0)
    return {
        k: v
        for k, v in out.items()
        if v is not None
        and ((name, k) in POINTERS or isinstance(v, (dict, list)) or v not in ("", 0, False))
    }


def _value(value: int | bytes, wire: int, kind: str, depth: int, *, where: str) -> Any:
    if kind in ("int", "bool"):
        if not isinstance(value, int):
            raise ValueError(f"{where}: a number was expected")
        if kind == "bool":
            return bool(value)
        return value - (1 << 64) if value >= 1 << 63 else value
    if not isinstance(value, bytes):
        raise ValueError(f"{where}: bytes were expected")
    if kind == "string":
        return value.decode()
    if kind == "raw":
        return value
    if kind in ("map", "bytesmap", "quantities"):
        entry = {n: v for n, _, v in _fields(value)}
        key, item = entry.get(1, b""), entry.get(2, b"")
        if not isinstance(key, bytes) or not isinstance(item, bytes):
            raise ValueError(f"{where}: a map entry was expected")
        if kind == "quantities":
            amount = {n: v for n, _, v in _fields(item)}.get(1, b"")
            if not isinstance(amount, bytes):
                raise ValueError(f"{where}: a quantity was expected")
            return {key.decode(): amount.decode()}
        shown = item.decode() if kind == "map" else base64.b64encode(item).decode("ascii")
        return {key.decode(): shown}
    return _message(value, kind, depth + 1)
