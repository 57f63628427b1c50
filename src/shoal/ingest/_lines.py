"""The lines of an NDJSON body, and one msgspec pass that picks raw field values out of them.

`LineIndex` finds every line (numpy over the body) and classifies it: blank (whitespace
only: skipped but counted), object (starts with `{` and ends with `}` once whitespace is
stripped, valid UTF-8) or bad (cannot be one JSON object). Invariant the fast path relies
on: when every non-blank line of a body is an object line, no JSON value can span two lines
(a break inside an object or array always leaves a line that starts or ends with another
byte), so a streaming reader that yields as many values as there are non-blank lines has
yielded exactly one value per line, in order.

`raw_pass()` validates object lines and picks out the raw JSON text of some top-level keys,
finding (when the field set forbids unknown keys) every other top-level key in order of first
appearance (lines top to bottom, keys left to right). Two implementations, same results:
- the C scanner (`_scan.c`, built by setup): one pass with the GIL released, writing the
  picked texts straight into Arrow binary buffers, and converting the values of the typed
  columns it is given (`types`) itself, so that the body is parsed once. It decides
  only what it is sure of: a line it finds invalid is checked with msgspec, and nesting past
  128 levels or a key that unescapes to a quote, backslash or control character hands the
  whole pass to msgspec (other escaped keys it matches by their unescaped text);
- `msgspec_pass()`: a msgspec Struct whose fields are `msgspec.Raw` (the value's JSON text,
  borrowed from the body, without building Python values); unknown keys are added as fields.
msgspec is the JSON syntax authority of shoal (strict RFC 8259: no NaN, no trailing data);
Arrow's reader is laxer (it takes NaN and several objects on one line). tests/ingest/
test_scan.py holds the scanner to msgspec's answers.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from shoal.ingest._ext import scan as _scan
from shoal.types.columns import ColumnType

logger = logging.getLogger(__name__)

BLANK, OBJECT, BAD = 0, 1, 2
_NOT_UTF8 = 3  # the scanner's index: shaped as an object, not valid UTF-8 (BAD, not structural)
# Bytes per msgspec `decode_lines` call. The call holds the GIL throughout: small pieces
# keep each hold to a millisecond or so, so the extent writer's threads (stats, IPC) are
# not stalled behind a long decode while a body is coerced.
CHUNK_BYTES = 1 << 18
MAX_UNKNOWN_FIELDS = 64  # unknown keys a pass declares; lines with others go per-line

_UNKNOWN_RE = re.compile(r"^Object contains unknown field `")
_RENAME_FORBIDDEN = re.compile(r'[\\"\x00-\x1f]')
_DICT_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])


@dataclass
class LineIndex:
    body: bytes
    starts: np.ndarray   # int64 byte offset of each line
    ends: np.ndarray     # int64 end of each line, excluding its newline
    kind: np.ndarray     # uint8 BLANK | OBJECT | BAD per line
    structural_bad: bool  # some non-blank line cannot be a single object (see the invariant)

    @classmethod
    def build(cls, body: bytes) -> LineIndex:
        if _scan is not None:  # the same index in one C pass (memchr, GIL released)
            starts_b, ends_b, kind_b = _scan.index(body)
            kind = np.frombuffer(kind_b, np.uint8).copy()
            structural_bad = bool((kind == BAD).any())
            kind[kind == _NOT_UTF8] = BAD
            return cls(body, np.frombuffer(starts_b, np.int64), np.frombuffer(ends_b, np.int64),
                       kind, structural_bad)
        return cls.build_numpy(body)

    @classmethod
    def build_numpy(cls, body: bytes) -> LineIndex:
        """`build` by numpy (the stand-in where the scanner is not built; its reference)."""
        n = len(body)
        buf = np.frombuffer(body, np.uint8)
        nl = _newlines(buf)
        starts = np.concatenate(([0], nl + 1)).astype(np.int64)
        ends = np.concatenate((nl, [n])).astype(np.int64)
        if n == 0 or body[-1] == 10:  # the newline ends the last line; nothing follows it
            starts, ends = starts[:-1], ends[:-1]
        kind = np.full(len(starts), OBJECT, np.uint8)
        if n:
            lengths = ends - starts
            first = buf[np.minimum(starts, n - 1)]
            last = buf[np.maximum(ends - 1, 0)]
            before_last = buf[np.maximum(ends - 2, 0)]
            closes = (last == 0x7D) | ((last == 0x0D) & (lengths >= 2) & (before_last == 0x7D))
            proper = (lengths > 0) & (first == 0x7B) & closes
            for i in np.flatnonzero(~proper).tolist():
                text = body[starts[i]:ends[i]].strip(b" \t\r")
                if not text:
                    kind[i] = BLANK
                elif not (text[:1] == b"{" and text[-1:] == b"}"):
                    kind[i] = BAD
        structural_bad = bool((kind == BAD).any())
        index = cls(body, starts, ends, kind, structural_bad)
        if not body.isascii():
            index._mark_invalid_utf8(buf)
        return index

    def _mark_invalid_utf8(self, buf: np.ndarray) -> None:
        try:
            self.body.decode("utf-8")
            return
        except UnicodeDecodeError:
            pass
        high = np.flatnonzero(buf >= 0x80)
        for i in np.unique(np.searchsorted(self.starts, high, side="right") - 1).tolist():
            if self.kind[i] == OBJECT:
                try:
                    self.line(i).decode("utf-8")
                except UnicodeDecodeError:
                    self.kind[i] = BAD

    @property
    def n_lines(self) -> int:
        return len(self.starts)

    def line(self, i: int) -> bytes:
        return self.body[self.starts[i]:self.ends[i]]

    def lines_of(self, kind: int) -> np.ndarray:
        return np.flatnonzero(self.kind == kind)

    def nonblank(self) -> np.ndarray:
        return np.flatnonzero(self.kind != BLANK)

    def body_of(self, lines: np.ndarray) -> bytes:
        """A body holding just these lines (the original body when that is all of them)."""
        if len(lines) == int((self.kind != BLANK).sum()):
            return self.body
        b = self.body
        return b"\n".join(b[s:e] for s, e in zip(self.starts[lines].tolist(),
                                                  self.ends[lines].tolist(), strict=True))

    def chunks(self, lines: np.ndarray, target: int | None = None) -> list[tuple[int, int]]:
        """[lo, hi) ranges of `lines` whose byte span holds only those lines and blank ones."""
        if len(lines) == 0:
            return []
        target = target or CHUNK_BYTES
        nonblank_cum = np.cumsum(self.kind != BLANK)
        # Consecutive lines a < b are contiguous when every line between them is blank.
        gaps = nonblank_cum[lines[1:] - 1] != nonblank_cum[lines[:-1]]
        seg_edges = np.concatenate(([0], np.flatnonzero(gaps) + 1, [len(lines)]))
        out: list[tuple[int, int]] = []
        starts = self.starts[lines]
        for lo, hi in zip(seg_edges[:-1].tolist(), seg_edges[1:].tolist(), strict=True):
            while lo < hi:
                limit = starts[lo] + target
                cut = int(np.searchsorted(starts[lo:hi], limit, side="left")) + lo
                cut = max(cut, lo + 1)
                out.append((lo, cut))
                lo = cut
        return out

    def span(self, lines: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
        return int(self.starts[lines[lo]]), int(self.ends[lines[hi - 1]])


def _newlines(buf: np.ndarray, block: int = 1 << 22) -> np.ndarray:
    """Offsets of every newline byte, found block by block (small, reused temporaries)."""
    if len(buf) <= block:
        return np.flatnonzero(buf == 10)
    scratch = np.empty(block, bool)
    parts = []
    for s in range(0, len(buf), block):
        part = buf[s:s + block]
        found = np.flatnonzero(np.equal(part, 10, out=scratch[:len(part)]))
        parts.append(found + s if s else found)
    return np.concatenate(parts)


class FieldSet:
    """The top-level keys a pass decodes as Raw, in declaration order (append-only)."""

    def __init__(self, names: Iterable[str], *, forbid_unknown: bool) -> None:
        self.forbid_unknown = forbid_unknown
        self.names: list[str] = []
        self._attr: dict[str, str] = {}
        self._decoder: msgspec.json.Decoder | None = None
        for n in names:
            self.add(n)
        self._n_declared = len(self.names)

    def add(self, name: str, *, unknown: bool = False) -> bool:
        """Declare a key; False if msgspec cannot name a field so (`"`, `\\`, controls), or
        for an unknown key once MAX_UNKNOWN_FIELDS are declared (every instance of the
        Struct holds a slot per field: a body of ever-new keys must not make it huge)."""
        if name in self._attr:
            return True
        if _RENAME_FORBIDDEN.search(name):
            return False
        if unknown and len(self.names) - self._n_declared >= MAX_UNKNOWN_FIELDS:
            return False
        self._attr[name] = f"f{len(self.names)}"
        self.names.append(name)
        self._decoder = None
        return True

    def __contains__(self, name: object) -> bool:
        return name in self._attr

    def attr(self, name: str) -> str:
        return self._attr[name]

    def decoder(self) -> msgspec.json.Decoder:
        if self._decoder is None:
            struct = msgspec.defstruct(
                "Line", [(self._attr[n], msgspec.Raw, msgspec.UNSET) for n in self.names],
                rename={self._attr[n]: n for n in self.names},
                forbid_unknown_fields=self.forbid_unknown, gc=False)
            self._decoder = msgspec.json.Decoder(struct)
        return self._decoder


@dataclass
class RawRows:
    """The result of one pass over `lines`: raw values of the kept keys, bad lines, unknowns."""

    lines: np.ndarray
    fields: FieldSet
    keep: bool = True
    bad: set[int] = field(default_factory=set)    # lines that are not one valid JSON object
    slow: set[int] = field(default_factory=set)   # valid lines only the per-line path handles
    discovered: list[str] = field(default_factory=list)  # unknown keys, first appearance
    # msgspec pass: raw value or UNSET per line, for the wanted keys and each declared
    # unknown key. Values are picked out chunk by chunk, so the Structs (a slot per field)
    # never pile up. The scanner fills `arrays` instead.
    kept: dict[str, list[Any]] = field(default_factory=dict)
    done: int = 0  # lines picked so far
    # Per kept key: its raw JSON texts (binary, null = absent) and presence, one per line.
    arrays: dict[str, tuple[pa.BinaryArray, np.ndarray]] = field(default_factory=dict)
    # Per key the scanner converted itself (`types` of `raw_pass`): the column's values
    # (null where absent, `null` or flagged), the rows it flagged (the per-line path decides
    # them) and presence, one per line.
    typed: dict[str, tuple[pa.Array, np.ndarray, np.ndarray]] = field(default_factory=dict)

    def keeps(self, name: str) -> bool:
        """Whether the pass kept the raw values of this key (or converted them)."""
        return name in self.arrays or name in self.kept or name in self.typed

    def raw(self, name: str) -> pa.BinaryArray:
        """The raw JSON text per line (null = absent); KeyError if the key was not kept."""
        return self._array(name)[0]

    def present(self, name: str) -> np.ndarray:
        """Per line: the key was present; KeyError if the key was not kept."""
        if name in self.typed:
            return self.typed[name][2]
        return self._array(name)[1]

    def _array(self, name: str) -> tuple[pa.BinaryArray, np.ndarray]:
        if name not in self.arrays:
            values = self.kept[name]
            present = presence(values)
            self.arrays[name] = (raw_array(values, present), present)
        return self.arrays[name]

    def _pick(self, items: list[Any], n_fields: int | None) -> None:
        unset = msgspec.UNSET
        for name, out in self.kept.items():
            attr = self.fields.attr(name)
            if n_fields is None:  # per-line decoded: Struct versions differ, some are None
                out.extend(unset if it is None else getattr(it, attr, unset) for it in items)
            elif int(attr[1:]) < n_fields:
                out.extend(map(operator.attrgetter(attr), items))
            else:
                out.extend([unset] * len(items))
        self.done += len(items)


def presence(values: list[Any]) -> np.ndarray:
    """Per row: the key was present (the value is not UNSET)."""
    n = len(values)
    # A column is usually always or never sent: count (a C loop) settles both cases.
    absent = values.count(msgspec.UNSET)
    if absent == 0:
        return np.ones(n, bool)
    if absent == n:
        return np.zeros(n, bool)
    return np.fromiter(map(operator.is_not, values, itertools.repeat(msgspec.UNSET)), bool, n)


def raw_array(values: list[Any], present: np.ndarray | None = None) -> pa.BinaryArray:
    """Raw JSON texts (msgspec.Raw, or UNSET for absent) as a binary array, null = absent."""
    n = len(values)
    if present is None:
        present = presence(values)
    n_present = int(present.sum())
    if n_present == 0:
        return pa.nulls(n, pa.binary())
    texts = values
    if n_present < n:
        texts = list(itertools.compress(values, present))
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    data = b"".join(texts)
    if len(data) >= 2**31:
        raise ValueError("a column of over 2 GiB of raw JSON in one request")
    offsets = np.zeros(n + 1, np.int32)
    if n_present == n:
        np.cumsum(lengths, out=offsets[1:])
    else:
        full = np.zeros(n, np.int64)
        full[present] = lengths
        np.cumsum(full, out=offsets[1:])
    return _binary(n, offsets, data, present, n_present)


def _binary(n: int, offsets: Any, data: Any, present: np.ndarray, n_present: int
            ) -> pa.BinaryArray:
    validity = (None if n_present == n
                else pa.py_buffer(np.packbits(present, bitorder="little")))
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets),
                                                  pa.py_buffer(data)])


def scanner_built() -> bool:
    """Whether the C scanner is there (else msgspec does every pass, with a warning)."""
    return _scan is not None


def raw_pass(index: LineIndex, lines: np.ndarray, fields: FieldSet, *, known: Iterable[str],
             wanted: Iterable[str] = (), keep: bool = True,
             types: dict[str, ColumnType] | None = None, unit_ns: int = 1) -> RawRows:
    """Decode `lines` (object lines of `index`) with `fields`; see the module docstring.

    Keeps the raw values of `wanted` (declared) keys and, if `keep`, of every unknown key
    it declares. With `keep=False` only `discovered` is filled (the evolve pre-scan).
    The C scanner does the pass when it is built and sure of every line; else msgspec.
    `types`: wanted keys of a type `scanner_converts` the scanner may convert itself
    (`RawRows.typed`); msgspec keeps their raw values like the others'. `unit_ns`: the
    nanoseconds per unit of epoch numbers in timestamp columns (the table's
    `timestamp_unit`).
    """
    known = list(known)
    wanted = list(wanted)
    rows = _scan_pass(index, lines, fields, known=known, wanted=wanted, keep=keep,
                      types=types, unit_ns=unit_ns)
    if rows is not None:
        return rows
    return msgspec_pass(index, lines, fields, known=known, wanted=wanted, keep=keep)


def msgspec_pass(index: LineIndex, lines: np.ndarray, fields: FieldSet, *,
                 known: Iterable[str], wanted: Iterable[str] = (),
                 keep: bool = True) -> RawRows:
    """`raw_pass` by msgspec alone (the reference the scanner is tested against)."""
    rows = RawRows(lines, fields, keep)
    if keep:
        rows.kept = {name: [] for name in wanted}
    seen = set(known)
    view = memoryview(index.body)
    for lo, hi in index.chunks(lines):
        s, e = index.span(lines, lo, hi)
        items, n_fields = _decode_chunk(index, view[s:e], lines[lo:hi], rows, seen)
        if keep:
            rows._pick(items, n_fields)
    return rows


SCAN_OK, SCAN_INVALID, SCAN_SLOW, SCAN_UNSURE = 0, 1, 2, 3
# The scanner's `kept` codes: 0 skip, 1 raw, else the column type it converts (see _scan.c;
# a vector(N) is -N; a timestamp whose epoch numbers are in a coarser unit 9, 10 or 11).
_TYPE_CODES = {"string": 2, "int": 3, "long": 4, "real": 5, "bool": 6, "timestamp": 7}
_SCALED_TIMESTAMP_CODES = {1_000: 9, 1_000_000: 10, 1_000_000_000: 11}
_MAX_VECTOR_DIM = 1 << 16


def scanner_converts(ctype: ColumnType) -> bool:
    """Whether the scanner can convert values of this type itself (`raw_pass`'s `types`)."""
    return ctype.kind in _TYPE_CODES or (ctype.kind == "vector" and ctype.dim is not None
                                         and ctype.dim <= _MAX_VECTOR_DIM)


def _scan_pass(index: LineIndex, lines: np.ndarray, fields: FieldSet, *, known: list[str],
               wanted: list[str], keep: bool, types: dict[str, ColumnType] | None = None,
               unit_ns: int = 1) -> RawRows | None:
    """`raw_pass` by the C scanner (`_scan.c`, the GIL released), or None where msgspec must
    decide: the scanner is not built, a line it is unsure of (deep nesting, a key that
    unescapes to a quote, backslash or control character), a line it finds invalid that
    msgspec reads, a column it cannot declare, keys that collide in its (unkeyed) hash
    table past a bound."""
    if _scan is None or len(lines) == 0:
        return None
    types = types or {}
    discover = fields.forbid_unknown
    if discover and any(name not in fields for name in known):
        return None
    unknown_room = MAX_UNKNOWN_FIELDS - (len(fields.names) - fields._n_declared)
    wanted_set = set(wanted) if keep else set()
    if not wanted_set <= set(fields.names):
        return None
    result = _scan.scan(
        index.body, np.ascontiguousarray(index.starts, np.int64),
        np.ascontiguousarray(index.ends, np.int64), np.ascontiguousarray(lines, np.int64),
        [n.encode() for n in fields.names],
        [_code(n, wanted_set, types, unit_ns) for n in fields.names],
        discover, keep, unknown_room)
    if result is None:
        logger.info("keys of a body collide in the scanner's hash table: msgspec takes it")
        return None
    status, columns, found = result
    st = np.frombuffer(status, np.uint8)
    if (st == SCAN_UNSURE).any():
        return None
    invalid = lines[st == SCAN_INVALID].tolist()
    for i in invalid:
        try:
            _DICT_DECODER.decode(index.line(i))
        except (msgspec.DecodeError, RecursionError):
            continue
        logger.warning("the NDJSON scanner and msgspec disagree on a line; msgspec decides")
        return None
    rows = RawRows(lines, fields, keep, bad=set(invalid),
                   slow=set(lines[st == SCAN_SLOW].tolist()))
    rows.discovered = [k.decode() for k in found]
    for key in rows.discovered:
        fields.add(key, unknown=True)
    n = len(lines)
    for name, offsets, present, data, valid, flags in columns:
        key = name.decode()
        mask = np.frombuffer(present, np.bool_)
        if valid is None:
            rows.arrays[key] = (_binary(n, offsets, data, mask, int(mask.sum())), mask)
        else:
            rows.typed[key] = (_typed_array(types[key], n, offsets, data,
                                            np.frombuffer(valid, np.bool_)),
                               np.frombuffer(flags, np.bool_), mask)
    rows.done = n
    return rows


def _code(name: str, wanted: set[str], types: dict[str, ColumnType], unit_ns: int = 1) -> int:
    if name not in wanted:
        return 0
    ctype = types.get(name)
    if ctype is None:
        return 1
    if ctype.kind == "vector":
        assert ctype.dim is not None
        return -ctype.dim
    if ctype.kind == "timestamp" and unit_ns != 1:
        return _SCALED_TIMESTAMP_CODES[unit_ns]
    return _TYPE_CODES[ctype.kind]


def _typed_array(ctype: ColumnType, n: int, offsets: bytes | None, data: bytes,
                 valid: np.ndarray) -> pa.Array:
    """A typed column of the scanner as Arrow: its values, null where not valid."""
    n_valid = int(valid.sum())
    validity = (None if n_valid == n
                else pa.py_buffer(np.packbits(valid, bitorder="little")))
    if ctype.kind == "bool":
        return pa.array(np.frombuffer(data, np.bool_), pa.bool_(), mask=~valid)
    if ctype.kind == "vector":
        assert ctype.dim is not None
        values = pa.Array.from_buffers(pa.float32(), n * ctype.dim, [None, pa.py_buffer(data)])
        return pa.Array.from_buffers(ctype.arrow(), n, [validity], null_count=n - n_valid,
                                     children=[values])
    buffers = [validity, pa.py_buffer(data)]
    if offsets is not None:
        buffers.insert(1, pa.py_buffer(offsets))
    return pa.Array.from_buffers(ctype.arrow(), n, buffers, null_count=n - n_valid)


def _decode_chunk(index: LineIndex, chunk: memoryview, lines: np.ndarray, rows: RawRows,
                  seen: set[str]) -> tuple[list[Any], int | None]:
    fields = rows.fields
    for attempt in range(2):
        try:
            items = fields.decoder().decode_lines(chunk)
            if len(items) == len(lines):
                return items, len(fields.names)
            break
        except msgspec.ValidationError as e:
            if attempt or not (fields.forbid_unknown and _UNKNOWN_RE.match(str(e))):
                break
            added = _discover(index, chunk, lines, rows, seen)
            if not rows.keep:  # the pre-scan wants keys only: this chunk's are all found
                return [], None
            if not added:
                break
        except (msgspec.DecodeError, RecursionError):
            break
    return [_decode_line(index, int(i), rows, seen) for i in lines], None


def _decode_line(index: LineIndex, i: int, rows: RawRows, seen: set[str]) -> Any:
    """One line with the pass's Struct; None (and the line in `bad` or `slow`) if it cannot.

    A line that is not one valid JSON object costs two failed decodes, never a discovery."""
    text = index.line(i)
    try:
        return rows.fields.decoder().decode(text)
    except msgspec.ValidationError as e:
        unknown = bool(rows.fields.forbid_unknown and _UNKNOWN_RE.match(str(e)))
    except (msgspec.DecodeError, RecursionError):  # RecursionError: nested too deep
        rows.bad.add(i)
        return None
    try:
        obj = _DICT_DECODER.decode(text)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        rows.bad.add(i)
        return None
    if unknown and _declare(obj, rows, seen):
        try:
            return rows.fields.decoder().decode(text)
        except (msgspec.DecodeError, RecursionError):
            pass
    rows.slow.add(i)  # valid JSON the Struct cannot hold (a key msgspec cannot name)
    return None


def _discover(index: LineIndex, chunk: memoryview, lines: np.ndarray, rows: RawRows,
              seen: set[str]) -> bool:
    """Add the unknown keys of these lines to the pass; True if a new field was declared."""
    try:
        dicts = _DICT_DECODER.decode_lines(chunk)
        if len(dicts) != len(lines):
            raise ValueError
    except (msgspec.DecodeError, RecursionError, ValueError):
        dicts = []
        for i in lines.tolist():
            # A line that does not decode declares nothing; coercion rejects it with its error.
            with contextlib.suppress(msgspec.DecodeError, RecursionError):
                dicts.append(_DICT_DECODER.decode(index.line(i)))
    added = False
    for d in dicts:
        added = _declare(d, rows, seen) or added
    return added


def _declare(obj: dict[str, Any], rows: RawRows, seen: set[str]) -> bool:
    """Declare the keys of one decoded line not seen yet; True if a field was added."""
    added = False
    for key in obj:
        if key not in seen:
            seen.add(key)
            rows.discovered.append(key)
            if rows.fields.add(key, unknown=True):
                added = True
                if rows.keep:
                    rows.kept[key] = [msgspec.UNSET] * rows.done
    return added


def decode_line_dict(text: bytes) -> dict[str, msgspec.Raw]:
    """One line as {key: Raw}; raises msgspec.DecodeError / ValidationError (RecursionError
    for JSON nested deeper than msgspec follows, about 1,000 levels)."""
    return _DICT_DECODER.decode(text)
