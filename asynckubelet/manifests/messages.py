"""The API server's error vocabulary, so our messages read exactly like a cluster's.

apimachinery's ``field.Error`` prints ``<path>: <type>: <value>: <detail>``, quoting strings
the way Go's ``%q`` does; and ``k8s.io/apimachinery/pkg/util/validation`` words the name
rules (DNS-1123 labels and subdomains, qualified names, label values, env var names, config
keys, port names) in sentences users already search for. Both are reproduced here once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from asynckubelet.errors import FieldError

__all__ = [
    "duplicate",
    "forbidden",
    "go_quote",
    "ignored",
    "invalid",
    "is_config_map_key",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_env_var_name",
    "is_qualified_name",
    "is_valid_label_value",
    "is_valid_port_name",
    "is_valid_port_num",
    "not_found",
    "not_supported",
    "range_error",
    "required",
    "too_long",
]

_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(text: str) -> str:
    """``strconv.Quote``: double quotes, backslash escapes, printable Unicode kept."""
    out = ['"']
    for ch in text:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    return str(value)


def invalid(path: str, value: object, detail: str) -> FieldError:
    return FieldError(path, "Invalid value", f"{_value(value)}: {detail}")


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value", detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "Forbidden", detail)


def duplicate(path: str, value: object) -> FieldError:
    return FieldError(path, "Duplicate value", _value(value))


def not_found(path: str, value: object) -> FieldError:
    return FieldError(path, "Not found", _value(value))


def not_supported(path: str, value: object, supported: Iterable[str]) -> FieldError:
    choices = ", ".join(go_quote(s) for s in supported)
    return FieldError(path, "Unsupported value", f"{_value(value)}: supported values: {choices}")


def too_long(path: str, limit: int) -> FieldError:
    return FieldError(path, "Too long", f"must have at most {limit} bytes")


def ignored(path: str, why: str) -> FieldError:
    """A warning: the field is accepted but this node does nothing with it."""
    return FieldError(path, "Ignored", f"not honoured on this node ({why})")


def range_error(lo: int, hi: int) -> str:
    return f"must be between {lo} and {hi}, inclusive"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def _regex_error(msg: str, fmt: str, examples: Sequence[str]) -> str:
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not _LABEL_RE.match(value):
        if _SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_LABEL_MSG, _LABEL_FMT, ("my-name", "123-abc")))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not _SUBDOMAIN_RE.match(value):
        errs.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, ("example.com",)))
    return errs


_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile(f"^{_QNAME_FMT}$")
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character"
)
_QNAME_EXAMPLES = ("MyName", "my.name", "123-abc")


def is_qualified_name(value: str) -> list[str]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, _QNAME_EXAMPLES)
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len(63))
    if not _QNAME_RE.match(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, _QNAME_EXAMPLES))
    return errs


_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)


def is_valid_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(
            _regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, ("MyValue", "my_value", "12345"))
        )
    return errs


def _chdir_prefix(value: str) -> list[str]:
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


_ENV_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_ENV_RE = re.compile(f"^{_ENV_FMT}$")
_ENV_MSG = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', "
    "'-', or '.', and must not start with a digit"
)


def is_env_var_name(value: str) -> list[str]:
    errs = []
    if not _ENV_RE.match(value):
        errs.append(_regex_error(_ENV_MSG, _ENV_FMT, ("my.env-name", "MY_ENV.NAME", "MyEnvName1")))
    return errs + _chdir_prefix(value)


_KEY_FMT = "[-._a-zA-Z0-9]+"
_KEY_RE = re.compile(f"^{_KEY_FMT}$")
_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"


def is_config_map_key(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not _KEY_RE.match(value):
        errs.append(_regex_error(_KEY_MSG, _KEY_FMT, ("key.name", "KEY_NAME", "key-name")))
    return errs + _chdir_prefix(value)


_PORT_CHARS = re.compile(r"^[-a-z0-9]+$")
_PORT_LETTER = re.compile(r"[a-z]")


def is_valid_port_name(value: str) -> list[str]:
    errs = []
    if len(value) > 15:
        errs.append(_max_len(15))
    if not _PORT_CHARS.match(value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_LETTER.search(value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value and (value[0] == "-" or value[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def is_valid_port_num(value: int) -> list[str]:
    return [] if 1 <= value <= 65535 else [range_error(1, 65535)]
