"""NDJSON -> Arrow coercion against a table schema (docs/ingest.md).

`coerce_ndjson(body, schema, unknown=..., ingest_time_ns=...)` turns a request body into one
`pa.RecordBatch` shaped exactly as `schema.arrow()` (the accepted lines, in order) plus every
problem found, each with its 1-based line number: `line 7: field "embedding": vector(3)
expects 3 numbers, got 4`. Nothing is raised for bad data; the caller decides what a bad
line means (atomic mode: reject the request, partial mode: keep the good lines).

Per line: a non-blank line is one JSON object (blank lines are skipped but counted); each
top-level field goes to its column by `_values.convert()`; a field of no column is dropped,
rejected, or kept in `props` (`unknown`); a Kafka header column cannot be written here; an
absent column gets its default, else null (`_timestamp` gets `ingest_time_ns`); a NOT NULL
column without default must be present and not null. Duplicate keys: the last one wins.

`props` policy: the unknown fields of a line become one JSON object
`{"k":<canonical value>,...}` with keys ordered by their first appearance in the body. If the
record sent its own `props`: an object is merged (its members first, minus names that are
also unknown top-level fields, then the unknown fields); any other non-null value is kept
under the key "props" of the new object. Without unknown fields `props` is stored as sent.

How it is fast (the common case never runs Python per field):
0. Where shoal's C scanner is built (the usual case), one pass of it does everything: it
   validates every line, converts the `bool`, `int`, `long`, `real`, `string`, `timestamp`
   and `vector` values it is sure of to Arrow buffers, picks out the raw text of `dynamic`,
   `bytes`, header and unknown fields, and flags the values it leaves to the per-line path
   (see `_scan.c`); the body is parsed once, with the GIL released. Arrow's reader is not
   used (but for a vector past 65,536 components: steps 1-2 for it alone). A body the
   scanner defers to msgspec (nesting past 128 levels, a key that unescapes to a quote,
   backslash or control character) has those columns converted from their raw texts by
   `_columns.from_raw` instead.
1. Without the scanner, Arrow's JSON reader (in a worker thread, it releases the GIL) reads
   the typed columns; meanwhile the main thread indexes the lines (`_lines.LineIndex`) and
   runs the msgspec pass that validates every line and picks out the raw text of `dynamic`,
   `bytes`, header, defaulted and unknown fields (`_lines.raw_pass`).
2. Arrow fails on any type mismatch without a usable line number. A failure naming a column
   (`Column(/x) changed from string to number`) or a conversion (`to int32`) moves those
   columns to the raw path and reads again (a probe read of the first
   128 KB (at most 1/32 of the body) first catches the usual
   case, a string column fed numbers, before the big read); any other failure reads in 2 MB
   pieces, halving a piece that fails down to the single lines Arrow cannot read. Arrow
   never reads a body that starts with anything but an object: pyarrow 26 segfaults when
   the first value is `null`.
   A table of typed columns only (no `dynamic`, `bytes`, header, defaulted or NOT NULL
   column) skips the msgspec pass when it can: Arrow's reader then refuses every key but
   those columns, so a read that succeeds proves there is nothing to discover or keep raw,
   and a body it reads line for line is valid JSON (`_arrow_alone`); any failure takes the
   usual path. Arrow's reader takes the `NaN`/`Infinity` literals, which JSON does not, but
   only into `real` and `vector` columns, whose conversion flags every non-finite value: the
   line goes the per-line path and gets its "invalid JSON" error there.
3. `_columns` converts both inputs vectorised and flags rows it cannot accept. Flagged and
   bad lines alone go through the per-line path (`_values.line_result`), which makes every
   error message. `_coerce_slow()` runs that path on every line: it is the reference the
   fast path is property-tested against.

Table conventions (`shoal.types.conventions`, from the table's properties): with
`timestamp_unit` other than `ns` the scanner scales the epoch numbers of timestamp columns
itself (so does the raw path, `from_raw`; Arrow's reader never reads numbers into a
timestamp column: they make it fail and leave it for the raw path); with `props` off,
`unknown="props"` refuses (per line, as `reject` does, with its own message) the fields it
would keep in `props`, and a record that writes `props` itself. Under `ns`, a timestamp
value before 1971 that came from an epoch number earns the result a warning
(`Coerced.warnings`): epoch seconds sent to a nanosecond table land in January 1970
otherwise without a word.

Costs beyond the common case: `unknown="props"`/`"reject"` declare every column in the
msgspec pass to find unknown keys (about a third slower, unless `unknown_fields=` is given);
each unknown key kept in `props` costs a raw value per line; at most 64 unknown keys get
their own Struct field, lines with more go the per-line path.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from shoal.errors import LineError
from shoal.ingest._columns import (Converted, valid_mask, from_arrow, from_raw, minify_array,
                                   read_type)
from shoal.ingest._lines import (BAD, BLANK, OBJECT, FieldSet, LineIndex, RawRows,
                                 decode_line_dict, raw_pass, scanner_built, scanner_converts)
from shoal.ingest._values import (UnknownFieldPolicy, encode_key, json_kind, line_result,
                                  props_object, rows_to_arrays)
from shoal.types.conventions import (DEFAULT_CONVENTIONS, NS_1971, IngestConventions,
                                     IngestWarning)
from shoal.types.jsonlimits import exceeding
from shoal.types.schema import PROPS_COLUMN, TIMESTAMP_COLUMN, Column, Schema, SchemaMode

UNKNOWN_POLICIES: tuple[UnknownFieldPolicy, ...] = ("props", "drop", "reject")

# What a table's schema mode does with a field the schema lacks, as `unknown=` spells it.
UNKNOWN_POLICY: dict[SchemaMode, UnknownFieldPolicy] = {
    "evolve": "props", "drop": "drop", "reject": "reject"}
DEFAULT_MAX_ERRORS = 100
_ARROW_KINDS = frozenset({"bool", "int", "long", "real", "string", "timestamp", "vector"})
_THREAD_MIN_BYTES = 1 << 18
_FALLBACK_CHUNK_BYTES = 2 << 20
_PROBE_BYTES = 1 << 17
_PROBE_SHARE = 32  # the probe reads at most 1/32 of a body (a 1 MB REST body: 32 KB)
_MAX_ARROW_ATTEMPTS = 8
_MAX_SPLIT_READS = 512  # failed Arrow reads of halved pieces before the rest goes per-line
_COLUMN_RE = re.compile(r"Column\(/([^/)]+)")
_CONVERT_RE = re.compile(r"convert JSON to (.+?), couldn't parse")
_LEADING_WS = re.compile(rb"[ \t\r\n]*")


@dataclass
class Coerced:
    batch: pa.RecordBatch      # the accepted lines; schema == schema.arrow() exactly
    rows: int
    errors: list[LineError]    # the first errors by line, at most max_errors
    rejected_lines: list[int]  # every line with at least one error, ascending (exact)
    # The body's top-level keys the schema lacks, in order of first appearance, as
    # `scan_unknown_fields(body, schema)` finds them (the msgspec pass finds them anyway
    # with unknown="props"/"reject"). Given `unknown_fields=`, that hint (minus names of the
    # schema) may stand in; with unknown="drop" it is empty: nothing looks for them.
    unknown_fields: list[str] = field(default_factory=list)
    warnings: list[IngestWarning] = field(default_factory=list)
    # The 1-based line of each row of `batch`, and the text of a line by its 0-based index
    # (on demand: only warnings need them).
    row_lines: Callable[[], np.ndarray] | None = field(default=None, repr=False,
                                                       compare=False)
    line_text: Callable[[int], bytes] | None = field(default=None, repr=False,
                                                     compare=False)

    @property
    def rejected_count(self) -> int:
        """How many lines were rejected (every one, however many errors are kept)."""
        return len(self.rejected_lines)


def coerce_ndjson(body: bytes, schema: Schema, *, unknown: UnknownFieldPolicy,
                  ingest_time_ns: int, max_errors: int = DEFAULT_MAX_ERRORS,
                  unknown_fields: Sequence[str] | None = None,
                  conventions: IngestConventions = DEFAULT_CONVENTIONS) -> Coerced:
    """Coerce an NDJSON body against `schema`; see the module docstring.

    `unknown_fields`: optional, the body's top-level keys that `schema` lacks, in order of
    first appearance, exactly as `scan_unknown_fields(body, older_schema)` returned them
    (names since added to the schema are ignored). With `unknown="props"` or `"reject"` it
    saves the pass that finds them; a key missing from it is treated as dropped.
    `conventions`: the table's `timestamp_unit` and `props` (see the module docstring).
    """
    _check_args(unknown, max_errors)
    body = bytes(body)
    out = _FastPath(body, schema, unknown, ingest_time_ns, unknown_fields,
                    conventions).run(max_errors)
    out.warnings = epoch_warnings(body, schema, out, conventions)
    return out


def warm_up() -> pa.RecordBatch:
    """One small coercion: the first timestamp column a process converts imports more of
    pyarrow (and pandas, where installed and not forgone), 0.3-4 s that a process's first
    request would otherwise wait. Run by coercion workers before they say they are ready
    and by `shoal serve` as it starts (before it listens). Returns the batch, for the
    extent side's own warm-up (`shoal.format.tlm.warm_up`)."""
    from shoal.types import DYNAMIC, LONG, STRING, TIMESTAMP

    schema = Schema.create([Column("t", TIMESTAMP), Column("s", STRING), Column("n", LONG),
                            Column("d", DYNAMIC)])
    return coerce_ndjson(b'{"t": "2024-01-01T00:00:00Z", "s": "a", "n": 1, "d": {"k": [1]}}\n',
                         schema, unknown="props", ingest_time_ns=0).batch


def _check_args(unknown: str, max_errors: int) -> None:
    if unknown not in UNKNOWN_POLICIES:
        raise ValueError(f"unknown must be one of {UNKNOWN_POLICIES}, got {unknown!r}")
    if max_errors < 0:
        raise ValueError("max_errors must be >= 0")


# -- the per-line reference -----------------------------------------------------------

def _split_lines(body: bytes) -> list[bytes]:
    lines = body.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _coerce_slow(body: bytes, schema: Schema, *, unknown: UnknownFieldPolicy,
                 ingest_time_ns: int, max_errors: int = DEFAULT_MAX_ERRORS,
                 conventions: IngestConventions = DEFAULT_CONVENTIONS) -> Coerced:
    """The reference: every line through the per-line path (tests compare the fast path)."""
    _check_args(unknown, max_errors)
    lines = _split_lines(bytes(body))
    rank: dict[str, int] = {}
    for text in lines:
        if text.strip(b" \t\r"):
            try:
                text.decode("utf-8")
                for key in decode_line_dict(text):
                    if key not in schema and key not in rank:
                        rank[key] = len(rank)
            except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):
                pass
    results = [(i + 1, line_result(text, i + 1, schema, unknown, ingest_time_ns, rank,
                                   conventions))
               for i, text in enumerate(lines) if text.strip(b" \t\r")]
    errors = [e for _, (_, errs) in results for e in errs][:max_errors]
    rejected = [line for line, (_, errs) in results if errs]
    ok = [(line, row) for line, (row, _) in results if row is not None]
    out = _finish(schema, [], None, ok, errors, rejected,
                  list(rank) if unknown != "drop" else [])
    out.line_text = lines.__getitem__
    out.warnings = epoch_warnings(bytes(body), schema, out, conventions)
    return out


class _PerLine:
    """The per-line path over the lines the fast path could not settle, in line order.

    Error messages are built only until `max_errors` are kept: past the cap a line the fast
    path already knows is bad (`known_bad`: not one valid JSON object, or a value flagged)
    is only counted, and the errors of any other line that fails are dropped. So a body of a
    million bad lines costs its parse, not a million messages.
    """

    def __init__(self, path: _FastPath, index: LineIndex, rank: dict[str, int],
                 max_errors: int) -> None:
        self.path = path
        self.index = index
        self.rank = rank
        self.max_errors = max_errors
        self.errors: list[LineError] = []
        self.rejected: list[int] = []       # 1-based, ascending
        self.ok: list[tuple[int, dict[str, Any]]] = []

    def run(self, lines: np.ndarray, known_bad: np.ndarray) -> None:
        todo = lines.tolist()
        pos = 0
        while pos < len(todo) and len(self.errors) < self.max_errors:
            self._one(todo[pos], keep_errors=True)
            pos += 1
        rest = lines[pos:]
        if not len(rest):
            return
        bad = known_bad[rest]
        counted = (rest[bad] + 1).tolist()
        for i in rest[~bad].tolist():
            self._one(i, keep_errors=False)
        if counted:
            self.rejected = sorted(self.rejected + counted)

    def _one(self, i: int, *, keep_errors: bool) -> None:
        p = self.path
        row, errs = line_result(self.index.line(i), i + 1, p.schema, p.unknown,
                                p.ingest_time_ns, self.rank, p.conventions)
        if errs:
            self.rejected.append(i + 1)
            if keep_errors:
                self.errors.extend(errs[:self.max_errors - len(self.errors)])
        elif row is not None:
            self.ok.append((i + 1, row))


def _finish(schema: Schema, fast_lines: Sequence[int] | np.ndarray,
            fast_arrays: list[pa.Array] | None, ok: list[tuple[int, dict[str, Any]]],
            errors: list[LineError], rejected: list[int],
            unknown_fields: list[str]) -> Coerced:
    """Merge fast rows and per-line rows (line numbers 1-based) in line order."""
    arrays = fast_arrays
    if ok or arrays is None:
        slow_arrays = rows_to_arrays(schema, [row for _, row in ok])
        if arrays is None:
            arrays = slow_arrays
        else:
            order = np.argsort(np.concatenate([np.asarray(fast_lines, np.int64),
                                               np.array([ln for ln, _ in ok], np.int64)]),
                               kind="stable")
            arrays = [pa.concat_arrays([a, b]).take(pa.array(order))
                      for a, b in zip(arrays, slow_arrays, strict=True)]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema.arrow())
    fast = np.asarray(fast_lines, np.int64)
    slow = np.array([ln for ln, _ in ok], np.int64)
    return Coerced(batch, batch.num_rows, errors, rejected, unknown_fields,
                   row_lines=lambda: fast if not len(slow) else np.sort(
                       np.concatenate([fast, slow])))


# -- the fast path -------------------------------------------------------------------------

class _ArrowJob:
    """One `pyarrow.json.read_json` of a body, in a worker thread for large bodies."""

    def __init__(self, body: bytes, columns: list[Column], lines: np.ndarray | None, *,
                 block_size: int = 1 << 20, threaded: bool = True,
                 unexpected: str = "ignore") -> None:
        self.body = body
        self.unexpected = unexpected  # "error": a key outside `columns` fails the read
        self.columns = columns
        self.lines = lines          # the non-blank lines of `body`, set once known
        self.block_size = block_size
        self.table: pa.Table | None = None
        self.error: Exception | None = None
        self._thread: threading.Thread | None = None
        if threaded and columns and len(body) >= _THREAD_MIN_BYTES:
            self._thread = threading.Thread(target=self._run, name="shoal-read-json",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        if not self.columns:
            return
        schema = pa.schema([pa.field(c.name, read_type(c.type)) for c in self.columns])
        first = _LEADING_WS.match(self.body).end()  # type: ignore[union-attr]
        if self.body[first:first + 1] not in (b"{", b""):
            # pyarrow 26 segfaults when the first value of a body is `null`: Arrow only ever
            # reads bodies that start with an object.
            self.error = ValueError("body does not start with a JSON object")
            return
        try:
            self.table = pj.read_json(
                pa.BufferReader(self.body),
                read_options=pj.ReadOptions(block_size=self.block_size),
                parse_options=pj.ParseOptions(explicit_schema=schema,
                                              unexpected_field_behavior=self.unexpected))
        except (pa.ArrowException, ValueError) as e:
            self.error = e

    def wait(self) -> pa.Table | None:
        if self._thread is None:
            self._run()
        else:
            self._thread.join()
        return self.table


class _FastPath:
    def __init__(self, body: bytes, schema: Schema, unknown: UnknownFieldPolicy,
                 ingest_time_ns: int, unknown_fields: Sequence[str] | None = None,
                 conventions: IngestConventions = DEFAULT_CONVENTIONS) -> None:
        self.body = body
        self.conventions = conventions
        self.hint: list[str] | None = None
        if unknown_fields is not None and unknown != "drop":
            hint = list(dict.fromkeys(k for k in unknown_fields if k not in schema))
            probe = FieldSet((), forbid_unknown=False)
            if all(probe.add(k, unknown=True) for k in hint):  # each can be a Struct field
                self.hint = hint
        self.schema = schema
        self.unknown = unknown
        self.ingest_time_ns = ingest_time_ns
        arrow_cols = [c for c in schema.columns
                      if c.header is None and c.type.kind in _ARROW_KINDS]
        # The C scanner converts these columns itself in its pass (no second parse of the
        # body by Arrow's reader); Arrow's reader keeps the rest (a vector past 65,536
        # components), or all of them where the scanner is not built.
        self.scanned = ({c.name for c in arrow_cols if scanner_converts(c.type)}
                        if scanner_built() else set())
        self.demoted: set[str] = set()
        self.arrow_cols = [c for c in arrow_cols if c.name not in self.scanned]
        self.other_keys = False  # Arrow's reader met a key outside its columns

    def _wanted(self) -> list[str]:
        """The keys whose raw values the msgspec pass keeps (besides unknown ones)."""
        return [c.name for c in self.schema.columns
                if c.header is not None or c.type.kind not in _ARROW_KINDS
                or c.default is not None or not c.nullable or c.name in self.demoted
                or c.name in self.scanned]

    def _raw_pass(self, index: LineIndex, objects: np.ndarray) -> RawRows:
        wanted = self._wanted() + (self.hint or [])
        if self.unknown != "drop" and self.hint is None:
            # Find unknown fields: forbid them, so every column must be declared.
            fields = FieldSet(self.schema.names, forbid_unknown=True)
        else:
            fields = FieldSet(wanted, forbid_unknown=False)
        types = {c.name: c.type for c in self.schema.columns if c.name in self.scanned}
        raw = raw_pass(index, objects, fields, known=self.schema.names, wanted=wanted,
                       types=types, unit_ns=self.conventions.unit_ns)
        if self.hint is not None:
            raw.discovered = list(self.hint)
        return raw

    def _probe(self) -> None:
        """Read the first lines alone: a column that keeps failing Arrow's reader (a string
        column fed numbers) fails there, and leaves the reader before the big read. While
        Arrow alone may do the whole body (`_arrow_alone`), the probe also asks Arrow to
        refuse other keys: a body that has them is not tried that way."""
        cut = self.body.rfind(b"\n", 0, min(_PROBE_BYTES, len(self.body) // _PROBE_SHARE))
        if cut <= 0:
            return
        for _ in range(_MAX_ARROW_ATTEMPTS):
            columns = self._read_columns()
            if not columns:
                return
            strict = self._arrow_alone()
            job = _ArrowJob(self.body[:cut + 1], columns, None, threaded=False,
                            unexpected="error" if strict else "ignore")
            if job.wait() is not None:
                return
            if strict and "unexpected field" in str(job.error):
                self.other_keys = True
                continue
            demote = self._attribute(job.error)
            if not demote:
                return
            self.demoted |= demote

    def _arrow_alone(self) -> bool:
        """Whether Arrow's reader may coerce the body by itself, with no msgspec pass: every
        column is one Arrow reads (no `dynamic`, `bytes`, header, defaulted or NOT NULL
        column, none demoted: nothing needs a raw value or presence). The read then refuses
        any key but those columns (`props` or an unknown key sends the body the usual way),
        so it proves there is nothing to discover."""
        return not (self.other_keys or self.hint or self._wanted() != [PROPS_COLUMN])

    def _run_arrow_alone(self, max_errors: int) -> Coerced | None:
        """The body through Arrow's reader alone (see `_arrow_alone`); None if it cannot be:
        the read failed (a bad line, an unknown key, a type Arrow refuses) or a line is not
        one object, and the caller takes the usual path."""
        job = _ArrowJob(self.body, self._read_columns(), None, unexpected="error")
        index = LineIndex.build(self.body)
        table = job.wait()
        if table is None:
            self.other_keys = "unexpected field" in str(job.error)
            return None
        lines = index.nonblank()
        if not len(lines) or (index.kind == BAD).any() or table.num_rows != len(lines):
            return None
        raw = RawRows(lines, FieldSet((PROPS_COLUMN,), forbid_unknown=False))
        raw.arrays = {PROPS_COLUMN: (pa.nulls(len(lines), pa.binary()),
                                     np.zeros(len(lines), bool))}
        side = _RawSide(self, raw)
        return self._assemble(index, lines, side, table, lines, max_errors)

    def _read_columns(self) -> list[Column]:
        return [c for c in self.arrow_cols if c.name not in self.demoted]

    def run(self, max_errors: int) -> Coerced:
        if len(self.body) >= 4 * _PROBE_BYTES:
            self._probe()
        if self._arrow_alone():
            alone = self._run_arrow_alone(max_errors)
            if alone is not None:
                return alone
        job = _ArrowJob(self.body, self._read_columns(), None)
        index = LineIndex.build(self.body)
        job.lines = index.nonblank()
        if not len(job.lines):
            job.wait()
            return _finish(self.schema, [], None, [], [], [], [])
        objects = index.lines_of(OBJECT)
        raw = self._raw_pass(index, objects)
        side = _RawSide(self, raw)
        side.prepare()  # while Arrow's reader still runs
        table, arrow_lines, raw = self._read_arrow(job, index, objects, raw)
        if side.raw is not raw:  # the pass was redone for demoted columns
            side = _RawSide(self, raw)
        return self._assemble(index, objects, side, table, arrow_lines, max_errors)

    # -- Arrow attempts ----------------------------------------------------------------
    def _read_arrow(self, job: _ArrowJob, index: LineIndex, objects: np.ndarray,
                    raw: RawRows) -> tuple[pa.Table | None, np.ndarray, RawRows]:
        max_line = int((index.ends - index.starts).max()) if index.n_lines else 0
        block = max(1 << 20, 2 * max_line + 2)
        for _ in range(_MAX_ARROW_ATTEMPTS):
            table = job.wait()
            if not job.columns:
                return None, self._good(index, objects, raw), raw
            assert job.lines is not None
            clean = not index.structural_bad or job.body is not self.body
            if table is not None and clean and table.num_rows == len(job.lines):
                return table, job.lines, raw
            good = self._good(index, objects, raw)
            if len(good) < len(job.lines) and job.body is self.body:
                job = _ArrowJob(index.body_of(good), job.columns, good, block_size=block)
                continue
            demote = self._attribute(job.error)
            if not demote:
                break
            self.demoted |= demote
            job = _ArrowJob(job.body, self._read_columns(), job.lines, block_size=block)
            if not all(raw.keeps(n) for n in demote):
                raw = self._raw_pass(index, objects)
        table, lines = self._read_chunks(index, self._good(index, objects, raw))
        return table, lines, raw

    @staticmethod
    def _good(index: LineIndex, objects: np.ndarray, raw: RawRows) -> np.ndarray:
        """The object lines the msgspec pass did not find bad."""
        if not raw.bad:
            return objects
        bad = np.zeros(index.n_lines, bool)
        bad[list(raw.bad)] = True
        return objects[~bad[objects]]

    def _attribute(self, error: Exception | None) -> set[str]:
        """Columns to take off Arrow's reader because of this failure (empty: unknown)."""
        if error is None:
            return set()
        text = str(error)
        live = {c.name: c for c in self._read_columns()}
        m = _COLUMN_RE.search(text)
        if m and m.group(1) in live:
            return {m.group(1)}
        m = _CONVERT_RE.search(text)
        if m:
            return {n for n, c in live.items()
                    if str(read_type(c.type)) == m.group(1)
                    or (c.type.kind == "vector" and m.group(1) == "double")}
        return set()

    def _read_chunks(self, index: LineIndex, lines: np.ndarray
                     ) -> tuple[pa.Table | None, np.ndarray]:
        """Last resort: read 2 MB pieces; a piece that fails is halved and read again, down
        to single lines, so only the lines Arrow cannot read (a number too big for a double
        in a dropped field, say) go the per-line path, not the good lines around them.
        Past `_MAX_SPLIT_READS` failed reads (a body bad all over) a failing piece goes the
        per-line path whole."""
        tables, covered = [], []
        pending = list(reversed(index.chunks(lines, _FALLBACK_CHUNK_BYTES)))
        failed = 0
        while pending:
            lo, hi = pending.pop()  # in line order: `covered` must stay ascending
            piece = lines[lo:hi]
            s, e = index.span(lines, lo, hi)
            job = _ArrowJob(self.body[s:e], self._read_columns(), piece,
                            block_size=max(1 << 20, 2 * (e - s) + 2))
            table = job.wait()
            if table is not None and table.num_rows == len(piece):
                tables.append(table)
                covered.append(piece)
                continue
            failed += 1
            if hi - lo > 1 and failed <= _MAX_SPLIT_READS:
                mid = (lo + hi) // 2
                pending += [(mid, hi), (lo, mid)]
        if not tables:
            return None, np.zeros(0, np.int64)
        return pa.concat_tables(tables), np.concatenate(covered)

    # -- columns -------------------------------------------------------------------------
    def _assemble(self, index: LineIndex, objects: np.ndarray, side: _RawSide,
                  table: pa.Table | None, arrow_lines: np.ndarray, max_errors: int
                  ) -> Coerced:
        raw = side.raw
        row_mask = np.zeros(index.n_lines, bool)
        row_mask[arrow_lines] = True
        row_mask[list(raw.bad | raw.slow)] = False
        row_mask &= index.kind == OBJECT
        rows = np.flatnonzero(row_mask)
        n = len(rows)
        at = _Subset(None if n == len(raw.lines) else np.searchsorted(raw.lines, rows))
        arrow_at = _Subset(None if table is None or n == table.num_rows
                           else np.searchsorted(arrow_lines, rows))
        flags = np.zeros(n, bool)
        arrays: list[pa.Array] = []
        for col in self.schema.columns:
            arr, col_flags = self._column(col, table, arrow_at, side, at, n)
            flags |= col_flags
            arrays.append(arr)
        if self.unknown == "reject" or (self.unknown == "props"
                                        and not self.conventions.props):
            flags |= at.mask(side.unknown_present())
        if not self.conventions.props:  # a record may not write props itself either
            own = side.raw_of(PROPS_COLUMN)
            flags |= at.mask(valid_mask(own) & ~_json_null(own))
        if flags.any():
            keep = pa.array(~flags)
            arrays = [a.filter(keep) for a in arrays]
        row_mask[rows[flags]] = False
        slow_lines = np.flatnonzero((index.kind != BLANK) & ~row_mask)
        known_bad = index.kind == BAD
        known_bad[list(raw.bad)] = True
        known_bad[rows[flags]] = True
        per_line = _PerLine(self, index, {k: i for i, k in enumerate(raw.discovered)},
                            max_errors)
        per_line.run(slow_lines, known_bad)
        out = _finish(self.schema, rows[~flags] + 1, arrays, per_line.ok, per_line.errors,
                      per_line.rejected, list(raw.discovered))
        out.line_text = index.line
        return out

    def _column(self, col: Column, table: pa.Table | None, arrow_at: _Subset,
                side: _RawSide, at: _Subset, n: int) -> tuple[pa.Array, np.ndarray]:
        if col.header is not None:
            return pa.nulls(n, col.type.arrow()), at.mask(side.present(col.name))
        if self._raw_routed(col):
            conv = side.converted(col)
            arr, flags = at.array(conv.array), at.mask(conv.flags)
        elif table is None:  # Arrow's reader failed on every piece: no fast rows at all
            return pa.nulls(n, col.type.arrow()), np.zeros(n, bool)
        else:
            conv = from_arrow(col.type, arrow_at.array(table.column(col.name).combine_chunks()))
            arr, flags = conv.array, conv.flags
        if arr.null_count == 0 or (col.name != TIMESTAMP_COLUMN and col.default is None
                                   and col.nullable):
            return arr, flags  # no null to fill or refuse
        nulls = ~valid_mask(arr) & ~flags
        if col.name == TIMESTAMP_COLUMN:
            if nulls.any():
                arr = arr.fill_null(pa.scalar(self.ingest_time_ns, pa.int64())
                                    .cast(col.type.arrow()))
            return arr, flags
        if (col.default is None and col.nullable) or not nulls.any():
            return arr, flags
        present = at.mask(side.present(col.name))
        absent = nulls & ~present
        if col.default is not None and absent.any():
            arr = pc.if_else(pa.array(absent), col.default_scalar(), arr)
        elif not col.nullable:
            flags = flags | absent
        if not col.nullable:
            flags = flags | (nulls & present)
        return arr, flags

    def _raw_routed(self, col: Column) -> bool:
        return (col.name in self.demoted or col.name in self.scanned
                or col.type.kind not in _ARROW_KINDS)


class _Subset:
    """Picks the final rows out of arrays aligned with some larger set of lines."""

    def __init__(self, positions: np.ndarray | None) -> None:
        self.positions = positions
        self._indices = None if positions is None else pa.array(positions)

    def array(self, arr: pa.Array) -> pa.Array:
        return arr if self._indices is None else arr.take(self._indices)

    def mask(self, m: np.ndarray) -> np.ndarray:
        return m if self.positions is None else m[self.positions]


class _RawSide:
    """What the msgspec pass decides, over every line it decoded (`raw.lines`).

    Computed before Arrow's reader is done (`prepare`), cached by column name.
    """

    def __init__(self, path: _FastPath, raw: RawRows) -> None:
        self.path = path
        self.raw = raw
        self._converted: dict[str, Converted] = {}
        self._unknown: np.ndarray | None = None

    def prepare(self) -> None:
        for col in self.path.schema.columns:
            if col.header is not None or (col.default is not None or not col.nullable):
                self.present(col.name)
            if col.header is None and self.path._raw_routed(col):
                self.converted(col)
        if self.path.unknown != "drop":
            self.unknown_present()

    def raw_of(self, name: str) -> pa.BinaryArray:
        """The raw JSON texts of a key as a binary array (null = absent)."""
        return self.raw.raw(name)

    def present(self, name: str) -> np.ndarray:
        return self.raw.present(name)

    def converted(self, col: Column) -> Converted:
        if col.name not in self._converted:
            typed = self.raw.typed.get(col.name)
            conv = (Converted(*typed) if typed is not None
                    else from_raw(col.type, self.raw_of(col.name),
                                  self.path.conventions.unit_ns))
            if col.name == PROPS_COLUMN and self.path.unknown == "props":
                unknown = self.unknown_present()
                if unknown.any():
                    flags = conv.flags | self._unknown_over_limits()
                    conv = Converted(self._merge_props(conv.array, unknown), flags,
                                     conv.present)
            self._converted[col.name] = conv
        return self._converted[col.name]

    def unknown_present(self) -> np.ndarray:
        if self._unknown is None:
            present = np.zeros(len(self.raw.lines), bool)
            for key in self.raw.discovered:
                if self.raw.keeps(key):
                    present |= self.present(key)
            self._unknown = present
        return self._unknown

    def _unknown_over_limits(self) -> np.ndarray:
        """Rows where a kept unknown field's value exceeds a JSON limit (`jsonlimits`)."""
        flags = np.zeros(len(self.raw.lines), bool)
        for key in self.raw.discovered:
            if self.raw.keeps(key):
                flags |= exceeding(self.raw_of(key))
        return flags

    def _merge_props(self, own: pa.Array, unknown: np.ndarray) -> pa.Array:
        """The props column with the unknown fields folded in (see the module docstring)."""
        keys = [k for k in self.raw.discovered if self.raw.keeps(k)]
        n = len(unknown)
        # Members `"key":value` (null where absent), row-major, nulls dropped, one list per
        # row, each list joined with "," and wrapped in braces: a handful of Arrow kernels.
        members = [pc.binary_join_element_wise(
            pa.scalar(encode_key(k) + b":", pa.binary()),
            minify_array(self.raw_of(k)),
            pa.scalar(b"", pa.binary())) for k in keys]
        row_major = pa.concat_arrays(members).take(
            pa.array((np.arange(n)[:, None] + np.arange(len(keys)) * n).ravel()))
        counts = np.stack([self.present(k) for k in keys], axis=1).sum(axis=1)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        lists = pa.ListArray.from_arrays(pa.array(offsets), row_major.drop_null())
        objects = pc.binary_join_element_wise(
            pa.scalar(b"{", pa.binary()), pc.binary_join(lists, pa.scalar(b",", pa.binary())),
            pa.scalar(b"}", pa.binary()), pa.scalar(b"", pa.binary()))
        out = pc.if_else(pa.array(unknown), objects, own)
        both = unknown & valid_mask(own)
        if both.any():  # the record sent its own props too: merge one by one
            rows = pa.array(np.flatnonzero(both))
            own_raw = self.raw_of(PROPS_COLUMN).take(rows).to_pylist()
            columns = {k: self.raw_of(k).take(rows).to_pylist() for k in keys}
            merged = []
            for j, own_text in enumerate(own_raw):
                pairs = [(k, columns[k][j]) for k in keys if columns[k][j] is not None]
                merged.append(props_object(own_text, pairs))
            out = pc.replace_with_mask(out, pa.array(both), pa.array(merged, pa.binary()))
        return out





# -- warnings ------------------------------------------------------------------------------

_WARN_LINES = 1_000  # lines decoded, at most, to tell epoch numbers from text


def _json_null(raw: pa.Array) -> np.ndarray:
    return _np_bool_of(pc.equal(raw, pa.scalar(b"null", pa.binary())))


def _np_bool_of(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.fill_null(False).to_numpy(zero_copy_only=False), bool)


def epoch_warnings(body: bytes, schema: Schema, coerced: Coerced,
                   conventions: IngestConventions) -> list[IngestWarning]:
    """A warning per timestamp column where an epoch number, read as nanoseconds, landed
    before 1971: almost surely seconds, milliseconds or microseconds. Costs one comparison
    per column unless such a value is there; then the lines of the early values (at most
    `_WARN_LINES`) are decoded to tell numbers from text (`"1970-01-01T..."` is not warned)."""
    batch = coerced.batch
    if conventions.unit_ns != 1 or batch.num_rows == 0 or coerced.row_lines is None:
        return []
    out: list[IngestWarning] = []
    line_text = coerced.line_text
    lines: np.ndarray | None = None
    for col in schema.columns:
        if col.type.kind != "timestamp" or col.header is not None:
            continue
        ns = batch.column(col.name).cast(pa.int64())
        low = pc.min(ns).as_py()
        if low is None or low >= NS_1971:  # the usual case: one kernel, no array made
            continue
        early = _np_bool_of(pc.less(ns, NS_1971))
        if line_text is None:
            line_text = LineIndex.build(body).line
        if lines is None:
            lines = coerced.row_lines()
        rows = np.flatnonzero(early)
        found: list[tuple[int, str, int]] = []  # line, the number as sent, its nanoseconds
        for row in rows[:_WARN_LINES].tolist():
            line = int(lines[row])
            raw = decode_line_dict(line_text(line - 1)).get(col.name)
            if raw is not None and json_kind(bytes(raw)) == "number":
                found.append((line, bytes(raw).decode(), ns[row].as_py()))
        if found:
            out.append(IngestWarning(col.name, _early_message(found, len(rows) > _WARN_LINES),
                                     found[0][0]))
    return out


def _early_message(found: list[tuple[int, str, int]], more: bool) -> str:
    from shoal.types.upgrade import _ns_to_rfc3339

    line, text, ns = found[0]
    size = abs(ns)
    unit = "s" if size < 10**11 else "ms" if size < 10**14 else "us"
    many = len(found) > 1 or more
    count = f"{len(found)}{'+' if more else ''} epoch number{'s' if many else ''}"
    return (f"{count} read as nanoseconds (timestamp_unit='ns') fall{'' if many else 's'} "
            f"before 1971: line "
            f"{line}: {text} read as nanoseconds is {_ns_to_rfc3339(ns)}. If they are "
            f"seconds, set timestamp_unit='s' (milliseconds: 'ms', microseconds: 'us'), e.g. "
            f"ALTER TABLE ... SET TBLPROPERTIES ('timestamp_unit'='{unit}')")
