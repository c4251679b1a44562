"""Values as kubectl's Go code writes them: ``fmt``'s ``%v`` and ``%#v``, ``encoding/json``.

kubectl's JSONPath and custom-columns output is Go's formatting of the decoded JSON object
(``map[string]interface{}``, ``[]interface{}``, ``string``, ``int64``, ``float64``,
``bool``, ``nil``), and scripts compare it byte for byte: Go prints a float without
``.0`` (``4``) and with an exponent from 1e6 (``1.2345675e+06``), writes it in JSON in
full below 1e21 and as ``1e-7`` where Python writes ``1e-07``; an integer beyond int64
is a float to Go; JSON keys are sorted and ``<``, ``>``, ``&``
escaped; a map in a column is ``map[k:v]``. Plain Python: the standard library only.
"""

from __future__ import annotations

import json
from decimal import Decimal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"}
_JSON_ESCAPES["\u2029"] = "\\u2029"


def _digits(value: float) -> tuple[str, int]:
    """The shortest decimal digits that read back as ``value`` and the exponent of the
    first digit (``123.4`` -> ``("1234", 2)``), as Go's shortest formatting finds them."""
    _, digits, exponent = Decimal(repr(abs(value))).as_tuple()
    text = "".join(map(str, digits)).lstrip("0")
    return text.rstrip("0") or "0", int(exponent) + len(text) - 1


def _exp_form(value: float, digits: str, first: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if value < 0 else ""
    return f"{sign}{mantissa}e{'-' if first < 0 else '+'}{abs(first):02d}"


def _fixed_form(value: float, digits: str, first: int) -> str:
    sign = "-" if value < 0 else ""
    if first < 0:
        return f"{sign}0.{'0' * (-first - 1)}{digits}"
    if len(digits) <= first + 1:
        return sign + digits + "0" * (first + 1 - len(digits))
    return f"{sign}{digits[: first + 1]}.{digits[first + 1 :]}"


def float_v(value: float) -> str:
    """``fmt.Sprint(float64)`` (``%g``, shortest): an exponent below 1e-4 or from 1e6."""
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[str(value)]
    digits, first = _digits(value)
    if first < -4 or first >= 6:
        return _exp_form(value, digits, first)
    return _fixed_form(value, digits, first)


def _int64(value: int) -> bool:
    return -(2**63) <= value < 2**63


def float_json(value: float) -> str:
    """``encoding/json``'s float64: fixed notation from 1e-6 up to 1e21, else an exponent
    without a leading zero (``1e-07``)."""
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    digits, first = _digits(value)
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        text = _exp_form(value, digits, first)
        mantissa, _, exponent = text.partition("e")
        return f"{mantissa}e{exponent[0]}{exponent[1:].lstrip('0') or '0'}"
    return _fixed_form(value, digits, first)


def json_string(text: str) -> str:
    """A string as ``encoding/json`` writes it: UTF-8 kept, ``<>&`` and U+2028/9 escaped."""
    out = json.dumps(text, ensure_ascii=False)
    if any(c in out for c in _JSON_ESCAPES):
        out = "".join(_JSON_ESCAPES.get(c, c) for c in out)
    return out


def marshal(value: Any, *, indent: str | None = None, _level: int = 0) -> str:
    """``json.Marshal`` (``indent`` None) or ``json.MarshalIndent(v, "", indent)`` of a
    decoded JSON value: keys sorted, Go's numbers and escapes."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return float_json(value)
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, dict):
        parts = [
            f"{json_string(str(k))}:{'' if indent is None else ' '}"
            f"{marshal(value[k], indent=indent, _level=_level + 1)}"
            for k in sorted(value, key=str)
        ]
        return _joined(parts, "{", "}", indent, _level)
    if isinstance(value, (list, tuple)):
        parts = [marshal(v, indent=indent, _level=_level + 1) for v in value]
        return _joined(parts, "[", "]", indent, _level)
    return json_string(str(value))


def _joined(parts: list[str], left: str, right: str, indent: str | None, level: int) -> str:
    if not parts:
        return left + right
    if indent is None:
        return left + ",".join(parts) + right
    inner = "\n" + indent * (level + 1)
    return left + inner + ("," + inner).join(parts) + "\n" + indent * level + right


def sprint(value: Any) -> str:
    """``fmt.Sprint`` of a decoded JSON value (``map[a:1 b:[x y]]``, ``<nil>``)."""
    if value is None:
        return "<nil>"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) or (isinstance(value, int) and not _int64(value)):
        return float_v(float(value))
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{sprint(value[k])}" for k in sorted(value, key=str)) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(sprint(v) for v in value) + "]"
    return str(value)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_GO_ESCAPES.update({"\v": "\\v", "\\": "\\\\", '"': '\\"'})


def go_quote(text: str) -> str:
    """``strconv.Quote``: Go's escapes, printable characters as they are."""
    out = []
    for c in text:
        if c in _GO_ESCAPES:
            out.append(_GO_ESCAPES[c])
        elif c.isprintable() or c == " ":
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def gosyntax(value: Any) -> str:
    """``fmt.Sprintf("%#v")`` of a decoded JSON value, as kubectl shows the object a
    template failed on (``map[string]interface {}{"kind":"List"}``)."""
    if value is None:
        return "interface {}(nil)"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return float_v(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, dict):
        inner = ", ".join(
            f"{go_quote(str(k))}:{gosyntax(value[k])}" for k in sorted(value, key=str)
        )
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(gosyntax(v) for v in value)
        return "[]interface {}{" + inner + "}"
    return go_quote(str(value))


def go_type(value: Any) -> str:
    """The Go type of a decoded JSON value, as kubectl's errors name it."""
    if value is None:
        return "interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return "[]interface {}"


__all__ = [
    "float_json",
    "float_v",
    "go_quote",
    "go_type",
    "gosyntax",
    "json_string",
    "marshal",
    "sprint",
]
