"""The coercion rules (docs/ingest.md) for one JSON value (`convert`) and one line (`line_result`).

This is the reference semantics. Values come as their raw JSON text. `line_result` makes every
error message of coercion; the vectorised paths (`_columns.py`, `coerce.py`) only decide which
lines need it, and must give the same rows as it for all others (property-tested).

Decisions, in one place:
- Canonical JSON (for `dynamic`, for objects/arrays stored in `string` columns, for `props`):
  the value's JSON text exactly as sent with insignificant whitespace removed. Every token
  (string with its escapes, number with its spelling, literal) is kept byte for byte, so keys
  keep their input order and non-ASCII text stays UTF-8 (or stays escaped, if sent escaped).
- An integer is a JSON number without fraction or exponent: `1.0` and `1e2` are not integers
  and are rejected by `int`, `long` and epoch-nanosecond `timestamp` (as Arrow's reader does).
- A scalar in a `string` column is stored as its JSON text as sent (`1.50` -> `"1.50"`).
- `bytes` columns take a standard base64 string (RFC 4648 alphabet, padded, strict).
- `timestamp` takes RFC 3339 text (`T`/`t` or a space between date and time, `Z`/`z` or
  `±hh:mm`, seconds required, 1-9 fraction digits, no leap second `:60`); the zone may be
  left out, and the time is then UTC (`2026-11-28 10:00:00`). Or an epoch number in the
  table's `timestamp_unit` (`unit_ns` nanoseconds per unit, default 1): an integer in
  nanoseconds; in a coarser unit a fraction or exponent is taken too, rounded half to even
  to the nanosecond. The result must fit int64 nanoseconds.
- `vector(N)` components are rounded to float32; one that overflows float32 is rejected.
- JSON kept as JSON (a `dynamic` value, an object, array or number stored in a `string`
  column, an unknown field kept in `props`) obeys `shoal.types.jsonlimits`: at most 64
  levels deep, number literals of at most 100 characters. Values converted to a typed column
  are judged by the type (an integer literal of 21+ characters is out of range without
  being converted). A line nested too deep to decode at all (~1,000 levels) is an error of
  the field that holds the deep value.
"""

from __future__ import annotations

import binascii
import math
import re
from decimal import ROUND_HALF_EVEN, Context, Decimal
from decimal import Overflow as DecimalOverflow
from typing import Any, Literal

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shoal.errors import LineError
from shoal.ingest._lines import decode_line_dict
from shoal.types.columns import ColumnType
from shoal.types.jsonlimits import (MAX_DEPTH, MAX_NUMBER_CHARS, LimitProblem, deep_key,
                                    problem_in)
from shoal.types.conventions import DEFAULT_CONVENTIONS, IngestConventions
from shoal.types.schema import PROPS_COLUMN, TIMESTAMP_COLUMN, Schema, is_identifier_safe

UnknownFieldPolicy = Literal["props", "drop", "reject"]
INT_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
NS_MIN, NS_MAX = -(2**63), 2**63 - 1
FOUND_MAX_CHARS = 40
INT_MAX_CHARS = 20  # "-9223372036854775808": a longer integer literal is out of every range

# The same pattern drives the vectorised check (RE2) and this one (Python re): keep them equal.
# The zone is optional (UTC when absent), and a space may stand for the `T`.
RFC3339_PATTERN = (r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
                   r"([Zz]|[+-][0-9]{2}:[0-9]{2})?")
RFC3339_RE = re.compile(RFC3339_PATTERN)
_WS = frozenset(b" \t\r\n")
_EXACT = Context(prec=256)  # every digit of a 100-character literal times 10**9, exactly
_JSON_ENCODE = msgspec.json.encode
_JSON_DECODE = msgspec.json.decode


class ValueProblem(Exception):
    """A value the column type does not accept; the text is the message after the field."""


def json_kind(raw: bytes) -> str:
    """The JSON type of a raw value (assumed valid JSON, no leading whitespace)."""
    c = raw[0]
    if c == 0x22:
        return "string"
    if c == 0x7B:
        return "object"
    if c == 0x5B:
        return "array"
    if c == 0x74 or c == 0x66:
        return "boolean"
    if c == 0x6E:
        return "null"
    return "number"


def is_integer_text(raw: bytes) -> bool:
    return b"." not in raw and b"e" not in raw and b"E" not in raw


def minify(raw: bytes) -> bytes:
    """The canonical JSON form of a raw value: insignificant whitespace removed, tokens kept."""
    if _WS.isdisjoint(raw):
        return raw
    return msgspec.json.format(raw, indent=-1)


def encode_key(key: str) -> bytes:
    return _JSON_ENCODE(key)


def json_object(members: list[tuple[str, bytes]]) -> bytes:
    """A JSON object from (key, canonical raw value) pairs, in the given order."""
    return b"{" + b",".join(encode_key(k) + b":" + v for k, v in members) + b"}"


def props_object(own: bytes | None, unknown: list[tuple[str, bytes]]) -> bytes:
    """The `props` value of a record with unknown fields (raw values, in the final order).

    The record's own `props`, if it sent one: an object is merged (its members first, minus
    names that are also unknown fields), any other non-null value is kept under "props".
    """
    members = [(k, minify(v)) for k, v in unknown]
    if own is None or own == b"null":
        return json_object(members)
    own = minify(own)
    if own[:1] == b"{":
        names = {k for k, _ in unknown}
        base = [(k, minify(bytes(v))) for k, v in
                _JSON_DECODE(own, type=dict[str, msgspec.Raw]).items() if k not in names]
        return json_object(base + members)
    return json_object([("props", own), *members])


def describe(raw: bytes) -> str:
    """What was found, for an error message: `string "yes"`, `1.5`, `true`, `object`."""
    kind = json_kind(raw)
    if kind == "string":
        text: str = _JSON_DECODE(raw)
        if len(text) > FOUND_MAX_CHARS:
            text = text[:FOUND_MAX_CHARS] + "..."
        return "string " + _JSON_ENCODE(text).decode()
    if kind in ("object", "array"):
        return kind
    text = raw.decode()
    return text if len(text) <= FOUND_MAX_CHARS else text[:FOUND_MAX_CHARS] + "..."


def days_from_civil(y: Any, m: Any, d: Any) -> Any:
    """Days since 1970-01-01 of a proleptic Gregorian date (ints or int64 numpy arrays)."""
    y = y - (m <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + np.where(m > 2, -3, 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def days_in_month(y: Any, m: Any) -> Any:
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    table = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
    return table[m] + ((m == 2) & leap)


def rfc3339_ns(text: str) -> int:
    """Epoch nanoseconds of an RFC 3339 timestamp; ValueError if not one or out of range."""
    m = RFC3339_RE.fullmatch(text)
    if m is None:
        raise ValueError("not RFC 3339")
    y, mo, d, hh, mi, ss = (int(text[a:b]) for a, b in
                            ((0, 4), (5, 7), (8, 10), (11, 13), (14, 16), (17, 19)))
    if not (1 <= mo <= 12 and 1 <= d <= int(days_in_month(y, mo)) and hh <= 23 and mi <= 59
            and ss <= 59):
        raise ValueError("not RFC 3339")
    frac = m.group(1)
    ns_frac = int(frac[1:].ljust(9, "0")) if frac else 0
    zone = m.group(2)
    offset = 0
    if zone is not None and zone not in ("Z", "z"):
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 23 or om > 59:
            raise ValueError("not RFC 3339")
        offset = (oh * 3600 + om * 60) * (1 if zone[0] == "+" else -1)
    sec = int(days_from_civil(y, mo, d)) * 86400 + hh * 3600 + mi * 60 + ss - offset
    ns = sec * 1_000_000_000 + ns_frac
    if not NS_MIN <= ns <= NS_MAX:
        raise ValueError("out of range")
    return ns


_UNIT_WORDS = {1: ("nanoseconds", "ns"), 1_000: ("microseconds", "us"),
               1_000_000: ("milliseconds", "ms"), 1_000_000_000: ("seconds", "s")}


def _expects(ctype: ColumnType, unit_ns: int = 1) -> str:
    k = ctype.kind
    if k == "timestamp" and unit_ns != 1:
        word, unit = _UNIT_WORDS[unit_ns]
        return (f"timestamp expects an RFC 3339 string or epoch {word} "
                f"(timestamp_unit='{unit}')")
    if k == "bool":
        return "bool expects true or false"
    if k in INT_RANGES:
        lo, hi = INT_RANGES[k]
        return f"{k} expects an integer in [{lo}, {hi}]"
    if k == "real":
        return "real expects a finite number"
    if k == "timestamp":
        return "timestamp expects an RFC 3339 string or integer epoch nanoseconds"
    if k == "vector":
        return f"{ctype} expects an array of {ctype.dim} numbers"
    if k == "bytes":
        return "bytes expects a base64 string"
    return f"{ctype} cannot take this value"  # pragma: no cover - string/dynamic take anything


def _problem(ctype: ColumnType, raw: bytes, note: str = "", unit_ns: int = 1) -> ValueProblem:
    tail = f" ({note})" if note else ""
    return ValueProblem(f"{_expects(ctype, unit_ns)}, got {describe(raw)}{tail}")


def epoch_ns(raw: bytes, unit_ns: int) -> int:
    """Nanoseconds of an epoch number (raw JSON number text) in units of `unit_ns` ns;
    ValueError if it is not one the unit takes, OverflowError if out of int64."""
    if is_integer_text(raw):
        if len(raw) > INT_MAX_CHARS:
            raise OverflowError
        ns = int(raw) * unit_ns
    elif unit_ns == 1 or len(raw) > MAX_NUMBER_CHARS:
        raise ValueError  # a fraction of a nanosecond, or past the JSON number limit
    else:
        try:
            scaled = _EXACT.multiply(Decimal(raw.decode()), unit_ns)
        except DecimalOverflow:
            raise OverflowError from None
        if not scaled.is_finite() or abs(scaled) > NS_MAX + 1:
            raise OverflowError
        ns = int(scaled.to_integral_value(ROUND_HALF_EVEN))
    if not NS_MIN <= ns <= NS_MAX:
        raise OverflowError
    return ns


def _vector(ctype: ColumnType, raw: bytes) -> list[float]:
    dim = ctype.dim
    assert dim is not None
    items: list[msgspec.Raw] = _JSON_DECODE(raw, type=list[msgspec.Raw])
    if len(items) != dim:
        raise ValueProblem(f"{ctype} expects {dim} numbers, got {len(items)}")
    out: list[float] = []
    for i, item in enumerate(items):
        text = bytes(item)
        if json_kind(text) != "number":
            raise ValueProblem(f"{ctype} expects {dim} numbers, got {describe(text)} "
                               f"at index {i}")
        # float() of the text is correctly rounded for integers too, with no int() between.
        with np.errstate(over="ignore"):
            f32 = np.float32(float(text))
        if not np.isfinite(f32):
            raise ValueProblem(f"{ctype} expects {dim} numbers, got {describe(text)} "
                               f"at index {i} (out of float32 range)")
        out.append(float(f32))
    return out


def convert(ctype: ColumnType, raw: bytes, unit_ns: int = 1) -> Any:
    """The Python value stored for a non-null raw JSON value; raises ValueProblem.

    Values: bool, int, float, str, bytes (bytes and dynamic), int nanoseconds (timestamp),
    list of float32-exact floats (vector). `unit_ns`: nanoseconds per unit of an epoch
    number in a timestamp column (the table's `timestamp_unit`).
    """
    kind = json_kind(raw)
    k = ctype.kind
    if k == "string":
        if kind == "string":
            return raw[1:-1].decode() if b"\\" not in raw else _JSON_DECODE(raw)
        check_limits(raw)
        return minify(raw).decode()
    if k == "dynamic":
        check_limits(raw)
        return minify(raw)
    if k == "bool":
        if kind != "boolean":
            raise _problem(ctype, raw)
        return raw == b"true"
    if k in INT_RANGES:
        if kind != "number" or not is_integer_text(raw) or len(raw) > INT_MAX_CHARS:
            raise _problem(ctype, raw)
        value = int(raw)
        lo, hi = INT_RANGES[k]
        if not lo <= value <= hi:
            raise _problem(ctype, raw)
        return value
    if k == "real":
        if kind != "number":
            raise _problem(ctype, raw)
        f = float(raw)
        if not math.isfinite(f):
            raise _problem(ctype, raw)
        return f
    if k == "timestamp":
        if kind == "number":
            try:
                return epoch_ns(raw, unit_ns)
            except OverflowError:
                raise _problem(ctype, raw, "out of range", unit_ns) from None
            except (ValueError, ArithmeticError):
                raise _problem(ctype, raw, unit_ns=unit_ns) from None
        if kind != "string":
            raise _problem(ctype, raw, unit_ns=unit_ns)
        try:
            return rfc3339_ns(_JSON_DECODE(raw))
        except ValueError as e:
            raise _problem(ctype, raw, "out of range" if str(e) == "out of range" else "",
                           unit_ns) from e
    if k == "vector":
        if kind != "array":
            raise _problem(ctype, raw)
        return _vector(ctype, raw)
    if k == "bytes":
        if kind != "string":
            raise _problem(ctype, raw)
        try:
            return binascii.a2b_base64(_JSON_DECODE(raw).encode("ascii"), strict_mode=True)
        except (binascii.Error, UnicodeEncodeError):
            raise _problem(ctype, raw, "not valid base64") from None
    raise AssertionError(f"no coercion for {ctype}")  # headers never reach here


def check_limits(raw: bytes) -> None:
    """ValueProblem if a value kept as JSON is nested too deep or has a too long number."""
    problem = problem_in(raw)
    if problem is not None:
        raise ValueProblem(problem.message())


# -- one line ------------------------------------------------------------------------------

DEFAULT = object()  # a row value meaning "the column's default"


def field_error(line: int, key: str, message: str) -> LineError:
    return LineError(line, key, f"line {line}: field {encode_key(key).decode()}: {message}")


def no_props_message(key: str) -> str:
    """Why an unknown field is refused by a table whose props are off."""
    why = ("is not a valid column name" if not is_identifier_safe(key)
           else "was not added as a column by this request")
    return f"{why}, and the table keeps no props (props='off')"


def line_result(text: bytes, line: int, schema: Schema, unknown: UnknownFieldPolicy,
                 ingest_time_ns: int, rank: dict[str, int],
                 conventions: IngestConventions = DEFAULT_CONVENTIONS
                 ) -> tuple[dict[str, Any] | None, list[LineError]]:
    """One non-blank line -> (row values by column name, or None; its errors).

    `conventions`: the table's `timestamp_unit` and `props`; with props off, `unknown="props"`
    refuses the fields it would have kept there, and a record may not write `props`."""
    if not text.isascii():
        try:
            text.decode("utf-8")
        except UnicodeDecodeError as e:
            return None, [LineError(line, None,
                                    f"line {line}: invalid JSON: invalid UTF-8 (byte {e.start})")]
    try:
        obj = decode_line_dict(text)
    except msgspec.ValidationError:
        found = json_kind(text.strip(b" \t\r"))
        return None, [LineError(line, None, f"line {line}: expected a JSON object, got {found}")]
    except msgspec.DecodeError as e:
        reason = str(e).removeprefix("JSON is malformed: ")
        return None, [LineError(line, None,
                                f"line {line}: invalid JSON: {reason[:1].lower()}{reason[1:]}")]
    except RecursionError:  # nested too deep to decode at all: name the field if we can
        message = LimitProblem("depth", MAX_DEPTH + 1).message()
        key = deep_key(text)
        if key is None:
            return None, [LineError(line, None, f"line {line}: {message}")]
        return None, [field_error(line, key, message)]
    errors: list[LineError] = []
    row: dict[str, Any] = {}
    extra: list[tuple[str, bytes]] = []
    for key, raw in obj.items():
        col = schema.get(key)
        value = bytes(raw)
        if col is None:
            if unknown == "reject":
                errors.append(field_error(line, key, "not in the table schema (mode reject)"))
            elif unknown == "props" and not conventions.props:
                errors.append(field_error(line, key, no_props_message(key)))
            elif unknown == "props":
                problem = problem_in(value)
                if problem is None:
                    extra.append((key, value))
                else:
                    errors.append(field_error(line, key, problem.message()))
        elif col.header is not None:
            errors.append(field_error(
                line, key, "is a Kafka header column; only a Kafka pipeline writes it"))
        elif value == b"null":
            row[key] = None
        elif key == PROPS_COLUMN and not conventions.props:
            errors.append(field_error(line, key, "the table keeps no props (props='off'); "
                                      "send the value as a field of its own"))
        else:
            try:
                row[key] = convert(col.type, value, conventions.unit_ns)
            except ValueProblem as p:
                errors.append(field_error(line, key, str(p)))
    for col in schema.columns:
        if col.header is not None:
            continue
        name = col.name
        if name in obj:
            if row.get(name, 0) is None:
                if name == TIMESTAMP_COLUMN:
                    row[name] = ingest_time_ns
                elif not col.nullable:
                    errors.append(field_error(line, name, "NOT NULL column got null"))
        elif name == TIMESTAMP_COLUMN:
            row[name] = ingest_time_ns
        elif col.default is not None:
            row[name] = DEFAULT
        elif not col.nullable:
            errors.append(field_error(line, name, "NOT NULL column is missing (no default)"))
    if extra:
        extra.sort(key=lambda kv: rank.get(kv[0], len(rank)))
        own = obj.get(PROPS_COLUMN)
        row[PROPS_COLUMN] = props_object(None if own is None else bytes(own), extra)
    return (None if errors else row), errors


def rows_to_arrays(schema: Schema, rows: list[dict[str, Any]]) -> list[pa.Array]:
    arrays = []
    for col in schema.columns:
        values = [r.get(col.name) for r in rows]
        defaults = np.fromiter((v is DEFAULT for v in values), bool, len(values))
        if defaults.any():
            values = [None if v is DEFAULT else v for v in values]
        if col.type.kind == "timestamp":
            arr = pa.array(values, pa.int64()).view(col.type.arrow())
        else:
            arr = pa.array(values, col.type.arrow())
        if defaults.any():
            arr = pc.if_else(pa.array(defaults), col.default_scalar(), arr)
        arrays.append(arr)
    return arrays
