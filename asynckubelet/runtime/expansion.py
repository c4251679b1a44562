"""Kubernetes' ``$(VAR)`` expansion, for env values, command and args.

The rules are the kubelet's (``third_party/forked/golang/expansion``): ``$(NAME)`` becomes
the value of NAME when NAME is defined and stays as written otherwise; ``$$`` is an escaped
``$``; a ``$`` followed by anything else, or an unterminated ``$(``, is kept literally.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def expand(text: str, lookup: Mapping[str, str] | Callable[[str], str | None]) -> str:
    """Expand ``$(VAR)`` references in ``text``."""
    get: Callable[[str], str | None]
    if isinstance(lookup, Mapping):
        mapping = lookup
        get = mapping.get
    else:
        get = lookup
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end == -1:
                out.append(text[i:])
                break
            name = text[i + 2 : end]
            value = get(name)
            out.append(f"$({name})" if value is None else value)
            i = end + 1
        else:
            out.append("$")
            out.append(nxt)
            i += 2
    return "".join(out)
