"""YAML text to plain data, bounded the way the API server's decoder bounds it.

Manifests come from whoever can write a file or pipe text into a root process, so reading
one must cost no more than its size allows. The API server refuses a request over 3 MiB
before reading it, and its YAML decoder (go-yaml, through sigs.k8s.io/yaml) fails a document
whose aliases expand to far more than the text holds ("document contains excessive
aliasing", the ratio of alias-driven to all decode steps in ``allowedAliasRatio``), an anchor
that contains itself, and a key given twice. This module does the same. Values are built
straight from libyaml's events rather than through PyYAML's composer, which would first make a
node object, with two position marks, for every scalar (hundreds of megabytes for a hostile
3 MiB file) and would share aliased values without ever counting them.

Scalars resolve as PyYAML's SafeLoader resolves them, with the differences Kubernetes users
expect: timestamps stay strings, a plain ``=``, ``!``, ``&`` or ``*`` is text, and an integer
too long to be one (more than :data:`MAX_INT_DIGITS` digits) stays the text it was, as
go-yaml leaves a number it cannot parse. Every failure is a :class:`yaml.MarkedYAMLError`
with the line and column of the offending node.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.error import Mark, MarkedYAMLError
from yaml.nodes import ScalarNode

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_INT_DIGITS", "load_documents"]

MAX_DOCUMENT_BYTES = 3 * 1024 * 1024
"""The API server's request size limit; larger input is refused before it is parsed."""
MAX_INT_DIGITS = 4300
"""Longer integers stay text (Python's own limit on reading one)."""

_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000

_TAG = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT = (_TAG + t for t in ("str", "null", "bool", "int", "float"))
_BINARY, _TIMESTAMP, _MERGE = _TAG + "binary", _TAG + "timestamp", _TAG + "merge"
_SEQ, _MAP = _TAG + "seq", _TAG + "map"
_PLAIN_TAGS = frozenset({None, "!"})
_TEXT_TAGS = frozenset({_STR, _TIMESTAMP})

_RESOLVERS: dict[str | None, list[tuple[str, Any]]] = {
    first: [
        (tag, rx) for tag, rx in resolvers if tag not in (_TIMESTAMP, _TAG + "value", _TAG + "yaml")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_CONSTRUCTOR = SafeConstructor()
_Parser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _allowed_alias_ratio(decodes: int) -> float:
    """go-yaml's ``allowedAliasRatio``: 99% for small documents, 10% from 4 million steps."""
    if decodes <= _ALIAS_RATIO_LOW:
        return 0.99
    if decodes >= _ALIAS_RATIO_HIGH:
        return 0.10
    span = _ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW
    return 0.99 - 0.89 * (decodes - _ALIAS_RATIO_LOW) / span


def _error(problem: str, mark: Mark | None) -> MarkedYAMLError:
    return MarkedYAMLError(problem=problem, problem_mark=mark)


def _shown(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class _Frame:
    __slots__ = ("anchor", "key", "key_mark", "keys", "mark", "merges", "start", "value")

    def __init__(
        self, value: list[Any] | dict[Any, Any], anchor: str | None, start: int, mark: Mark
    ):
        self.value = value
        self.anchor = anchor
        self.start = start
        self.mark = mark
        self.key: Any = _NO_KEY
        self.key_mark: Mark | None = None
        self.keys: dict[str, int] | None = {} if isinstance(value, dict) else None
        self.merges: list[tuple[Any, Mark]] = []


_NO_KEY = object()
_MERGE_KEY = object()


class _Document:
    """One document's values and go-yaml's decode bookkeeping."""

    def __init__(self, events: Any) -> None:
        self.events = events
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.open_anchors: set[str] = set()
        self.decodes = 1  # the document node
        self.aliases = 0

    def _count(self, decodes: int, aliases: int, mark: Mark | None) -> None:
        self.decodes += decodes
        self.aliases += aliases
        if (
            self.aliases > 100
            and self.decodes > 1000
            and self.aliases / self.decodes > _allowed_alias_ratio(self.decodes)
        ):
            raise _error("document contains excessive aliasing", mark)

    def build(self) -> Any:
        get = self.events.get_event
        while True:
            event = get()
            kind = type(event)
            if kind is yaml.ScalarEvent:
                self._count(1, 0, event.start_mark)
                value = _scalar(event)
                if event.anchor is not None:
                    self.anchors[event.anchor] = (value, 1)
                done, root = self._add(value, event.start_mark, scalar=event)
            elif kind is yaml.AliasEvent:
                value = self._alias(event)
                done, root = self._add(value, event.start_mark)
            elif kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
                self._count(1, 0, event.start_mark)
                self._open(event, [] if kind is yaml.SequenceStartEvent else {})
                continue
            elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                frame = self.stack.pop()
                value = _finish(frame)
                if frame.anchor is not None:
                    self.open_anchors.discard(frame.anchor)
                    self.anchors[frame.anchor] = (value, self.decodes - frame.start)
                done, root = self._add(value, frame.mark)
            else:
                raise _error(f"unexpected {kind.__name__}", event.start_mark)
            if done:
                return root

    def _open(self, event: Any, value: list[Any] | dict[Any, Any]) -> None:
        default = _SEQ if isinstance(value, list) else _MAP
        if event.tag not in _PLAIN_TAGS and event.tag != default:
            raise _error(
                f"could not determine a constructor for the tag {_shown(event.tag)!r}",
                event.start_mark,
            )
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        self.stack.append(_Frame(value, event.anchor, self.decodes - 1, event.start_mark))

    def _alias(self, event: Any) -> Any:
        name = event.anchor
        if name in self.open_anchors:
            raise _error(f"anchor {_shown(name)!r} value contains itself", event.start_mark)
        found = self.anchors.get(name)
        if found is None:
            raise _error(f"unknown anchor {_shown(name)!r} referenced", event.start_mark)
        value, cost = found
        self._count(1 + cost, cost, event.start_mark)
        return value

    def _add(self, value: Any, mark: Mark, *, scalar: Any = None) -> tuple[bool, Any]:
        if not self.stack:
            return True, value
        frame = self.stack[-1]
        target = frame.value
        if isinstance(target, list):
            target.append(value)
            return False, None
        if frame.key is _NO_KEY:
            if scalar is not None and scalar.value == "<<" and value == "<<" and scalar.implicit[0]:
                frame.key = _MERGE_KEY
                return False, None
            try:
                hash(value)
            except TypeError:
                raise _error("found unhashable key", mark) from None
            if scalar is not None and frame.keys is not None:
                earlier = frame.keys.get(scalar.value)
                if earlier is not None:
                    raise _error(
                        f"mapping key {_quote(scalar.value)} already defined at line {earlier}",
                        mark,
                    )
                frame.keys[scalar.value] = mark.line + 1
            frame.key = value
            frame.key_mark = mark
            return False, None
        if frame.key is _MERGE_KEY:
            frame.merges.append((value, mark))
        else:
            target[frame.key] = value
        frame.key = _NO_KEY
        return False, None


def _quote(text: str) -> str:
    return '"' + _shown(text).replace('"', '\\"') + '"'


def _finish(frame: _Frame) -> Any:
    value = frame.value
    if not frame.merges:
        return value
    merged: dict[Any, Any] = {}
    for source, mark in frame.merges:
        items = source if isinstance(source, list) else [source]
        for item in reversed(items):
            if not isinstance(item, dict):
                raise _error("map merge requires map or sequence of maps as the value", mark)
            merged.update(item)
    merged.update(value)
    return merged


def _scalar(event: Any) -> Any:  # noqa: C901  (mirrors go-yaml's resolve and scalar decoding)
    value: str = event.value
    tag = event.tag
    explicit = tag not in _PLAIN_TAGS
    if not explicit:
        if not event.implicit[0]:
            return value
        resolvers = _RESOLVERS.get(value[0] if value else "", ())
        tag = _STR
        for candidate, rx in resolvers:
            if rx.match(value):
                tag = candidate
                break
    if tag in _TEXT_TAGS or tag == _MERGE:
        return value
    if tag == _NULL:
        return None
    try:
        if tag == _BOOL:
            return _CONSTRUCTOR.bool_values[value.lower()]
        if tag == _INT:
            if value.isdigit() and (value[0] != "0" or len(value) == 1):
                if len(value) > MAX_INT_DIGITS:
                    raise ValueError(value)
                return int(value)
            return _CONSTRUCTOR.construct_yaml_int(ScalarNode(tag, value))
        if tag == _FLOAT:
            return _CONSTRUCTOR.construct_yaml_float(ScalarNode(tag, value))
        if tag == _BINARY:
            return _CONSTRUCTOR.construct_yaml_binary(ScalarNode(tag, value, event.start_mark))
    except (ValueError, KeyError, IndexError):
        if not explicit:
            return value  # as go-yaml: a plain number it cannot read is text
        kind = tag.rpartition(":")[2]
        raise _error(
            f"cannot decode !!str `{_shown(value)}` as a !!{kind}", event.start_mark
        ) from None
    raise _error(f"could not determine a constructor for the tag {_shown(tag)!r}", event.start_mark)


def load_documents(text: str) -> Iterator[Any]:
    """Each document of ``text`` as plain data (None for an empty one); raises
    :class:`yaml.YAMLError` at the first document that cannot be read."""
    events = _Parser(text)
    try:
        events.get_event()
        while not events.check_event(yaml.StreamEndEvent):
            events.get_event()
            value = _Document(events).build()
            events.get_event()
            yield value
    finally:
        events.dispose()
