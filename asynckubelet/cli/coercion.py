"""Option values converted without pydantic.

Typer (0.27 and later) converts every parameter's value, a default of None included,
through a pydantic ``TypeAdapter`` built for it on first use: importing pydantic and
building the adapters of a command's options takes longer than ``asynckubelet get pods``
takes otherwise. This command line only has ``str``, ``int``, ``float``, ``bool``,
``Path`` and ``list[str]`` parameters, which are converted here as Click converted them
(the same errors: ``Invalid value for '--tail': 'x' is not a valid integer.``), and
paths get Typer's own checks. A parameter of any other kind, or with a parser or bounds,
keeps Typer's conversion, and so does a Typer without the hook this uses
(:func:`use_plain_conversion` then changes nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

try:  # Typer's conversion hook and path checks, used where they exist
    from typer import _coercion, _param_types
except ImportError:  # pragma: no cover
    _coercion = _param_types = None  # type: ignore[assignment]

_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off", ""})
_NAMES = {int: "integer", float: "float", bool: "boolean"}
_SCALARS = (str, int, float, bool, Path)


def _scalar(kind: type, value: Any) -> Any:
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    if kind is str:
        return str(value)
    text = str(value).strip()
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(value)
    return kind(text)


_RuntimeParam: Any = getattr(_coercion, "RuntimeParam", None)
_check_path: Any = getattr(_param_types, "coerce_cli_path", None)


if _RuntimeParam is not None:

    @dataclass(frozen=True)
    class _Plain(_RuntimeParam):  # type: ignore[misc]
        """One parameter's conversion: ``kind`` for each of its values."""

        kind: type

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if isinstance(value, list | tuple):
                return [self._one(v, param, ctx) for v in value]
            return self._one(value, param, ctx)

        def _one(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.kind is Path:
                # Typer's checks (exists, readable...), given a Path: no pydantic needed.
                path = Path(value)
                return _check_path(path, self.parameter_info, path_type=Path, param=param, ctx=ctx)
            try:
                return _scalar(self.kind, value)
            except ValueError:
                name = _NAMES.get(self.kind, self.kind.__name__)
                raise typer.BadParameter(
                    f"{value!r} is not a valid {name}.", ctx=ctx, param=param
                ) from None


def _kind(annotation: Any) -> type | None:
    if annotation in _SCALARS:
        return annotation  # type: ignore[no-any-return]
    if getattr(annotation, "__origin__", None) is list and annotation.__args__ == (str,):
        return str
    return None


def _plain(info: Any) -> bool:
    """Whether ``info`` (a ParameterInfo) asks for nothing beyond the type's conversion."""
    return (
        getattr(info, "parser", None) is None
        and getattr(info, "min", None) is None
        and getattr(info, "max", None) is None
        and getattr(info, "path_type", None) is None
    )


def use_plain_conversion(params: Iterable[Any]) -> None:
    """Convert the simple ones of ``params`` (a command's Typer parameters) here."""
    if _RuntimeParam is None or _check_path is None:
        return
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or not hasattr(param, "_runtime_param"):
            continue
        kind = _kind(descriptor.annotation)
        if kind is None or descriptor.file_annotation is not None:
            continue
        if not _plain(descriptor.parameter_info):
            continue
        param._runtime_param = _Plain(
            parameter_info=descriptor.parameter_info, annotation=descriptor.annotation, kind=kind
        )
