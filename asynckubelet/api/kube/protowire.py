"""The API server's protobuf request bodies, read as far as the node takes them.

kubectl's typed clients send some requests as ``application/vnd.kubernetes.protobuf``
(``kubectl create token`` its ``TokenRequest``): the bytes ``k8s\\0``, then a
``runtime.Unknown`` holding the object's ``apiVersion`` and ``kind`` and the object's
own protobuf message. This module reads that envelope and the wire format's fields
(varints and length-delimited values; a group or a fixed-width field ends the read as
malformed), and turns a ``TokenRequest`` into its JSON form. A malformed body is a
ValueError.
"""

from __future__ import annotations

from typing import Any

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
Fields = dict[int, list[int | bytes]]


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a varint runs past the end of the message")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: bytes) -> Fields:
    """The fields of one message, by number, in order."""
    found: Fields = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            found.setdefault(number, []).append(value)
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ValueError("a field runs past the end of the message")
            found.setdefault(number, []).append(data[at : at + size])
            at += size
        else:
            raise ValueError(f"wire type {wire} is not read here")
    return found


def _text(found: Fields, number: int) -> str:
    values = [v for v in found.get(number, []) if isinstance(v, bytes)]
    return values[-1].decode() if values else ""


def _message(found: Fields, number: int) -> Fields | None:
    values = [v for v in found.get(number, []) if isinstance(v, bytes)]
    return fields(values[-1]) if values else None


def unwrap(body: bytes) -> tuple[str, str, bytes]:
    """``(apiVersion, kind, object bytes)`` of a protobuf request body."""
    if not body.startswith(MAGIC):
        raise ValueError("the body does not start with the protobuf envelope's magic bytes")
    unknown = fields(body[len(MAGIC) :])
    meta = _message(unknown, 1) or {}
    raw = [v for v in unknown.get(2, []) if isinstance(v, bytes)]
    return _text(meta, 1), _text(meta, 2), raw[-1] if raw else b""


def token_request(raw: bytes) -> dict[str, Any]:
    """A ``TokenRequest`` message as JSON: its spec's audiences (field 1), bound object
    (3: kind, apiVersion, name, uid) and expirationSeconds (4)."""
    spec_fields = _message(fields(raw), 2) or {}
    spec: dict[str, Any] = {
        "audiences": [v.decode() for v in spec_fields.get(1, []) if isinstance(v, bytes)]
    }
    seconds = [v for v in spec_fields.get(4, []) if isinstance(v, int)]
    if seconds:
        value = seconds[-1]
        spec["expirationSeconds"] = value - (1 << 64) if value >= 1 << 63 else value
    bound = _message(spec_fields, 3)
    if bound is not None:
        spec["boundObjectRef"] = {
            name: _text(bound, number)
            for number, name in ((1, "kind"), (2, "apiVersion"), (3, "name"), (4, "uid"))
            if _text(bound, number)
        }
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


__all__ = ["CONTENT_TYPE", "MAGIC", "fields", "token_request", "unwrap"]
