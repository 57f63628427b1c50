"""OTLP values -> JSON: `AnyValue`, attribute maps, ids (the `dynamic` columns of the tables).

- `AnyValue`: string, bool, int and double as themselves (a non-finite double becomes
  `null`), bytes as base64 text, arrays as JSON arrays, kvlists as objects (keys as sent),
  an empty value as `null`.
- Attribute maps (resource, scope, record, event, link, data point) become JSON objects
  whose dotted keys are nested, so `get_json_object(attributes, '$.http.method')` reaches
  the attribute `http.method`: `{"http.method": "GET", "http.route": "/a"}` is stored as
  `{"http": {"method": "GET", "route": "/a"}}`. Keys are taken in sorted order, so a key
  comes before its extensions; where a prefix already holds a value that is not an object
  (`db.system` = "x" and `db.system.name` = "y"), the rest of the longer key stays literal
  at that level (`{"db": {"system": "x", "system.name": "y"}}`), so nothing is lost. Keys
  with empty segments (`a..b`, `.a`) are kept literal. A repeated key: the last one wins.
- Ids: lowercase hex; an empty id is `None`.
- An array or map value of more than `MAX_VALUE_ITEMS` items is refused
  (`TooManyElementsError`, 413) before it is built.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

import msgspec

from shoal.frontends.protobounds import TooManyElementsError

_encode = msgspec.json.Encoder().encode
# Items of one array or map value: checked before the value is built.
MAX_VALUE_ITEMS = 10_000
_by_key = itemgetter(0)


def _check_items(n: int, name: str) -> None:
    if n > MAX_VALUE_ITEMS:
        raise TooManyElementsError(f"more than {MAX_VALUE_ITEMS:,} items in one {name} "
                                   "(an attribute or body value)", count=n,
                                   limit=MAX_VALUE_ITEMS)


def any_value(v: Any) -> Any:
    """One `AnyValue` as a JSON-ready Python value."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "double_value":
        d = v.double_value
        return d if math.isfinite(d) else None
    if kind == "bool_value":
        return v.bool_value
    if kind == "kvlist_value":
        pairs = v.kvlist_value.values
        _check_items(len(pairs), "kvlist_value.values")
        return {kv.key: any_value(kv.value) for kv in pairs}
    if kind == "array_value":
        items = v.array_value.values
        _check_items(len(items), "array_value.values")
        return [any_value(x) for x in items]
    if kind == "bytes_value":
        return base64.b64encode(v.bytes_value).decode("ascii")
    return None


def nest(items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Key/value pairs (keys possibly dotted) as a nested object (see module docstring)."""
    return _nest(items, [])


def _nest(items: Iterable[tuple[str, Any]], conflicts: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in sorted(items, key=_by_key):
        if "." not in key:
            out[key] = value
            continue
        parts = key.split(".")
        if "" in parts:
            out[key] = value
            continue
        node = out
        last = len(parts) - 1
        for i in range(last):
            p = parts[i]
            child = node.get(p, _MISSING)
            if child is _MISSING:
                child = node[p] = {}
            elif not isinstance(child, dict):
                conflicts.append(key)
                node[".".join(parts[i:])] = value
                break
            node = child
        else:
            node[parts[last]] = value
    return out


_MISSING = object()


def attributes(kvs: Any) -> dict[str, Any]:
    """A repeated `KeyValue` field as a nested JSON-ready object."""
    if not kvs:
        return {}
    return nest((kv.key, any_value(kv.value)) for kv in kvs)


# ---- attribute maps straight to JSON -------------------------------------------------------
# Spans of one instrumentation carry the same attribute keys over and over, so the nested
# skeleton of a key list is worked out once (a "plan": the JSON text between the values, and
# which value goes where) and each record only encodes its values into it. The result is
# byte-for-byte `_encode(attributes(kvs))`. Key lists where a prefix holds a value
# (`db.system` + `db.system.name`) take the generic path: there a kvlist value would merge.

class _Slot:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


_Plan = tuple[tuple[bytes, ...], tuple[int, ...]]
_PLANS: dict[tuple[str, ...], _Plan | None] = {}
_MAX_PLANS = 4096


def _compile(keys: tuple[str, ...]) -> _Plan | None:
    last = {k: i for i, k in enumerate(keys)}        # a repeated key: the last one wins
    conflicts: list[str] = []
    tree = _nest(((k, _Slot(i)) for k, i in last.items()), conflicts)
    if conflicts:
        return None
    literals: list[bytes] = []
    order: list[int] = []
    pending: list[bytes] = []

    def walk(node: dict[str, Any]) -> None:
        pending.append(b"{")
        for n, (k, v) in enumerate(node.items()):
            pending.append((b"," if n else b"") + _encode(k) + b":")
            if isinstance(v, _Slot):
                literals.append(b"".join(pending))
                pending.clear()
                order.append(v.index)
            else:
                walk(v)
        pending.append(b"}")

    walk(tree)
    literals.append(b"".join(pending))
    return tuple(literals), tuple(order)


def attributes_json(kvs: Any) -> bytes:
    """A repeated `KeyValue` field as compact JSON bytes (`{}` when empty)."""
    if not kvs:
        return b"{}"
    keys = tuple([kv.key for kv in kvs])
    try:
        plan = _PLANS[keys]     # one lookup: another thread may clear the cache meanwhile
    except KeyError:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[keys] = _compile(keys)
    if plan is None:
        return _encode(attributes(kvs))
    literals, order = plan
    values = [kv.value for kv in kvs]
    parts = [literals[0]]
    for j, i in enumerate(order, 1):
        parts.append(_encode(any_value(values[i])))
        parts.append(literals[j])
    return b"".join(parts)


def to_json(value: Any) -> bytes:
    return _encode(value)


def hex_id(raw: bytes) -> str | None:
    return raw.hex() if raw else None


def service_name(resource_attrs: Any) -> str | None:
    """The string value of the resource attribute `service.name`, if any."""
    for kv in resource_attrs:
        if kv.key == "service.name":
            v = kv.value
            return v.string_value if v.WhichOneof("value") == "string_value" else \
                _text(any_value(v))
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else _encode(value).decode()


def body_text(v: Any) -> str | None:
    """A log body for the `body` string column: a string as is, anything else as JSON text."""
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "string_value":
        return v.string_value
    return _text(any_value(v))
