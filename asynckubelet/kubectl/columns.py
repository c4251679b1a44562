"""kubectl's ``-o custom-columns=HEADER:.path,...`` and ``-o custom-columns-file=FILE``,
laid out by Go's ``text/tabwriter`` as kubectl's are.

Each column is a JSONPath (``.metadata.name``, ``{.spec.containers[*].image}``, relaxed
as kubectl relaxes it) evaluated with missing keys allowed; a cell is the values joined
by commas as Go's ``fmt.Sprint`` writes them, ``<none>`` when there are none, with the
terminal's escape characters made harmless. A List gives a row per item.
"""

from __future__ import annotations

import re

from asynckubelet.kubectl import gotext
from asynckubelet.kubectl.jsonpath import JSONPath, JSONPathError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MIN_WIDTH, PADDING = 6, 3
"""kubectl's tab writer: a column is at least 6 wide, 3 spaces after its widest cell."""
_RELAXED = re.compile(r"\{\.?([^{}]+)\}|\.?([^{}]+)", re.DOTALL)


class ColumnsError(ValueError):
    """A custom-columns spec or file kubectl would refuse, in its words."""


class RowError(JSONPathError):
    """A column's JSONPath failed on an object; ``partial`` is the text of the rows
    before it, which kubectl prints before the error."""

    def __init__(self, message: str, *, partial: str) -> None:
        super().__init__(message)
        self.partial = partial


def relaxed(path: str) -> str:
    """kubectl's ``RelaxedJSONPathExpression``: ``a.b``, ``.a.b``, ``{a.b}`` or
    ``{.a.b}`` as the template ``{.a.b}``."""
    if not path:
        return path
    found = _RELAXED.fullmatch(path)
    if found is None:
        raise ColumnsError(
            "unexpected path string, expected a 'name1.name2' or '.name1.name2' or "
            "'{name1.name2}' or '{.name1.name2}'"
        )
    return "{." + (found.group(1) or found.group(2)) + "}"


def from_spec(spec: str) -> list[tuple[str, str]]:
    """The columns of ``HEADER:path,HEADER:path``: (header, template) pairs."""
    if not spec:
        raise ColumnsError("custom-columns format specified but no custom columns given")
    columns = []
    for part in spec.split(","):
        header, sep, path = part.partition(":")
        if not sep:
            raise ColumnsError(
                f"unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>"
            )
        columns.append((header, relaxed(path)))
    return columns


def from_file_text(text: str) -> list[tuple[str, str]]:
    """The columns of a custom-columns file: a line of headers, a line of paths, each
    split on white space."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    if not lines:
        raise ColumnsError(
            "invalid template, missing header line. Expected format is one line of space "
            "separated headers, one line of space separated column specs."
        )
    if len(lines) < 2:
        raise ColumnsError(
            "invalid template, missing spec line. Expected format is one line of space "
            "separated headers, one line of space separated column specs."
        )
    headers, specs = lines[0].split(), lines[1].split()
    if len(headers) != len(specs):
        raise ColumnsError(
            f"number of headers ({len(headers)}) and field specifications ({len(specs)}) "
            "don't match"
        )
    return [(header, relaxed(spec)) for header, spec in zip(headers, specs, strict=True)]


def escape_terminal(text: str) -> str:
    """kubectl's ``EscapeTerminal``: ESC as ``^[``, a carriage return as ``\\r``."""
    return text.replace("\x1b", "^[").replace("\r", "\\r")


def cell(template: JSONPath, obj: Any) -> str:
    """One object's cell of a column: its values joined by commas, or ``<none>``."""
    values = template.find_results(obj)
    texts = [] if values and values[0] else ["<none>"]
    texts.extend(escape_terminal(gotext.sprint(v)) for results in values for v in results)
    return ",".join(texts)


def render(columns: list[tuple[str, str]], document: Any, *, headers: bool = True) -> str:
    """``document`` (an object, or a List: a row per item) in the columns, laid out as
    kubectl's tab writer lays them out. A column's JSONPath failing on an object raises
    :class:`RowError`."""
    templates = [JSONPath(path, allow_missing_keys=True) for _, path in columns]
    lines = ["\t".join(header for header, _ in columns) + "\n"] if headers else []
    objects = document.get("items") if _is_list(document) else [document]
    try:
        for obj in objects or []:
            lines.append("\t".join(cell(t, obj) for t in templates) + "\n")
    except JSONPathError as e:
        raise RowError(str(e), partial=tabwrite("".join(lines))) from None
    return tabwrite("".join(lines))


def _is_list(document: Any) -> bool:
    """kubectl's ``meta.IsListType`` for a decoded object: a List kind or ``items``."""
    if not isinstance(document, dict):
        return False
    kind = str(document.get("kind") or "")
    return kind.endswith("List") or isinstance(document.get("items"), list)


def tabwrite(text: str) -> str:
    """Go's ``tabwriter`` (minimum width 6, padding 3, spaces): a tab ends a cell, cells
    of one column in consecutive lines that have it are padded to the widest plus 3; a
    line's last cell is written as it is."""
    lines = [line.split("\t") for line in text.split("\n")]
    widths: list[list[int]] = [[0] * (len(cells) - 1) for cells in lines]
    columns = max((len(cells) - 1 for cells in lines), default=0)
    for column in range(columns):
        row = 0
        while row < len(lines):
            if len(lines[row]) - 1 <= column:
                row += 1
                continue
            end = row
            width = MIN_WIDTH
            while end < len(lines) and len(lines[end]) - 1 > column:
                width = max(width, len(lines[end][column]) + PADDING)
                end += 1
            for each in range(row, end):
                widths[each][column] = width
            row = end
    out = []
    for cells, sizes in zip(lines, widths, strict=True):
        padded = [c + " " * (w - len(c)) for c, w in zip(cells, sizes, strict=False)]
        out.append("".join(padded) + cells[-1])
    return "\n".join(out)


__all__ = [
    "ColumnsError",
    "RowError",
    "cell",
    "escape_terminal",
    "from_file_text",
    "from_spec",
    "relaxed",
    "render",
    "tabwrite",
]
