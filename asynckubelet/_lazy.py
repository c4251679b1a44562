"""Public names a package exports but imports only on first use.

The top package and the lower tiers (:mod:`asynckubelet.node`, :mod:`asynckubelet.runtime`)
each list their public names in a table of name -> (module, attribute); a name's module is
imported when the name is first used, so that importing a package (for its errors, its
manifest loader, one of its submodules) loads neither the Docker client nor netlink nor
the HTTP server that other names need.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def exports(
    namespace: dict[str, Any], table: Mapping[str, tuple[str, str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module ``__getattr__`` and ``__dir__`` for the names of ``table``: the
    first use of a name imports its module and binds the value in ``namespace`` (the
    package's globals), where later uses find it."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[0]), where[1])
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
