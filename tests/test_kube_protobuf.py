"""Request bodies in the Kubernetes protobuf encoding (what kubectl's typed clients send:
``kubectl create configmap|secret|namespace|serviceaccount|service``) read into the
objects JSON would carry, and anything not understood refused whole."""

from __future__ import annotations

import re

import pytest

from asynckubelet.api.kube.protobuf import decode


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: bytes | int | str) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return field(number, field(1, key) + field(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = field(1, api_version) + field(2, kind)
    return b"k8s\x00" + field(1, type_meta) + field(2, raw) + field(3, "") + field(4, "")


def meta(name: str) -> bytes:
    """ObjectMeta as Go writes it: empty strings and an unset time included."""
    return field(1, name) + field(2, "") + field(3, "") + field(8, b"") + field(7, 0)


def test_a_configmap_reads_as_its_json_form() -> None:
    raw = (
        field(1, meta("settings") + entry(11, "app", "web"))
        + entry(2, "mode", "fast")
        + entry(3, "blob", b"\x00\x01")
    )
    assert decode(envelope("v1", "ConfigMap", raw)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "labels": {"app": "web"}},
        "data": {"mode": "fast"},
        "binaryData": {"blob": "AAE="},
    }


def test_a_pointer_field_keeps_its_false_and_a_secret_its_values_in_base64() -> None:
    raw = field(1, meta("db")) + entry(2, "password", b"s3cr3t") + field(3, "Opaque")
    assert decode(envelope("v1", "Secret", raw + field(5, 0)))["immutable"] is False
    assert decode(envelope("v1", "Secret", raw))["data"] == {"password": "czNjcjN0"}


def test_a_service_port_reads_its_target_port_as_number_or_name() -> None:
    by_number = field(3, 80) + field(4, field(1, 0) + field(2, 8080))
    by_name = field(3, 81) + field(4, field(1, 1) + field(3, "http"))
    spec = field(1, by_number) + field(1, by_name) + entry(2, "app", "web") + field(4, "ClusterIP")
    body = decode(envelope("v1", "Service", field(1, meta("web")) + field(2, spec)))
    assert body["spec"] == {
        "ports": [{"port": 80, "targetPort": 8080}, {"port": 81, "targetPort": "http"}],
        "selector": {"app": "web"},
        "type": "ClusterIP",
    }


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"kind": "ConfigMap"}', "prefix"),
        (envelope("apps/v1", "StatefulSet", b""), "StatefulSet (apps/v1) is not read"),
        (envelope("v1", "ConfigMap", field(9, "x")), "field 9 of ConfigMap is not read"),
        (envelope("v1", "ConfigMap", field(1, b"\x0a\x05ab")), "truncated"),
        (envelope("v1", "ConfigMap", varint(1 << 3 | 3)), "wire type 3"),
    ],
)
def test_what_is_not_understood_is_refused_whole(body: bytes, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        decode(body)
