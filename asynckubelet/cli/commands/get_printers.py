"""``get``'s template outputs, as kubectl's printers make them: ``-o jsonpath=TEMPLATE``,
``jsonpath-file=FILE``, ``jsonpath-as-json=TEMPLATE``, ``custom-columns=HEADER:.path,...``
and ``custom-columns-file=FILE``.

kubectl prints what it fetched through the template: a list ``get`` gives the ``List``
object (``.items``), a named object itself. A template or file that does not parse is
refused before anything is asked of the node, with kubectl's message; a template that
fails on the objects (a missing key with ``--allow-missing-template-keys=false``, an
index out of range) ends the command with kubectl's ``error executing jsonpath``. Like
:mod:`~asynckubelet.cli.commands.get_output`, this module imports the standard library
only at load, and the JSONPath modules when a template is asked for.
"""

from __future__ import annotations

import sys

from asynckubelet.cli.commands.get_args import Refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

JSONPATH_FORMATS = ("jsonpath", "jsonpath-as-json", "jsonpath-file")
COLUMNS_FORMATS = ("custom-columns", "custom-columns-file")
FORMATS = JSONPATH_FORMATS + COLUMNS_FORMATS
MAX_FILE = 4 << 20
"""The largest template file read (kubectl has no bound; a template is never this big)."""


def split(output: str | None) -> tuple[str, str] | None:
    """``(format, value)`` of a template output (``jsonpath={.a}`` -> ``("jsonpath",
    "{.a}")``; a bare ``jsonpath`` has an empty value); None for any other output."""
    if not output:
        return None
    name, _, value = output.partition("=")
    return (name, value) if name in FORMATS else None


def _read(path: str, *, what: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
    except OSError as e:
        reason = (e.strerror or str(e)).lower()
        raise Refused(f"error reading {what} {path}, open {path}: {reason}") from None
    if len(data) > MAX_FILE:
        raise Refused(f"error reading {what} {path}, larger than {MAX_FILE} bytes")
    return data.decode("utf-8", "replace")


class JSONPathPrinter:
    """kubectl's JSONPath printer: the template over each object it is given."""

    def __init__(self, name: str, template: str, *, allow_missing: bool) -> None:
        from asynckubelet.kubectl.jsonpath import JSONPath, JSONPathError

        self.template, self.as_json = template, name == "jsonpath-as-json"
        try:
            self.jsonpath = JSONPath(template, allow_missing_keys=allow_missing)
        except JSONPathError as e:
            raise Refused(f"error parsing jsonpath {template}, {e}") from None

    def __call__(self, document: Any) -> str:
        from asynckubelet.kubectl import gotext
        from asynckubelet.kubectl.jsonpath import JSONPathError

        try:
            return self.jsonpath.execute(document, as_json=self.as_json)
        except JSONPathError as e:
            raise Refused(
                f"error executing jsonpath {gotext.go_quote(self.template)}: Error executing "
                f"template: {e}. Printing more information for debugging the template:\n"
                f"\ttemplate was:\n\t\t{self.template}\n"
                f"\tobject given to jsonpath engine was:\n\t\t{gotext.gosyntax(document)}\n\n\n"
            ) from None


class ColumnsPrinter:
    """kubectl's custom-columns printer: a header line before the first object's rows
    (unless ``headers`` is off), then a row per object (per item of a List)."""

    def __init__(self, columns: list[tuple[str, str]], *, headers: bool) -> None:
        from asynckubelet.kubectl.jsonpath import JSONPath, JSONPathError

        self.columns, self.headers = columns, headers
        for _, path in columns:
            try:
                JSONPath(path)
            except JSONPathError as e:
                raise Refused(str(e)) from None

    def __call__(self, document: Any) -> str:
        from asynckubelet.kubectl import columns

        headers, self.headers = self.headers, False
        try:
            return columns.render(self.columns, document, headers=headers)
        except columns.RowError as e:
            sys.stdout.write(e.partial)
            raise Refused(str(e)) from None


def printer(
    output: str | None, *, no_headers: bool = False, allow_missing: bool = True
) -> JSONPathPrinter | ColumnsPrinter | None:
    """The printer of a template ``output`` (None for the other outputs), or Refused with
    kubectl's words for a template it would not take."""
    found = split(output)
    if found is None:
        return None
    name, value = found
    if name in JSONPATH_FORMATS:
        if not value:
            raise Refused("template format specified but no template given")
        if name == "jsonpath-file":
            value = _read(value, what="--template")
        return JSONPathPrinter(name, value, allow_missing=allow_missing)
    from asynckubelet.kubectl import columns

    if not value:
        raise Refused("custom-columns format specified but no custom columns given")
    try:
        if name == "custom-columns-file":
            text = _read(value, what="template")
            return ColumnsPrinter(columns.from_file_text(text), headers=True)
        return ColumnsPrinter(columns.from_spec(value), headers=not no_headers)
    except columns.ColumnsError as e:
        raise Refused(str(e)) from None


def parse_bool(value: Any, flag: str) -> bool:
    """A boolean flag's value as kubectl's flags read it (``strconv.ParseBool``)."""
    if isinstance(value, bool):
        return value
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise Refused(
        f'invalid argument "{value}" for "{flag}" flag: strconv.ParseBool: parsing '
        f'"{value}": invalid syntax'
    )


def for_options(options: dict[str, Any]) -> JSONPathPrinter | ColumnsPrinter | None:
    """The printer ``get``'s options ask for (None: not a template output)."""
    return printer(
        options.get("output"),
        no_headers=bool(options.get("no_headers")),
        allow_missing=parse_bool(
            options.get("allow_missing_template_keys", True), "--allow-missing-template-keys"
        ),
    )


__all__ = [
    "FORMATS",
    "ColumnsPrinter",
    "JSONPathPrinter",
    "for_options",
    "parse_bool",
    "printer",
    "split",
]
