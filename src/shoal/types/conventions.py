"""Per-table ingest conventions, read from table properties (docs/ingest.md).

- `timestamp_unit` (`ns` default, `us`, `ms`, `s`): how an epoch *number* sent for a
  `timestamp` column is read. Text timestamps are not affected.
- `props` (`on` default, `off`): whether fields that cannot become columns are kept in the
  `props` column. Off: such a field makes its record an error, and so does a record that
  writes `props` itself; the column stays in the schema (always null for new rows).

`parse_timestamp_unit` / `parse_props` check a value as CREATE TABLE and SET TBLPROPERTIES
take it (`InvalidPropertyError` otherwise); `IngestConventions.of(properties)` reads them at
ingest time, where a stored value that does not parse falls back to the default with a log
line (a table must stay writable).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from shoal.errors import InvalidPropertyError

log = logging.getLogger(__name__)

TimestampUnit = Literal["ns", "us", "ms", "s"]
TIMESTAMP_UNIT = "timestamp_unit"
PROPS = "props"
# Nanoseconds per unit.
UNIT_NS: dict[str, int] = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
# Epoch nanoseconds of 1971-01-01: an epoch number read as nanoseconds that lands earlier is
# almost surely in a coarser unit (ingest warns).
NS_1971 = 365 * 86_400 * 1_000_000_000
_ON, _OFF = ("on", "true", "1", "yes"), ("off", "false", "0", "no")


def parse_timestamp_unit(value: Any) -> TimestampUnit:
    """A `timestamp_unit` property value, or `InvalidPropertyError` naming the choices."""
    text = str(value).strip().lower() if value is not None else ""
    if text not in UNIT_NS:
        raise InvalidPropertyError(
            f"table property timestamp_unit={value!r}: expected one of 'ns', 'us', 'ms', 's' "
            "(the unit of epoch numbers sent for timestamp columns)")
    return cast(TimestampUnit, text)


def parse_props(value: Any) -> str:
    """A `props` property value as 'on' or 'off', or `InvalidPropertyError`."""
    text = str(value).strip().lower() if value is not None else ""
    if isinstance(value, bool):
        text = "true" if value else "false"
    if text in _ON:
        return "on"
    if text in _OFF:
        return "off"
    raise InvalidPropertyError(
        f"table property props={value!r}: expected 'on' or 'off' (whether fields that "
        "cannot become columns are kept in the props column)")


def normalize(properties: Mapping[str, Any]) -> dict[str, Any]:
    """`properties` with the conventions checked and spelled canonically (None kept: it
    means unset in SET TBLPROPERTIES)."""
    out = dict(properties)
    if out.get(TIMESTAMP_UNIT) is not None:
        out[TIMESTAMP_UNIT] = parse_timestamp_unit(out[TIMESTAMP_UNIT])
    if out.get(PROPS) is not None:
        out[PROPS] = parse_props(out[PROPS])
    return out


@dataclass(frozen=True)
class IngestConventions:
    """What a table's properties say about reading records (see the module docstring)."""

    timestamp_unit: TimestampUnit = "ns"
    props: bool = True

    @property
    def unit_ns(self) -> int:
        return UNIT_NS[self.timestamp_unit]

    @classmethod
    def of(cls, properties: Mapping[str, Any] | None) -> IngestConventions:
        if not properties:
            return DEFAULT_CONVENTIONS
        unit: TimestampUnit = "ns"
        keep = True
        try:
            if properties.get(TIMESTAMP_UNIT) is not None:
                unit = parse_timestamp_unit(properties[TIMESTAMP_UNIT])
            if properties.get(PROPS) is not None:
                keep = parse_props(properties[PROPS]) == "on"
        except InvalidPropertyError as e:
            log.warning("ignoring %s", e)
        if unit == "ns" and keep:
            return DEFAULT_CONVENTIONS
        return cls(unit, keep)

    def to_json(self) -> dict[str, Any]:
        return {"timestamp_unit": self.timestamp_unit, "props": self.props}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> IngestConventions:
        if not doc:
            return DEFAULT_CONVENTIONS
        return cls(parse_timestamp_unit(doc.get("timestamp_unit", "ns")),
                   bool(doc.get("props", True)))


DEFAULT_CONVENTIONS = IngestConventions()


@dataclass(frozen=True)
class IngestWarning:
    """Something a request did that was accepted but is likely not what was meant; acks
    carry these (`{"column", "message"}`) beside the rows written."""

    column: str
    message: str
    line: int | None = None   # the first line it is about (1-based), when there is one

    def to_json(self) -> dict[str, Any]:
        return {"column": self.column, "message": self.message, "line": self.line}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> IngestWarning:
        line = doc.get("line")
        return cls(str(doc["column"]), str(doc["message"]), None if line is None else int(line))

    def shifted(self, offset: int, label: str = "") -> IngestWarning:
        """The same warning `offset` lines further down (a chunk inside a larger input),
        its line named with `label` (the input) when given."""
        if self.line is None:
            return self
        where = f"{label} " if label else ""
        message = self.message.replace(f"line {self.line}:",
                                       f"{where}line {self.line + offset}:", 1)
        return IngestWarning(self.column, message, self.line + offset)
