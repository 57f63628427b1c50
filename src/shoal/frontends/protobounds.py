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

# field number -> (field name, repeated, the field's message type's shape or None when it
# is a message of no message-typed fields, which the walk counts but does not enter)
Shape = dict[int, tuple[str, bool, "Shape | None"]]


class TooManyElementsError(PayloadTooLargeError):
    """A protobuf body that holds more elements than the server takes in one request (413);
    nothing of it was written."""

    code = "too_many_elements"

    def __init__(self, message: str, *, count: int, limit: int) -> None:
        self.size = count
        self.limit = limit
        IngestError.__init__(self, message)


@cache
def shape_of(descriptor: Descriptor, opaque: frozenset[str] = frozenset()) -> Shape:
    """The message-typed fields of `descriptor`, recursively (recursive types share one
    shape object). Messages of the types named in `opaque` (full names) are counted but not
    entered."""
    shape: Shape = {}
    _fill(descriptor, shape, {descriptor.full_name: shape}, opaque)
    return shape


def _fill(descriptor: Descriptor, shape: Shape, seen: dict[str, Shape],
          opaque: frozenset[str]) -> None:
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
            _fill(sub, child, seen, opaque)
        shape[f.number] = (f.name, bool(f.is_repeated), None if leaf else child)


class _Walk:
    __slots__ = (
        "body",
        "elements",
        "max_depth",
        "max_elements",
        "message",
        "path",
        "per_field",
    )

    def __init__(self, body: bytes, message: str, per_field: Mapping[str, int],
                 max_elements: int, max_depth: int) -> None:
        self.body = body
        self.message = message
        self.per_field = per_field
        self.max_elements = max_elements
        self.max_depth = max_depth
        self.elements = 0
        self.path: list[str] = []       # where the walk is, for the refusal's message

    def walk(self, pos: int, end: int, shape: Shape) -> None:
        body = self.body
        counts: dict[int, int] = {}
        while pos < end:
            tag = body[pos]             # the field number and wire type (a varint)
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
                start, pos = pos, pos + length
                if pos > end:
                    return
                field = shape.get(tag >> 3)
                if field is None:
                    continue
                name, repeated, child = field
                self.elements += 1
                if self.elements > self.max_elements:
                    self._refuse(f"more than {self.max_elements:,} elements in one request",
                                 name, self.elements, self.max_elements)
                index = -1
                if repeated:
                    index = counts.get(tag, 0)
                    counts[tag] = index + 1
                    limit = self.per_field.get(name)
                    if limit is not None and index >= limit:
                        self._refuse(f"more than {limit:,} {name} in one message", name,
                                     index + 1, limit)
                if child is not None:
                    self.path.append(f"{name}[{index}]" if repeated else name)
                    if len(self.path) > self.max_depth:
                        self._refuse(f"messages nested deeper than {self.max_depth}", "",
                                     len(self.path), self.max_depth)
                    self.walk(start, pos, child)
                    self.path.pop()
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

    def _refuse(self, detail: str, name: str, count: int, limit: int) -> None:
        where = ".".join([*self.path[:8], *(["..."] if len(self.path) > 8 else []), name])
        raise TooManyElementsError(f"{self.message}: {detail} (at {where.strip('.')})",
                                   count=count, limit=limit)


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
    _Walk(body, descriptor.name, per_field, max_elements, max_depth).walk(
        0, len(body), shape_of(descriptor, opaque))
