"""The API server's error vocabulary, so our messages read exactly like a cluster's.

apimachinery's ``field.Error`` prints ``<path>: <type>: <value>: <detail>``, quoting strings
the way Go's ``%q`` does; and ``k8s.io/apimachinery/pkg/util/validation`` words the name
rules (DNS-1123 labels and subdomains, qualified names, label values, env var names, config
keys, port names) in sentences users already search for. Both are reproduced here once.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from asynckubelet.errors import FieldError

__all__ = [
    "DROPPED",
    "IP_MESSAGE",
    "MAX_SHOWN",
    "GoValue",
    "duplicate",
    "error_budget",
    "forbidden",
    "go_map",
    "go_quote",
    "ignored",
    "invalid",
    "is_config_map_key",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_dns1123_subdomain_with_underscore",
    "is_env_var_name",
    "is_ip_address",
    "is_qualified_name",
    "is_uuid",
    "is_valid_ip",
    "is_valid_label_value",
    "is_valid_port_name",
    "is_valid_port_num",
    "not_found",
    "not_supported",
    "range_error",
    "required",
    "shown",
    "too_long",
]

MAX_SHOWN = 1024
"""Characters of an untrusted value a message shows; a longer one is cut and its length said."""

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


def shown(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _quoted(text: str) -> str:
    if len(text) <= MAX_SHOWN:
        return go_quote(text)
    return f"{go_quote(text[:MAX_SHOWN])}... ({len(text)} characters)"


class GoValue(str):
    """A value already written as Go's ``%#v`` prints it (``map[string]string{...}``):
    shown as it is (cut to :data:`MAX_SHOWN` characters), not quoted."""


def go_map(values: Mapping[str, str] | None) -> GoValue:
    """A ``map[string]string`` as Go's ``%#v`` prints it: keys sorted, values quoted
    (``map[string]string(nil)`` for none)."""
    if values is None:
        return GoValue("map[string]string(nil)")
    items = ", ".join(f"{go_quote(k)}:{go_quote(str(v))}" for k, v in sorted(values.items()))
    return GoValue(f"map[string]string{{{items}}}")


def _value(value: object) -> str:
    """A bad value as ``field.Error`` prints it (``%q`` for strings, ``%#v`` for a list of
    strings), never longer than about :data:`MAX_SHOWN` characters; any other structure is
    named by its type, never printed."""
    if value is None:
        return "null"
    if isinstance(value, GoValue):
        return shown(str(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, int):
        return (
            str(value) if value.bit_length() <= 256 else f"<integer of {value.bit_length()} bits>"
        )
    if isinstance(value, float):
        return str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items: list[str] = []
        size = 0
        for item in value:
            text = _quoted(item)
            size += len(text)
            if size > MAX_SHOWN:
                items.append(f"... ({len(value)} items)")
                break
            items.append(text)
        return "[]string{" + ", ".join(items) + "}"
    return f"<{type(value).__name__}>"


DROPPED = FieldError("<document>", "Too many")
"""What every constructor below returns once the error budget is spent: one shared object,
so a document that provokes a million errors costs a million references, not messages."""
_BUDGET: ContextVar[list[int] | None] = ContextVar("asynckubelet_error_budget", default=None)


@contextmanager
def error_budget(count: int) -> Iterator[None]:
    """Within this block, the constructors below make at most ``count`` errors, then
    :data:`DROPPED` (code that only asks whether there were errors sees no difference)."""
    token = _BUDGET.set([count])
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _spent() -> bool:
    budget = _BUDGET.get()
    if budget is None:
        return False
    budget[0] -= 1
    return budget[0] < 0


def invalid(path: str, value: object, detail: str) -> FieldError:
    if _spent():
        return DROPPED
    return FieldError(path, "Invalid value", f"{_value(value)}: {detail}")


def required(path: str, detail: str = "") -> FieldError:
    if _spent():
        return DROPPED
    return FieldError(path, "Required value", detail)


def forbidden(path: str, detail: str) -> FieldError:
    if _spent():
        return DROPPED
    return FieldError(path, "Forbidden", detail)


def duplicate(path: str, value: object) -> FieldError:
    if _spent():
        return DROPPED
    return FieldError(path, "Duplicate value", _value(value))


def not_found(path: str, value: object) -> FieldError:
    if _spent():
        return DROPPED
    return FieldError(path, "Not found", _value(value))


def not_supported(path: str, value: object, supported: Iterable[str]) -> FieldError:
    if _spent():
        return DROPPED
    choices = ", ".join(go_quote(s) for s in supported)
    return FieldError(path, "Unsupported value", f"{_value(value)}: supported values: {choices}")


def too_long(path: str, limit: int) -> FieldError:
    if _spent():
        return DROPPED
    return FieldError(path, "Too long", f"must have at most {limit} bytes")


def ignored(path: str, why: str) -> FieldError:
    """A warning: the field is accepted but this node does nothing with it."""
    if _spent():
        return DROPPED
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
_LABEL_RE = re.compile(_LABEL_FMT)
_SUBDOMAIN_RE = re.compile(_SUBDOMAIN_FMT)
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
    if not _LABEL_RE.fullmatch(value):
        if _SUBDOMAIN_RE.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_LABEL_MSG, _LABEL_FMT, ("my-name", "123-abc")))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not _SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, ("example.com",)))
    return errs


_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile(_QNAME_FMT)
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
    if not _QNAME_RE.fullmatch(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, _QNAME_EXAMPLES))
    return errs


_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)


def is_valid_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
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
_ENV_RE = re.compile(_ENV_FMT)
_ENV_MSG = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', "
    "'-', or '.', and must not start with a digit"
)


def is_env_var_name(value: str) -> list[str]:
    errs = []
    if not _ENV_RE.fullmatch(value):
        errs.append(_regex_error(_ENV_MSG, _ENV_FMT, ("my.env-name", "MY_ENV.NAME", "MyEnvName1")))
    return errs + _chdir_prefix(value)


_KEY_FMT = "[-._a-zA-Z0-9]+"
_KEY_RE = re.compile(_KEY_FMT)
_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"


def is_config_map_key(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not _KEY_RE.fullmatch(value):
        errs.append(_regex_error(_KEY_MSG, _KEY_FMT, ("key.name", "KEY_NAME", "key-name")))
    return errs + _chdir_prefix(value)


_PORT_CHARS = re.compile(r"[-a-z0-9]+")
_PORT_LETTER = re.compile(r"[a-z]")


def is_valid_port_name(value: str) -> list[str]:
    errs = []
    if len(value) > 15:
        errs.append(_max_len(15))
    if not _PORT_CHARS.fullmatch(value):
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


_LABEL_UNDERSCORE_FMT = "_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_UNDERSCORE_FMT = _LABEL_UNDERSCORE_FMT + r"(\." + _LABEL_UNDERSCORE_FMT + ")*"
_SUBDOMAIN_UNDERSCORE_RE = re.compile(_SUBDOMAIN_UNDERSCORE_FMT)
_SUBDOMAIN_UNDERSCORE_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', "
    "'-' or '.', and must start and end with an alphanumeric character"
)


def is_dns1123_subdomain_with_underscore(value: str) -> list[str]:
    """``IsDNS1123SubdomainWithUnderscore`` (DNS search domains such as ``_tcp.example.com``)."""
    errs = []
    if len(value) > 253:
        errs.append(_max_len(253))
    if not _SUBDOMAIN_UNDERSCORE_RE.fullmatch(value):
        errs.append(
            _regex_error(_SUBDOMAIN_UNDERSCORE_MSG, _SUBDOMAIN_UNDERSCORE_FMT, ("example.com",))
        )
    return errs


IP_MESSAGE = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
_IP_CHARS = re.compile(r"[0-9A-Fa-f:.]{2,45}")


def is_ip_address(value: str) -> bool:
    """An IPv4 or IPv6 address and nothing else: no zone (``%eth0``, which Python would take
    with any text after it), no prefix length, no leading zeros, no spaces."""
    if _IP_CHARS.fullmatch(value) is None:
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def is_valid_ip(value: str) -> list[str]:
    """``IsValidIP``, stricter: leading zeros (``010.0.0.1``) are refused, not only warned
    about, since tools downstream read them as octal."""
    return [] if is_ip_address(value) else [IP_MESSAGE]


_UUID_FMT = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_UUID_RE = re.compile(_UUID_FMT)


def is_uuid(value: str) -> list[str]:
    """A UUID in its canonical lowercase form, as the API server writes ``metadata.uid``."""
    if _UUID_RE.fullmatch(value):
        return []
    return [
        "must be a lowercase RFC 4122 UUID (e.g. '6f1d3c0e-8a4b-5c2d-9e7f-a1b2c3d4e5f6', "
        f"regex used for validation is '{_UUID_FMT}')"
    ]
