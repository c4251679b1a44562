"""Strict decoding: every field of a document must exist in the Kubernetes schema.

Podman's most common complaint is fields silently dropped, so an unknown field is an error
naming its full path the way ``kubectl``'s strict validation does
(``unknown field "spec.containers[0].imagee"``), or a warning when the caller asks for
leniency. The known fields are read from the lightkube-models classes themselves (their
msgspec or dataclass field tables, which carry the JSON names such as ``continue`` for
``continue_``), never from a hand-written list, and the table for each class is built once.

The same walk checks scalar types and brings the document into the shape the models accept:
a quantity written as a YAML number becomes its string, and a required field that is absent
takes Go's zero value, so that validation can report it in the API server's words
(``Required value``) instead of the decoder failing first.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union, cast

import msgspec

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import invalid, range_error

__all__ = ["Problems", "check_document", "schema_of"]

_STR, _INT, _FLOAT, _BOOL, _INT_OR_STR, _QUANTITY, _TIME, _ANY, _STRUCT, _LIST, _DICT = range(11)

# lightkube declares these maps as a bare ``dict``: their values are quantities.
_QUANTITY_MAPS = frozenset(
    {
        ("ResourceRequirements", "limits"),
        ("ResourceRequirements", "requests"),
        ("VolumeResourceRequirements", "limits"),
        ("VolumeResourceRequirements", "requests"),
        ("PodSpec", "overhead"),
    }
)
_FREE_FORM = frozenset({"FieldsV1", "RawExtension", "JSON"})
_FREE_FORM_FIELDS = frozenset({("ManagedFieldsEntry", "fieldsV1"), ("ControllerRevision", "data")})
"""Free-form fields the models type as a bare ``Dict`` (upstream's ``FieldsV1`` and
``RawExtension``)."""
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class _Type:
    kind: int
    inner: _Type | None = None
    cls: type | None = None


@dataclass(frozen=True, slots=True)
class _Field:
    json_name: str
    type: _Type
    required: bool


@dataclass(slots=True)
class Problems:
    """What one walk found: unknown field paths and type errors."""

    unknown: list[str] = dataclasses.field(default_factory=list)
    errors: list[FieldError] = dataclasses.field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Schema:
    fields: dict[str, _Field]
    required: tuple[_Field, ...]


_SCHEMAS: dict[type, _Schema] = {}


def schema_of(cls: type) -> dict[str, _Field]:
    """The JSON field table of a lightkube model class (cached)."""
    return _schema(cls).fields


def _schema(cls: type) -> _Schema:
    schema = _SCHEMAS.get(cls)
    if schema is None:
        fields = _build(cls)
        required = tuple(f for f in fields.values() if f.required)
        schema = _SCHEMAS[cls] = _Schema(fields, required)
    return schema


def _raw_fields(cls: type) -> list[tuple[str, str, Any, bool]]:
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        return [
            (
                f.name,
                f.encode_name,
                f.type,
                f.default is msgspec.NODEFAULT and f.default_factory is msgspec.NODEFAULT,
            )
            for f in msgspec.structs.fields(cls)
        ]
    hints = typing.get_type_hints(cls)
    return [
        (
            f.name,
            f.metadata.get("json", f.name),
            hints[f.name],
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cast(Any, cls))
    ]


def _build(cls: type) -> dict[str, _Field]:
    raw_annotations: dict[str, Any] = getattr(cls, "__annotations__", {})
    table = {}
    for name, json_name, tp, req in _raw_fields(cls):
        raw = str(raw_annotations.get(name, ""))
        if (cls.__name__, json_name) in _QUANTITY_MAPS:
            t = _Type(_DICT, _Type(_QUANTITY))
        elif (cls.__name__, json_name) in _FREE_FORM_FIELDS:
            t = _Type(_ANY)
        else:
            t = _classify(tp, quantity="Quantity" in raw)
        table[json_name] = _Field(json_name, t, req)
    return table


def _classify(tp: Any, *, quantity: bool = False) -> _Type:
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return _classify_union(tp, quantity=quantity)
    if origin in (list, typing.List):  # noqa: UP006
        args = typing.get_args(tp)
        return _Type(_LIST, _classify(args[0], quantity=quantity) if args else _Type(_ANY))
    if origin in (dict, typing.Dict):  # noqa: UP006
        args = typing.get_args(tp)
        return _Type(_DICT, _classify(args[1]) if len(args) == 2 else _Type(_STR))
    if tp is dict or tp is typing.Dict:  # noqa: UP006
        return _Type(_DICT, _Type(_STR))
    if tp is str:
        return _Type(_QUANTITY if quantity else _STR)
    for scalar, kind in _SCALARS:
        if tp is scalar:
            return _Type(kind)
    if isinstance(tp, type) and (issubclass(tp, msgspec.Struct) or dataclasses.is_dataclass(tp)):
        if tp.__name__ in _FREE_FORM:
            return _Type(_ANY)
        return _Type(_STRUCT, cls=tp)
    return _Type(_ANY)


_SCALARS: tuple[tuple[type, int], ...] = (
    (bool, _BOOL),
    (int, _INT),
    (float, _FLOAT),
    (datetime.datetime, _TIME),
)


def _classify_union(tp: Any, *, quantity: bool) -> _Type:
    members = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(members) == 1:
        return _classify(members[0], quantity=quantity)
    if set(members) == {int, str}:
        return _Type(_INT_OR_STR)
    return _Type(_ANY)


_ZERO: dict[int, Any] = {
    _STR: "",
    _INT: 0,
    _FLOAT: 0.0,
    _BOOL: False,
    _INT_OR_STR: 0,
    _QUANTITY: "0",
}


def check_document(doc: dict[str, Any], cls: type, *, path: str = "") -> Problems:
    """Check ``doc`` against ``cls`` in place; return what was wrong."""
    problems = Problems()
    _walk_struct(doc, cls, path, problems)
    return problems


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _walk_struct(doc: dict[str, Any], cls: type, path: str, problems: Problems) -> None:
    schema = _schema(cls)
    table = schema.fields
    for key in list(doc):
        spec = table.get(key)
        if spec is None:
            problems.unknown.append(_join(path, str(key)))
            del doc[key]
            continue
        value = doc[key]
        if value is None:
            if spec.required:
                doc[key] = _zero(spec.type, _join(path, key), problems)
            else:
                del doc[key]
            continue
        doc[key] = _check(value, spec.type, _join(path, key), problems)
    for spec in schema.required:
        if spec.json_name not in doc:
            doc[spec.json_name] = _zero(spec.type, _join(path, spec.json_name), problems)


def _zero(t: _Type, path: str, problems: Problems) -> Any:
    if t.kind == _LIST:
        return []
    if t.kind in (_DICT, _ANY):
        return {}
    if t.kind == _STRUCT:
        assert t.cls is not None  # noqa: S101  (type narrowing: _classify gives a struct its class)
        value: dict[str, Any] = {}
        _walk_struct(value, t.cls, path, problems)
        return value
    return _ZERO.get(t.kind)


def _type_error(path: str, value: Any, expected: str, problems: Problems) -> Any:
    shown = value if isinstance(value, (str, int, float, bool)) else type(value).__name__
    problems.errors.append(invalid(path, shown, f"must be {expected}"))
    return None


def _check(value: Any, t: _Type, path: str, problems: Problems) -> Any:
    check = _CHECKS.get(t.kind)
    return value if check is None else check(value, t, path, problems)


def _check_struct(value: Any, t: _Type, path: str, problems: Problems) -> Any:
    if isinstance(value, dict):
        assert t.cls is not None  # noqa: S101  (type narrowing: _classify gives a struct its class)
        _walk_struct(value, t.cls, path, problems)
        return value
    return _type_error(path, value, "an object", problems)


def _check_list(value: Any, t: _Type, path: str, problems: Problems) -> Any:
    if isinstance(value, list):
        assert t.inner is not None  # noqa: S101  (type narrowing: _classify gives a list its item type)
        inner = t.inner
        for i, item in enumerate(value):
            item_path = f"{path}[{i}]"
            if item is None:
                value[i] = _zero(inner, item_path, problems)
            else:
                value[i] = _check(item, inner, item_path, problems)
        return value
    return _type_error(path, value, "a list", problems)


def _check_dict(value: Any, t: _Type, path: str, problems: Problems) -> Any:
    if isinstance(value, dict):
        assert t.inner is not None  # noqa: S101  (type narrowing: _classify gives a map its value type)
        for key in list(value):
            item_path = f"{path}[{key}]"
            if not isinstance(key, str):
                problems.errors.append(invalid(item_path, str(key), "keys must be strings"))
                del value[key]
                continue
            item = value[key]
            if item is None:
                value[key] = _zero(t.inner, item_path, problems)
            else:
                value[key] = _check(item, t.inner, item_path, problems)
        return value
    return _type_error(path, value, "an object", problems)


def _check_int(value: Any, t: _Type, path: str, problems: Problems) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
        problems.errors.append(invalid(path, value, range_error(_INT64_MIN, _INT64_MAX)))
        return None
    return _type_error(path, value, "an integer", problems)


def _check_quantity(value: Any, t: _Type, path: str, problems: Problems) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return _type_error(path, value, "a quantity (a string or a number)", problems)


def _scalar_check(accepts: Callable[[Any], bool], expected: str) -> _Checker:
    def check(value: Any, t: _Type, path: str, problems: Problems) -> Any:
        if accepts(value):
            return value
        return _type_error(path, value, expected, problems)

    return check


_Checker = Callable[[Any, _Type, str, Problems], Any]
_CHECKS: dict[int, _Checker] = {
    _STR: _scalar_check(lambda v: isinstance(v, str), "a string"),
    _STRUCT: _check_struct,
    _LIST: _check_list,
    _DICT: _check_dict,
    _INT: _check_int,
    _BOOL: _scalar_check(lambda v: isinstance(v, bool), "a boolean"),
    _INT_OR_STR: _scalar_check(
        lambda v: isinstance(v, (int, str)) and not isinstance(v, bool), "an integer or a string"
    ),
    _QUANTITY: _check_quantity,
    _FLOAT: _scalar_check(
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"
    ),
    _TIME: _scalar_check(lambda v: isinstance(v, (str, datetime.datetime)), "a timestamp"),
}
