"""kubectl's JSONPath templates (``-o jsonpath=...``), the dialect of client-go's
``util/jsonpath``, which differs from generic JSONPath libraries.

A template is text with actions in braces: ``{.items[*].metadata.name}``,
``{range .items[*]}{.metadata.name}{"\\n"}{end}``. Inside an action: ``.field`` (a
backslash escapes a dot: ``labels.app\\.kubernetes\\.io/name``), ``[n]``,
``[start:end:step]`` with negative indexes, ``[*]`` and ``.*`` (a map's values too),
``..`` recursive descent, ``['key']``, unions ``[a,b]``, filters ``[?(@.x=="y")]`` with
``== != < > <= >=`` or existence ``[?(@.x)]``, quoted literals, ``$``/``@``, ``true``,
``false`` and numbers, and the ``range``/``end`` words. Each action's results are printed
one after another, several results of one action joined by a space, maps and lists as
JSON, ``null`` for null; a key that is missing is an error unless missing keys are
allowed (kubectl's default). The rules, messages and odd corners (a bracketed ``'a.b'``
is a path; ``[]`` is the first element; an empty slice of one input ends the step) are
client-go's, found in its source and tests.

A template is the user's input and the object may be large: parsing is a loop (the few
nested parses are bounded by :data:`MAX_DEPTH`), recursive descent walks with a stack,
``range`` nests at most :data:`MAX_DEPTH` deep, and evaluation stops with an error once it
has produced :data:`MAX_VALUES` values, so no template hangs or exhausts the stack.
"""

from __future__ import annotations

import re
import unicodedata

from asynckubelet.kubectl import gotext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 64
"""The deepest ``range`` nesting, and the deepest nested parse (filters in filters)."""
MAX_VALUES = 1_000_000
"""The most values one evaluation may produce before it stops with an error."""
MAX_INDEX = 2**63 - 1


class JSONPathError(ValueError):
    """A template that does not parse, or that fails on the object, in client-go's words."""


class _Failed(Exception):
    """An evaluation error, with the values the failing step had (an existence filter
    reads them, as client-go's does)."""

    def __init__(self, message: str, partial: list[Any]) -> None:
        super().__init__(message)
        self.partial = partial


# -- nodes: tuples, the first item the kind ------------------------------------------------

# ("list", [nodes]) ("text", str) ("field", name) ("wildcard",) ("recursive",)
# ("array", ((known, value, derived), ...)) ("union", [list nodes])
# ("filter", left list, right list, operator) ("int", n) ("float", x) ("bool", b)
# ("identifier", name)

_DICT_KEY = re.compile(r"'([^']*)'")
_SLICE = re.compile(r"(-?[0-9]*)(:-?[0-9]*)?(:-?[0-9]*)?")
_FILTER = re.compile(r"([^!<>=]+)([!<>=]+)(.+?)", re.DOTALL)
_TERMINATORS = frozenset(" \t\r\n.,[]$@{}")


def _is_alnum(c: str) -> bool:
    return c == "_" or c.isalpha() or c.isdecimal()


def _char_name(c: str) -> str:
    """Go's ``%#U``: ``U+002A '*'``."""
    code = f"U+{ord(c):04X}"
    printable = (c.isprintable() and unicodedata.category(c) != "Zs") or c == " "
    return f"{code} '{c}'" if printable else code


def _go_int(text: str) -> int | None:
    """``strconv.Atoi``: ASCII digits with an optional sign, within int64; else None."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -MAX_INDEX - 1 <= value <= MAX_INDEX else None


class _Parser:
    """client-go's parser: text and actions, each action a flat list of nodes."""

    def __init__(self, text: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise JSONPathError(f"template nested deeper than {MAX_DEPTH}")
        self.text, self.depth = text, depth
        self.pos = self.start = 0
        self.root: list[Any] = []

    def parse(self) -> list[Any]:
        text = self.text
        while True:
            brace = text.find("{", self.pos)
            if brace < 0:
                if self.start < len(text):
                    self.root.append(("text", text[self.start :]))
                return self.root
            if brace > self.start:
                self.root.append(("text", text[self.start : brace]))
            self.pos = self.start = brace + 1
            action: list[Any] = []
            self.root.append(("list", action))
            self._action(action)

    def _consume(self) -> str:
        value = self.text[self.start : self.pos]
        self.start = self.pos
        return value

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _action(self, cur: list[Any]) -> None:
        """The nodes of one action, up to its closing brace (consumed)."""
        text = self.text
        while True:
            rest = text.startswith
            if rest("}", self.pos):
                self.pos += 1
                self._consume()
                return
            if rest("[?(", self.pos):
                self._filter(cur)
                continue
            if rest("..", self.pos):
                self._recursive(cur)
                continue
            c = self._peek()
            self.pos += len(c)
            if c in ("", "\r", "\n"):
                raise JSONPathError("unclosed action")
            if c in (" ", "@", "$"):
                self._consume()
            elif c == "[":
                self._array(cur)
            elif c in "\"'":
                self._quote(cur, c)
            elif c == ".":
                self._field(cur)
            elif c in "+-" or c.isdecimal():
                self.pos -= 1
                self._number(cur)
            elif _is_alnum(c):
                self.pos -= 1
                self._identifier(cur)
            else:
                raise JSONPathError(f"unrecognized character in action: {_char_name(c)}")

    def _identifier(self, cur: list[Any]) -> None:
        while self.pos < len(self.text) and self.text[self.pos] not in _TERMINATORS:
            self.pos += 1
        value = self._consume()
        if value in ("true", "false"):
            cur.append(("bool", value == "true"))
        else:
            cur.append(("identifier", value))

    def _recursive(self, cur: list[Any]) -> None:
        if cur and cur[-1][0] == "recursive":
            raise JSONPathError("invalid multiple recursive descent")
        self.pos += 2
        self._consume()
        cur.append(("recursive",))
        if _is_alnum(self._peek()):
            self._field(cur)

    def _number(self, cur: list[Any]) -> None:
        if self._peek() in ("+", "-"):
            self.pos += 1
        while self._peek() == "." or (self._peek() and self._peek().isdecimal()):
            self.pos += 1
        value = self._consume()
        number = _go_int(value)
        if number is not None:
            cur.append(("int", number))
            return
        if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)", value):
            parsed = float(value)
            if parsed not in (float("inf"), float("-inf")):
                cur.append(("float", parsed))
                return
        raise JSONPathError(f"cannot parse number {value}")

    def _array(self, cur: list[Any]) -> None:
        end = self.pos
        while end < len(self.text) and self.text[end] not in "\n]":
            end += 1
        if end >= len(self.text) or self.text[end] == "\n":
            raise JSONPathError("unterminated array")
        self.pos = end + 1
        inner = self._consume()[1:-1]
        if inner == "*":
            inner = ":"
        parts = inner.split(",")
        if len(parts) > 1:
            union = [self._sub(f"[{part.strip(' ')}]") for part in parts]
            cur.append(("union", [("list", nodes) for nodes in union]))
            return
        key = _DICT_KEY.fullmatch(inner)
        if key is not None:
            cur.extend(self._sub(f".{key.group(1)}"))
            return
        found = _SLICE.fullmatch(inner)
        if found is None:
            raise JSONPathError(f"invalid array index {inner}")
        params: list[tuple[bool, int, bool]] = []
        for i, group in enumerate(found.groups()):
            if group is not None and group != "":
                value = group[1:] if i > 0 else group
                if i > 0 and value == "":
                    params.append((False, 0, False))
                    continue
                number = _go_int(value)
                if number is None:
                    raise JSONPathError(f"array index {value} is not a number")
                params.append((True, number, False))
            elif i == 1:
                params.append((True, params[0][1] + 1, True))
            else:
                params.append((False, 0, False))
        cur.append(("array", tuple(params)))

    def _filter(self, cur: list[Any]) -> None:
        self.pos += 3
        self._consume()
        text, begin, ended, pair = self.text, False, False, ""
        while True:
            c = self._peek()
            self.pos += len(c)
            if c in ("", "\n"):
                raise JSONPathError("unterminated filter")
            if c in "\"'":
                if not begin:
                    begin, pair = True, c
                    continue
                if text[self.pos - 2] != "\\" and c == pair:
                    ended = True
            elif c == ")" and begin == ended:
                break
        if self._peek() != "]":
            raise JSONPathError("unclosed array expect ]")
        self.pos += 1
        inner = self._consume()[:-2]
        found = _FILTER.fullmatch(inner)
        if found is None:
            cur.append(("filter", ("list", self._sub(inner)), ("list", []), "exists"))
            return
        left, operator, right = found.groups()
        cur.append(("filter", ("list", self._sub(left)), ("list", self._sub(right)), operator))

    def _quote(self, cur: list[Any], quote: str) -> None:
        while True:
            c = self._peek()
            self.pos += len(c)
            if c in ("", "\n"):
                raise JSONPathError("unterminated quoted string")
            if c == quote and self.text[self.pos - 2] != "\\":
                break
        value = self._consume()
        try:
            cur.append(("text", unquote(value)))
        except ValueError:
            raise JSONPathError(f"unquote string {value} error invalid syntax") from None

    def _field(self, cur: list[Any]) -> None:
        self._consume()
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c == "\\":
                self.pos += 2
            elif c in _TERMINATORS:
                break
            else:
                self.pos += 1
        self.pos = min(self.pos, len(text))
        value = self._consume()
        cur.append(("wildcard",) if value == "*" else ("field", value.replace("\\", "")))

    def _sub(self, text: str) -> list[Any]:
        """client-go's ``parseAction``: ``text`` parsed as one action, its nodes."""
        nodes = _Parser("{" + text + "}", self.depth + 1).parse()
        first = nodes[0]
        return list(first[1]) if first[0] == "list" else []


_SIMPLE_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}


def unquote(quoted: str) -> str:
    """Go's ``strconv.Unquote`` for a single- or double-quoted string (client-go's
    ``UnquoteExtend``); ValueError when Go's would fail."""
    if len(quoted) < 2 or quoted[0] != quoted[-1] or quoted[0] not in "\"'":
        raise ValueError(quoted)
    quote, body = quoted[0], quoted[1:-1]
    if "\\" not in body and quote not in body:
        return body
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c == quote:
            raise ValueError(quoted)
        if c != "\\":
            out += c.encode("utf-8", "surrogatepass")
            i += 1
            continue
        i = _escape(body, i + 1, quote, out)
    return out.decode("utf-8", "replace")


def _escape(body: str, i: int, quote: str, out: bytearray) -> int:
    """The escape at ``body[i]`` (after its backslash) added to ``out``; where the text
    goes on. ValueError for one Go refuses."""
    if i >= len(body):
        raise ValueError(body)
    e = body[i]
    i += 1
    if e in _SIMPLE_ESCAPES:
        out.append(_SIMPLE_ESCAPES[e])
        return i
    if e in "'\"":
        if e != quote:
            raise ValueError(body)
        out += e.encode()
        return i
    if e in "01234567":
        digits = body[i - 1 : i + 2]
        if not re.fullmatch(r"[0-7]{3}", digits) or int(digits, 8) > 255:
            raise ValueError(body)
        out.append(int(digits, 8))
        return i + 2
    size = {"x": 2, "u": 4, "U": 8}.get(e, 0)
    digits = body[i : i + size]
    if not size or len(digits) != size or not re.fullmatch(r"[0-9a-fA-F]+", digits):
        raise ValueError(body)
    value = int(digits, 16)
    if e == "x":
        out.append(value)
    elif value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
        raise ValueError(body)
    else:
        out += chr(value).encode()
    return i + size


def parse(template: str) -> list[Any]:
    """The template's nodes; JSONPathError with client-go's message when it does not parse."""
    return _Parser(template, 0).parse()


# -- evaluation ------------------------------------------------------------------------------


def _children(value: Any) -> list[Any]:
    """What ``.*`` and ``..`` see in a value: a map's values (by key), a list's items, a
    string's bytes (Go indexes a string by byte)."""
    if isinstance(value, dict):
        return [value[k] for k in sorted(value, key=str)]
    if isinstance(value, list):
        return list(value)
    if isinstance(value, str):
        return list(value.encode("utf-8"))
    return []


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    raise _Failed("invalid type for comparison", [])


def _compare(left: Any, right: Any, operator: str) -> bool:
    """Go's ``text/template`` comparisons, as client-go's filters use them."""
    if operator not in ("==", "!=", "<", ">", "<=", ">="):
        raise _Failed(f"unrecognized filter operator {operator}", [])
    kinds = (_kind(left), _kind(right))
    if kinds[0] != kinds[1]:
        raise _Failed("incompatible types for comparison", [])
    if operator in ("==", "!="):
        return bool(left == right) == (operator == "==")
    if kinds[0] == "bool":
        raise _Failed("invalid type for comparison", [])
    less = bool(left < right)
    if operator == "<":
        return less
    if operator == ">=":
        return not less
    less_equal = less or bool(left == right)
    return less_equal if operator == "<=" else not less_equal


class JSONPath:
    """A parsed template: :meth:`execute` prints it over an object (decoded JSON)."""

    def __init__(self, template: str, *, allow_missing_keys: bool = True) -> None:
        self.template = template
        self.nodes = parse(template)
        self.allow_missing_keys = allow_missing_keys
        self._begin = self._inside = self._end = self._produced = 0
        self._last_end = -1

    def find_results(self, data: Any) -> list[list[Any]]:
        """The results of each top-level node (a ``range``'s body once per value)."""
        self._begin = self._inside = self._end = self._produced = 0
        self._last_end = -1
        try:
            return self._find(data, 0, 0)
        except _Failed as e:
            raise JSONPathError(str(e)) from None

    def execute(self, data: Any, *, as_json: bool = False) -> str:
        """The template printed over ``data`` (client-go's ``Execute``; ``as_json`` is
        ``-o jsonpath-as-json``: each node's results as an indented JSON array)."""
        return "".join(print_results(r, as_json=as_json) for r in self.find_results(data))

    def _find(self, data: Any, start: int, depth: int) -> list[list[Any]]:
        """client-go's ``FindResults`` from node ``start``: a ``range`` runs the nodes after
        it once per value (on nothing when it has none) up to its ``end``."""
        if depth > MAX_DEPTH:
            raise _Failed(f"range nested deeper than {MAX_DEPTH}", [])
        nodes, cur, full = self.nodes, [data], []
        i = start
        while i < len(nodes):
            results = self._walk(cur, nodes[i])
            if 0 < self._end <= self._inside:
                self._end -= 1
                self._last_end = i
                break
            if self._begin > 0:
                self._begin -= 1
                self._inside += 1
                for value in results or [None]:
                    found = self._find(value, i + 1, depth + 1)
                    if results:
                        full.extend(found)
                self._inside -= 1
                if i < self._last_end < len(nodes):
                    i = self._last_end
                i += 1
                continue
            full.append(results)
            i += 1
        return full

    def _count(self, values: list[Any]) -> list[Any]:
        self._produced += len(values) + 1
        if self._produced > MAX_VALUES:
            raise _Failed(f"the template produced more than {MAX_VALUES} values", [])
        return values

    def _walk(self, values: list[Any], node: tuple[Any, ...]) -> list[Any]:
        kind = node[0]
        if kind == "list":
            for each in node[1]:
                values = self._walk(values, each)
            return values
        if kind == "text":
            return self._count([node[1]])
        if kind in ("int", "float", "bool"):
            return self._count([node[1]] * len(values))
        if kind == "identifier":
            return self._identifier(values, node[1])
        step = {
            "field": self._field,
            "array": self._array,
            "filter": self._filter,
            "wildcard": self._wildcard,
            "recursive": self._recursive,
            "union": self._union,
        }[kind]
        return self._count(step(values, node))

    def _identifier(self, values: list[Any], name: str) -> list[Any]:
        if name == "range":
            self._begin += 1
            return values
        if name == "end":
            if self._inside > 0:
                self._end += 1
                return []
            raise _Failed("not in range, nothing to end", [])
        raise _Failed(f"unrecognized identifier {name}", values)

    def _field(self, values: list[Any], node: tuple[Any, ...]) -> list[Any]:
        name = node[1]
        results = [v[name] for v in values if isinstance(v, dict) and name in v]
        if not results and values and not self.allow_missing_keys:
            raise _Failed(f"{name} is not found", [])
        return results

    def _array(self, values: list[Any], node: tuple[Any, ...]) -> list[Any]:
        (known0, start, _), (known1, end, derived), (known2, step, _) = node[1]
        results: list[Any] = []
        for value in values:
            if value is None:
                continue
            if not isinstance(value, list):
                raise _Failed(f"{gotext.go_type(value)} is not array or slice", values)
            length = len(value)
            first = start if known0 else 0
            first += length if first < 0 else 0
            last = end if known1 else length
            if last < 0 or (last == 0 and derived):
                last += length
            if last == first:
                return results
            if first >= length or first < 0:
                raise _Failed(f"array index out of bounds: index {first}, length {length}", values)
            if last > length or last < 0:
                raise _Failed(
                    f"array index out of bounds: index {last - 1}, length {length}", values
                )
            if first > last:
                raise _Failed(f"starting index {first} is greater than ending index {last}", values)
            if known2 and step <= 0:
                raise _Failed("step must be > 0", values)
            results.extend(value[first : last : step if known2 else 1])
        return results

    def _union(self, values: list[Any], node: tuple[Any, ...]) -> list[Any]:
        results: list[Any] = []
        for part in node[1]:
            results.extend(self._walk(values, part))
        return results

    def _wildcard(self, values: list[Any], node: tuple[Any, ...]) -> list[Any]:
        return [child for value in values for child in _children(value)]

    def _recursive(self, values: list[Any], node: tuple[Any, ...]) -> list[Any]:
        """Each value with a non-empty content, then its contents', depth first, with a
        stack rather than recursion (an object may nest deeply)."""
        results: list[Any] = []
        stack = list(reversed(values))
        while stack:
            value = stack.pop()
            if not isinstance(value, (dict, list, str)) or not value:
                continue
            results.append(value)
            if len(results) > MAX_VALUES:
                raise _Failed(f"the template produced more than {MAX_VALUES} values", [])
            if not isinstance(value, str):
                stack.extend(reversed(_children(value)))
        return results

    def _filter(self, values: list[Any], node: tuple[Any, ...]) -> list[Any]:
        results: list[Any] = []
        for value in values:
            if not isinstance(value, list):
                raise _Failed(
                    f"{gotext.sprint(value)} is not array or slice and cannot be filtered", values
                )
            try:
                results.extend(item for item in value if self._passes(item, node))
            except _Failed as e:
                raise _Failed(str(e), values) from None
        return results

    def _passes(self, item: Any, node: tuple[Any, ...]) -> bool:
        """Whether ``item`` passes the filter ``node`` (``[?(@.x)]``, ``[?(@.x=="y")]``)."""
        left, right, operator = node[1], node[2], node[3]
        if operator == "exists":
            try:
                return bool(self._walk([item], left))
            except _Failed as e:
                return bool(e.partial)
        lefts = self._walk([item], left)
        if len(lefts) != 1:
            if lefts:
                raise _Failed("can only compare one element at a time", [])
            return False
        rights = self._walk([item], right)
        if len(rights) != 1:
            if rights:
                raise _Failed("can only compare one element at a time", [])
            return False
        return _compare(lefts[0], rights[0], operator)


def text_of(value: Any) -> str:
    """One result as client-go prints it: maps and lists as compact JSON, the rest as Go's
    ``fmt.Sprint`` (``null`` for null)."""
    if isinstance(value, (dict, list)):
        return gotext.marshal(value)
    if value is None:
        return "null"
    return gotext.sprint(value)


def print_results(results: list[Any], *, as_json: bool = False) -> str:
    """One node's results, joined by a space (``as_json``: one indented JSON array)."""
    if as_json:
        return gotext.marshal(list(results), indent="    ") + "\n"
    return " ".join(text_of(value) for value in results)


__all__ = [
    "MAX_DEPTH",
    "MAX_VALUES",
    "JSONPath",
    "JSONPathError",
    "parse",
    "print_results",
    "text_of",
    "unquote",
]
