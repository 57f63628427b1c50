"""How deep and how long-numbered a JSON value shoal takes: one checker for every entry point.

Limits (bounded cost, docs/security.md), the same wherever JSON enters shoal (NDJSON ingest over
REST, CLI, file-drop and Kafka; OTLP/JSON; the JSON bodies of `/v1/query` and `/v1/tables`):

- `MAX_DEPTH` = 64: arrays and objects nest at most 64 levels inside one value. The value is
  a whole request body, or one top-level field of an NDJSON line (the line's own object is
  not counted: `{"a": [[1]]}` has a field nested 2 deep).
- `MAX_NUMBER_CHARS` = 100: a number literal is at most 100 characters long.

Why: JSON parsers recurse per level (msgspec and Python's `json` give up near 1,000 levels
with a RecursionError), and Python converts integer text to `int` in quadratic time (it
refuses more than 4,300 digits). Text inside JSON strings never counts.

Every check here is exact for valid JSON and starts with necessary conditions that cost
about one pass of C code over the bytes (a value of at most 100 bytes can exceed neither
limit; depth 65 needs 65 opening brackets; a long number needs a run of 101 number
characters), so ordinary input pays almost nothing:

- `problem_in(text)`: the first limit a JSON text exceeds, or None.
- `exceeding(values)`: per value of an Arrow binary array of JSON texts, exceeds or not.
- `deep_key(text)`: the top-level key of an object whose value nests too deep, for a line
  a parser gave up on.
- `loads(body)`: a JSON request body decoded (msgspec) under the limits; raises
  `JsonLimitError` or `BadJsonError` (both 400 at the HTTP edge).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import numpy as np
import pyarrow as pa

from shoal.errors import BadJsonError, JsonLimitError

MAX_DEPTH = 64
MAX_NUMBER_CHARS = 100

# A JSON string, escapes included (the unrolled form is linear and fast in `re`).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NUMBER_CHAR = b"-+0123456789.eE"
# Number characters -> "0", everything else -> " ": a long number is then a run of zeros.
_NUMBER_MAP = bytes(0x30 if b in _NUMBER_CHAR else 0x20 for b in range(256))
_LONG_RUN = b"0" * (MAX_NUMBER_CHARS + 1)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:]')


@dataclass(frozen=True)
class LimitProblem:
    kind: Literal["depth", "number"]
    found: int          # levels reached (at least MAX_DEPTH + 1) or the literal's length

    def message(self) -> str:
        if self.kind == "depth":
            return f"JSON nested deeper than {MAX_DEPTH} levels"
        return (f"number literal of {self.found:,} characters (at most {MAX_NUMBER_CHARS} "
                "are taken)")


def _openers(text: bytes) -> int:
    return text.count(b"[") + text.count(b"{")


def _depth(brackets: bytes, limit: int) -> int:
    """Nesting depth of a string of brackets, counted up to `limit + 1`: each round removes
    the innermost pairs. Unmatched brackets (invalid JSON) count as open levels."""
    depth = 0
    while brackets and depth <= limit:
        shorter = _INNERMOST.sub(b"", brackets)  # one pass: pairs it makes wait a round
        if len(shorter) == len(brackets):
            return depth + _openers(brackets)
        depth += 1
        brackets = shorter
    return depth


def problem_in(text: bytes, *, max_depth: int = MAX_DEPTH) -> LimitProblem | None:
    """The first limit the JSON text `text` exceeds (depth before number), else None."""
    if len(text) <= MAX_NUMBER_CHARS:
        return None
    deep = _openers(text) > max_depth
    long_number = _LONG_RUN in text.translate(_NUMBER_MAP)
    if not (deep or long_number):
        return None
    bare = _STRING.sub(b'""', text)
    if deep:
        depth = _depth(bare.translate(None, _NOT_BRACKETS), max_depth)
        if depth > max_depth:
            return LimitProblem("depth", depth)
    if long_number:
        runs = re.findall(rb"0{%d,}" % (MAX_NUMBER_CHARS + 1), bare.translate(_NUMBER_MAP))
        if runs:
            return LimitProblem("number", max(map(len, runs)))
    return None


def exceeding(values: pa.Array) -> np.ndarray:
    """Per value (JSON texts in a binary/string array; null = fine): exceeds a limit."""
    n = len(values)
    out = np.zeros(n, bool)
    if n == 0 or values.null_count == n:
        return out
    validity, off_buf, data_buf = values.buffers()[:3]
    offsets = np.frombuffer(off_buf, np.int32, count=n + 1, offset=values.offset * 4)
    if data_buf is None or int(offsets[-1]) == int(offsets[0]):
        return out
    data = np.frombuffer(data_buf, np.uint8)[offsets[0]:offsets[-1]]
    starts = (offsets - offsets[0]).astype(np.int64)
    lengths = starts[1:] - starts[:-1]
    if not (lengths > MAX_NUMBER_CHARS).any():
        return out
    raw = data.tobytes()
    candidates = np.zeros(n, bool)
    if _openers(raw) > MAX_DEPTH:  # then count per value: where are the opening brackets
        pos = np.flatnonzero((data == 0x5B) | (data == 0x7B))
        candidates |= np.diff(np.searchsorted(pos, starts)) > MAX_DEPTH
    mapped = raw.translate(_NUMBER_MAP)
    at = mapped.find(_LONG_RUN)
    while at >= 0:
        i = int(np.searchsorted(starts, at, side="right")) - 1
        candidates[i] = True
        at = mapped.find(_LONG_RUN, int(starts[i + 1]))
    if validity is not None:
        candidates &= values.is_valid().to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(candidates).tolist():
        out[i] = problem_in(raw[starts[i]:starts[i + 1]]) is not None
    return out


def deep_key(text: bytes, *, max_depth: int = MAX_DEPTH) -> str | None:
    """The first top-level key of the JSON object `text` whose value nests deeper than
    `max_depth`, or None (not an object, or no such key). A linear token scan, meant for
    the rare text a parser could not decode."""
    depth = 0
    key: bytes | None = None
    last: bytes | None = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        c = tok[:1]
        if c == b'"':
            last = tok
        elif c == b":":
            if depth == 1:
                key = last
        elif c in (b"[", b"{"):
            depth += 1
            if depth > max_depth + 1 and key is not None:
                try:
                    name: str = msgspec.json.decode(key)
                    return name
                except (msgspec.DecodeError, UnicodeDecodeError):
                    return None
        else:
            depth -= 1
    return None


def loads(body: bytes | str, *, what: str = "the body") -> Any:
    """Decode one JSON document under the limits.

    `JsonLimitError` names the top-level key holding the problem when the document is an
    object (`field`); `BadJsonError` for anything that is not valid JSON (invalid UTF-8
    included). `what` names the document in messages ("the body").
    """
    data = body.encode() if isinstance(body, str) else bytes(body)
    problem = problem_in(data)
    if problem is not None:
        raise JsonLimitError(f"{what}: {problem.message()}", field=_field_of(data, problem))
    try:
        return msgspec.json.decode(data)
    except RecursionError:  # unreachable after problem_in; a parser's limit is still ours
        raise JsonLimitError(f"{what}: {LimitProblem('depth', MAX_DEPTH + 1).message()}",
                             field=deep_key(data, max_depth=MAX_DEPTH - 1)) from None
    except msgspec.DecodeError as e:
        reason = str(e).removeprefix("JSON is malformed: ")
        raise BadJsonError(f"{what} is not valid JSON: {reason}") from None
    except UnicodeDecodeError:
        raise BadJsonError(f"{what} is not valid JSON: a string is not valid UTF-8") from None


def _field_of(data: bytes, problem: LimitProblem) -> str | None:
    """The top-level key whose value holds `problem`, when `data` is an object."""
    if problem.kind == "depth":  # the body's own object is one of its levels
        return deep_key(data, max_depth=MAX_DEPTH - 1)
    try:
        members = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None
    for key, raw in members.items():
        if problem_in(bytes(raw)) is not None:
            return key
    return None
