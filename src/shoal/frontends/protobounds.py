"""Bounds on protobuf request bodies, checked on the wire before the message is parsed.

A protobuf body is small for what it can make a server build: an empty sub-message is two
bytes on the wire and a hundred or more once parsed (and far more once mapped to rows), so
a body under the byte cap could hold millions of attributes, records or labels and cost
gigabytes. `check_bounds(body, message_type, ...)` walks the body's wire format following
the message's own descriptor (every message-typed field, recursively, never building
anything) and refuses it with `TooManyElementsError` (413) naming the field, where it is
and the bound, as soon as

- one message holds more than `per_field[name]` elements of a repeated field `name`
  (e.g. more than 1,024 `attributes` in one log record), or
- the body holds more than `max_elements` sub-messages in all, or
- sub-messages nest deeper than `max_depth`.

It costs a pass over the fields of every sub-message (scalars are skipped, not decoded)
and stops at the first bound exceeded. Malformed wire data is left for the parser to
report: the walk stops quietly where it cannot go on.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from shoal.errors import IngestError, PayloadTooLargeError

# wire tag of a message-typed field -> (field name, repeated, the bound on its count in one
# message or None, the shape of its type or None when the walk counts it without entering)
Shape = dict[int, tuple[str, bool, "int | None", "Shape | None"]]


class TooManyElementsError(PayloadTooLargeError):
    """A protobuf body that holds more elements than the server takes in one request (413);
    nothing of it was written."""

    code = "too_many_elements"

    def __init__(self, message: str, *, count: int, limit: int) -> None:
        self.size = count
        self.limit = limit
        IngestError.__init__(self, message)


@cache
def shape_of(descriptor: Descriptor, opaque: frozenset[str] = frozenset(),
             per_field: tuple[tuple[str, int], ...] = ()) -> Shape:
    """The message-typed fields of `descriptor`, recursively (recursive types share one
    shape object). Messages of the types named in `opaque` (full names) are counted but not
    entered; a repeated field named in `per_field` carries its bound."""
    shape: Shape = {}
    _fill(descriptor, shape, {descriptor.full_name: shape}, opaque, dict(per_field))
    return shape


def _fill(descriptor: Descriptor, shape: Shape, seen: dict[str, Shape],
          opaque: frozenset[str], limits: dict[str, int]) -> None:
    for f in descriptor.fields:
        if f.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        sub = f.message_type
        leaf = sub.full_name in opaque or not any(
            g.type == FieldDescriptor.TYPE_MESSAGE for g in sub.fields)
        child = seen.get(sub.full_name)
        if child is None and not leaf:
            child = {}
            seen[sub.full_name] = child
            _fill(sub, child, seen, opaque, limits)
        repeated = bool(f.is_repeated)
        shape[f.number << 3 | 2] = (f.name, repeated,
                                    limits.get(f.name) if repeated else None,
                                    None if leaf else child)


class _Bounds:
    """The request-wide part of a walk: elements seen, the bounds, where the walk is."""

    __slots__ = ("elements", "max_depth", "max_elements", "message", "path")

    def __init__(self, message: str, max_elements: int, max_depth: int) -> None:
        self.message = message
        self.max_elements = max_elements
        self.max_depth = max_depth
        self.elements = 0
        self.path: list[tuple[str, int]] = []     # (field, index or -1), for the message

    def refuse(self, detail: str, name: str, count: int, limit: int) -> None:
        steps = [f"{n}[{i}]" if i >= 0 else n for n, i in self.path]
        if len(steps) > 8:
            steps = [*steps[:8], "..."]
        where = ".".join([*steps, name] if name else steps)
        raise TooManyElementsError(f"{self.message}: {detail} (at {where})",
                                   count=count, limit=limit)


def _walk(body: bytes, pos: int, end: int, shape: Shape, bounds: _Bounds) -> None:
    """Count (and enter, per `shape`) the message-typed fields of body[pos:end]."""
    get = shape.get
    counts: dict[int, int] | None = None
    while pos < end:
        tag = body[pos]                 # the field number and wire type (a varint)
        pos += 1
        if tag & 0x80:
            tag, pos = _varint(body, pos, tag)
            if pos < 0:
                return
        wire = tag & 7
        if wire == 2:
            if pos >= end:
                return
            length = body[pos]
            pos += 1
            if length & 0x80:
                length, pos = _varint(body, pos, length)
                if pos < 0:
                    return
            start = pos
            pos += length
            if pos > end:
                return
            entry = get(tag)
            if entry is None:
                continue
            name, repeated, limit, child = entry
            bounds.elements += 1
            if bounds.elements > bounds.max_elements:
                bounds.refuse(f"more than {bounds.max_elements:,} elements in one request",
                              name, bounds.elements, bounds.max_elements)
            index = -1
            if repeated:
                if counts is None:
                    counts = {}
                index = counts.get(tag, 0)
                counts[tag] = index + 1
                if limit is not None and index >= limit:
                    bounds.refuse(f"more than {limit:,} {name} in one message", name,
                                  index + 1, limit)
            if child is not None:
                path = bounds.path
                path.append((name, index))
                if len(path) > bounds.max_depth:
                    bounds.refuse(f"messages nested deeper than {bounds.max_depth}", "",
                                  len(path), bounds.max_depth)
                _walk(body, start, pos, child, bounds)
                path.pop()
        elif wire == 0:
            while pos < end and body[pos] & 0x80:
                pos += 1
            pos += 1
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:                   # groups or garbage: the parser will say what is wrong
            return


def _varint(body: bytes, pos: int, first: int) -> tuple[int, int]:
    """The rest of a varint whose first byte (`first`, at pos - 1) had its high bit set;
    (value, next position), or (0, -1) when it runs off the end or past 10 bytes."""
    value = first & 0x7F
    shift = 7
    end = len(body)
    while pos < end and shift < 70:
        b = body[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    return 0, -1


def check_bounds(body: bytes, message_type: Any, *, per_field: Mapping[str, int],
                 max_elements: int, max_depth: int = 64,
                 opaque: frozenset[str] = frozenset()) -> None:
    """Refuse (`TooManyElementsError`) a serialized `message_type` over the bounds;
    sub-messages of the types in `opaque` are counted, not entered."""
    descriptor = message_type.DESCRIPTOR
    shape = shape_of(descriptor, opaque, tuple(sorted(per_field.items())))
    _walk(body, 0, len(body), shape, _Bounds(descriptor.name, max_elements, max_depth))
