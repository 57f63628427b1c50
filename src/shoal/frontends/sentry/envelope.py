"""Reading what a Sentry SDK sends: envelopes and store bodies, compressed or not.

- `decode_body(body, encoding, limit)`: `Content-Encoding` `gzip`, `deflate` (zlib-wrapped,
  or raw as some clients send it) or identity, decoded to at most `limit` bytes (a bomb costs
  `limit` bytes and a 413). `br` is refused with 415 (no Brotli decoder is installed; the
  Python SDK then uses gzip).
- `parse_envelope(data)`: an envelope is a JSON header line, then items, each a JSON header
  line (`type`, optional `length`) and a payload of `length` bytes (or up to the next
  newline when `length` is absent). At most `MAX_ITEMS` items. Items of type `event` and
  `transaction` are returned for writing; every other type (`session`, `sessions`,
  `client_report`, `attachment`, `user_report`, `check_in`, `profile`, `replay_event`,
  `replay_recording`, `statsd`, `span`, `log`, and any type not known yet) is counted as
  skipped and acknowledged, as Sentry's own relay does with what it does not keep.
- `parse_store(data)`: a store body is one event as JSON (old SDKs send it base64 of zlib).

Problems are `SentryPayloadError` (400) naming the item and the field.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.errors import PayloadTooLargeError
from shoal.frontends.sentry.events import SentryPayloadError, event_id_of
from shoal.http.body import gunzip
from shoal.http.errors import UnsupportedEncodingError

MAX_ITEMS = 100
EVENT_TYPES = ("event", "transaction")


@dataclass(frozen=True)
class EnvelopeItem:
    type: str
    payload: Any              # the decoded JSON event


@dataclass
class Envelope:
    header: dict[str, Any]
    events: list[EnvelopeItem] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)    # item type -> count


def decode_body(body: bytes, encoding: str | None, *, limit: int) -> bytes:
    value = (encoding or "identity").strip().lower()
    if value in ("", "identity"):
        return body
    if value in ("gzip", "x-gzip"):
        return gunzip(body, limit=limit)
    if value == "deflate":
        return _inflate(body, limit)
    raise UnsupportedSentryEncodingError(value)


class UnsupportedSentryEncodingError(UnsupportedEncodingError):
    def __init__(self, encoding: str) -> None:
        super().__init__(encoding)
        self.args = (f'unsupported Content-Encoding "{encoding}" (expected gzip, deflate or '
                     "identity)",)


def _inflate(body: bytes, limit: int) -> bytes:
    for wbits in (zlib.MAX_WBITS, -zlib.MAX_WBITS):     # zlib-wrapped, then raw deflate
        d = zlib.decompressobj(wbits)
        try:
            out = d.decompress(body, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit or d.unconsumed_tail:
            raise PayloadTooLargeError(len(out) + len(d.unconsumed_tail), limit)
        return out
    raise SentryPayloadError("the body is not valid deflate data (Content-Encoding: deflate)")


def _json_line(data: bytes, where: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise SentryPayloadError(f"{where}: not valid JSON ({e})") from None


def parse_envelope(data: bytes) -> Envelope:
    newline = data.find(b"\n")
    head = data if newline < 0 else data[:newline]
    header = _json_line(head, "envelope header (line 1)")
    if not isinstance(header, Mapping):
        raise SentryPayloadError("envelope header (line 1): expected a JSON object")
    env = Envelope(dict(header))
    if header.get("event_id") is not None:
        env.header["event_id"] = event_id_of(header["event_id"],
                                             where='envelope header: field "event_id"')
    pos = len(data) if newline < 0 else newline + 1
    n = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        line = data[pos:end]
        if not line.strip():            # blank lines between items (or a trailing one)
            pos = end + 1
            continue
        n += 1
        where = f"envelope item {n}"
        if n > MAX_ITEMS:
            raise SentryPayloadError(f"an envelope may hold at most {MAX_ITEMS} items")
        item = _json_line(line, f"{where} header")
        if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
            raise SentryPayloadError(f'{where} header: expected an object with a "type"')
        pos = end + 1
        length = item.get("length")
        if length is None:
            stop = data.find(b"\n", pos)
            stop = len(data) if stop < 0 else stop
            payload, pos = data[pos:stop], stop + 1
        else:
            if isinstance(length, bool) or not isinstance(length, int) or length < 0:
                raise SentryPayloadError(f'{where} header: field "length" must be a '
                                         f"non-negative integer, got {length!r}")
            if pos + length > len(data):
                raise SentryPayloadError(f"{where}: length {length} runs past the end of "
                                         "the envelope")
            payload, pos = data[pos:pos + length], pos + length
            if pos < len(data) and data[pos:pos + 1] == b"\n":
                pos += 1
        kind = item["type"]
        if kind in EVENT_TYPES:
            env.events.append(EnvelopeItem(kind, _json_line(payload, f"{where} ({kind})")))
        else:
            env.skipped[kind] = env.skipped.get(kind, 0) + 1
    return env


def parse_store(data: bytes) -> Any:
    text = data.lstrip()
    if text[:1] not in (b"{", b""):     # old SDKs: base64 of a zlib stream
        try:
            text = zlib.decompress(base64.b64decode(text, validate=False))
        except (binascii.Error, zlib.error, ValueError):
            raise SentryPayloadError("the store body is neither JSON nor base64 of "
                                     "zlib-compressed JSON") from None
    return _json_line(text, "store body")
