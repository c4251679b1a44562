"""``/openapi/v2`` as protobuf, the form kubectl's client-side validation downloads.

kubectl asks for the v2 document only as ``application/com.github.proto-openapi.spec.
v2@v1.0+protobuf``: gnostic's ``openapi.v2.Document`` message. No protobuf runtime is
needed for the few messages a schema uses: this module writes the wire format itself
(length-delimited fields, varints), from the same JSON form
:func:`~asynckubelet.api.kube.openapi.swagger` serves. Vendor extensions
(``x-kubernetes-group-version-kind``, the patch merge keys) are ``NamedAny`` whose value
is YAML text; JSON is YAML, so their JSON is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

ACCEPTED = (
    "com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "com.github.proto-openapi.spec.v2.v1.0+protobuf",
)
"""The media subtypes clients ask by (kubectl the first)."""
CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
"""What the API server answers with (a ``@`` is no part of a media type Go parses)."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a message)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode())


def _named_any(name: str, value: Any) -> bytes:
    return _text(1, name) + _field(2, _text(2, json.dumps(value)))


def _named(items: Iterable[tuple[str, Mapping[str, Any]]]) -> bytes:
    return b"".join(_field(1, _text(1, name) + _field(2, schema(body))) for name, body in items)


def schema(body: Mapping[str, Any]) -> bytes:
    """gnostic's ``Schema`` message."""
    out = b""
    if "$ref" in body:
        out += _text(1, body["$ref"])
    if "format" in body:
        out += _text(2, body["format"])
    if "description" in body:
        out += _text(4, body["description"])
    for name in body.get("required") or []:
        out += _text(19, name)
    if isinstance(body.get("additionalProperties"), Mapping):
        out += _field(21, _field(1, schema(body["additionalProperties"])))
    if "type" in body:
        out += _field(22, _text(1, body["type"]))
    if "items" in body:
        out += _field(23, _field(1, schema(body["items"])))
    if "properties" in body:
        out += _field(25, _named(body["properties"].items()))
    for name, value in body.items():
        if name.startswith("x-"):
            out += _field(31, _named_any(name, value))
    return out


def document(swagger: Mapping[str, Any]) -> bytes:
    """gnostic's ``Document`` of a Swagger 2.0 document's version, info and
    definitions."""
    info = swagger.get("info") or {}
    out = _text(1, swagger.get("swagger", "2.0"))
    out += _field(2, _text(1, info.get("title", "")) + _text(2, info.get("version", "")))
    out += _field(9, _named((swagger.get("definitions") or {}).items()))
    return out


__all__ = ["ACCEPTED", "CONTENT_TYPE", "document", "schema"]
