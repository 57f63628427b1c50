"""Pulling a Sentry project's issues (or events) into a table, exactly once.

Sentry's list endpoints answer newest first, a page at a time, with the next page named by
a cursor in the `Link` header (`<...>; rel="next"; results="true"; cursor="<c>"`). One
*walk* reads the list from its head down to the objects already pulled:

- The committed position of a table (catalog source offsets, source
  `sentry:<table>:<resource>:<org>/<project>`) is `high_ns` (every object at or before this
  time is in the table), and, while a walk is under way, `walking` = 1, `top_ns` (the
  newest time of the walk's first page) and the cursor of the walk's next page.
- Each page's rows are committed with the position *after* that page in ONE catalog
  commit (the extent and the source offsets together, compare-and-swap on the table's
  snapshot), so a crash before the commit re-reads the page, and one after it goes on at the
  next page: no page is written twice or skipped. The source is told nothing.
- The walk asks only for objects newer than `high_ns` (`lastSeen:>` for issues, `start=`
  for events) and also stops at the first listed object at or before it. When the list
  ends (`results="false"`) the walk is over and `high_ns` becomes `top_ns`.
- Objects that become newer during a walk (an issue seen again) move to the head of the
  list, above the cursor: the next walk reads them. The event list pages by offset
  (cursors `0:<offset>:0`), so after its first page a walk of events also sends
  `end=<top_ns>`: events arriving meanwhile do not shift the pages still to read. An
  object whose time equals `top_ns` exactly but that was listed only after the walk's
  first page was read is not pulled.

The cursor must have Sentry's form `<value>:<offset>:<is_prev>` (integers), which the
source offsets hold as three integers; another form fails the pull with that reason.

`429 Too Many Requests` waits `Retry-After` seconds (a number or an HTTP date; 60 when
absent; at most `MAX_RETRY_AFTER_S`) through the injected `sleep`, then asks again, at most
`MAX_RATE_LIMITED` times in a row per page. Other failures (a refused or failed fetch, a
status other than 200, a body that is not a JSON list) raise `SentryPullError` naming the
URL and the reason, never the token.
"""

from __future__ import annotations

import email.utils
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from shoal.catalog.base import SourceOffset
from shoal.commit import OffsetsMovedError
from shoal.commit.coordinator import CommitSpec
from shoal.errors import (OutboundFetchError, OutboundRefusedError, PipelineError,
                          UnavailableError)
from shoal.frontends.sentry.binding import SentryBinding
from shoal.frontends.sentry.events import SentryPayloadError
from shoal.frontends.sentry.layout import object_time, rows
from shoal.ingest.arrow_input import shape_batch
from shoal.locations import LocationPolicy
from shoal.outbound import OutboundClient

if TYPE_CHECKING:
    from shoal.catalog.base import TableInfo
    from shoal.client import Shoal

log = logging.getLogger("shoal.sentry")

PAGE_LIMIT = 100
MAX_PAGES_PER_ROUND = 1000
MAX_BODY_BYTES = 32 << 20
MAX_RETRY_AFTER_S = 600.0
DEFAULT_RETRY_AFTER_S = 60.0
MAX_RATE_LIMITED = 5
TIMEOUT_S = 30.0
USER_AGENT = "shoal-sentry-pull/1"
Sleep = Callable[[threading.Event, float], bool]

_LINK = re.compile(r'<([^>]*)>((?:\s*;\s*[A-Za-z_]+\s*=\s*(?:"[^"]*"|[^;,]*))*)')
_PARAM = re.compile(r';\s*([A-Za-z_]+)\s*=\s*(?:"([^"]*)"|([^;,]*))')
_CURSOR = re.compile(r"^(-?\d{1,19}):(\d{1,18}):([01])\Z")


class SentryPullError(UnavailableError):
    """A pull from Sentry's API failed (refused, failed, unexpected answer): the next round
    tries again from the committed position."""

    code = "sentry_pull_failed"
    retryable = True

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"Sentry pull of {url} failed: {reason}")


@dataclass(frozen=True)
class Position:
    """What is pulled (see the module docstring), as the catalog's source offsets hold it."""

    high_ns: int = 0
    walking: bool = False
    top_ns: int = 0
    cursor: str | None = None

    @classmethod
    def of(cls, offsets: Mapping[str, int]) -> Position:
        walking = bool(offsets.get("walking", 0))
        cursor = None
        if walking:
            cursor = (f"{offsets['cursor_value']}:{offsets['cursor_offset']}:"
                      f"{offsets['cursor_prev']}")
        return cls(offsets.get("high_ns", 0), walking, offsets.get("top_ns", 0), cursor)

    def offsets(self, url: str) -> dict[str, int]:
        out = {"high_ns": self.high_ns, "walking": int(self.walking), "top_ns": self.top_ns,
               "cursor_value": 0, "cursor_offset": 0, "cursor_prev": 0}
        if self.walking and self.cursor is not None:
            m = _CURSOR.match(self.cursor)
            if m is None:
                raise SentryPullError(url, f"the next-page cursor {self.cursor[:80]!r} is not "
                                      "of the form value:offset:is_prev")
            out.update(cursor_value=int(m[1]), cursor_offset=int(m[2]),
                       cursor_prev=int(m[3]))
        return out


@dataclass(frozen=True)
class Page:
    objects: list[Any]
    next_cursor: str | None       # None: no further page (results="false" or no rel=next)
    rate_limited: int             # 429 answers before this page came


@dataclass
class RoundResult:
    pages: int = 0
    rows: int = 0
    rate_limited: int = 0
    walk_finished: bool = False
    stopped: bool = False


def next_cursor(link: str | None) -> str | None:
    """The cursor of the `rel="next"` entry of a `Link` header when it has results."""
    for m in _LINK.finditer(link or ""):
        params = {p[0].lower(): p[1] if p[1] else p[2].strip()
                  for p in _PARAM.findall(m[2])}
        if params.get("rel") == "next":
            if params.get("results", "true").lower() != "true":
                return None
            return params.get("cursor") or None
    return None


def retry_after_s(value: str | None, *, now: float) -> float:
    if not value:
        return DEFAULT_RETRY_AFTER_S
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return DEFAULT_RETRY_AFTER_S
        seconds = when.timestamp() - now
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SentryPuller:
    """Pulls one binding's list into its table. One caller at a time (the run loop, a test)."""

    def __init__(self, db: Shoal, binding: SentryBinding, *, sleep: Sleep,
                 clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.binding = binding
        self.sleep = sleep
        self.clock = clock
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if binding.token:
            headers["Authorization"] = f"Bearer {binding.token}"
        self._client = OutboundClient(LocationPolicy.from_config(db.config), headers=headers)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> SentryPuller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- position --------------------------------------------------------------------------
    def position(self) -> tuple[Position, dict[str, int]]:
        offsets = self.db.catalog.source_offsets(self.binding.source)
        return Position.of(offsets), offsets

    # ---- one round -------------------------------------------------------------------------
    def pull(self, stop: threading.Event | None = None) -> RoundResult:
        """Walk until the list ends (or `MAX_PAGES_PER_ROUND` pages, or `stop`), committing
        page by page."""
        stop = stop or threading.Event()
        result = RoundResult()
        while result.pages < MAX_PAGES_PER_ROUND:
            pos, base = self.position()
            page = self._page(pos, stop)
            if page is None:
                result.stopped = True
                return result
            result.rate_limited += page.rate_limited
            result.pages += 1
            written, done = self._commit_page(pos, base, page)
            result.rows += written
            if done:
                result.walk_finished = True
                return result
        return result

    def _params(self, pos: Position) -> dict[str, str]:
        params: dict[str, str] = {"limit": str(PAGE_LIMIT)}
        if self.binding.resource == "issues":
            params.update(sort="date", query=(f"lastSeen:>{_iso(pos.high_ns)}"
                                              if pos.high_ns else ""))
        else:
            params["full"] = "true"
            if pos.high_ns:
                params["start"] = _iso(pos.high_ns)
            if pos.walking:     # the event list pages by offset: hold its end still
                params["end"] = _iso(pos.top_ns)
        if pos.walking and pos.cursor:
            params["cursor"] = pos.cursor
        return params

    def _page(self, pos: Position, stop: threading.Event) -> Page | None:
        url = f"{self.binding.list_url}?{urlencode(self._params(pos))}"
        shown = self.binding.list_url
        limited = 0
        while True:
            try:
                with self._client.open(url, timeout=TIMEOUT_S) as fetched:
                    status = fetched.response.status_code
                    headers = fetched.response.headers
                    body = fetched.read(MAX_BODY_BYTES) if status == 200 else b""
            except OutboundRefusedError as e:
                raise SentryPullError(shown, str(e)) from None
            except OutboundFetchError as e:
                raise SentryPullError(shown, e.reason) from None
            if status == 429:
                limited += 1
                if limited > MAX_RATE_LIMITED:
                    raise SentryPullError(shown, f"still rate-limited (429) after {limited - 1} "
                                          "waits")
                wait = retry_after_s(headers.get("retry-after"), now=self.clock())
                log.info("Sentry rate-limited the pull of table %s: waiting %gs",
                         self.binding.table, wait)
                if self.sleep(stop, wait):
                    return None
                continue
            if status != 200:
                raise SentryPullError(shown, f"HTTP status {status}"
                                      + (" (check the token in sentry_token_env)"
                                         if status in (401, 403) else ""))
            try:
                objects = json.loads(body)
            except (ValueError, UnicodeDecodeError) as e:
                raise SentryPullError(shown, f"the answer is not JSON ({e})") from None
            if not isinstance(objects, list):
                raise SentryPullError(shown, "the answer is not a JSON list")
            return Page(objects, next_cursor(headers.get("link")), limited)

    def _commit_page(self, pos: Position, base: dict[str, int], page: Page
                     ) -> tuple[int, bool]:
        """Commit the page's new objects with the position after it; (rows, walk over)."""
        objects: list[Any] = []
        times: list[int] = []
        reached_old = False
        for n, obj in enumerate(page.objects, start=1):
            try:
                _, ts = object_time(self.binding.resource, obj)
            except SentryPayloadError as e:
                raise SentryPullError(self.binding.list_url,
                                      f"listed object {n} cannot be read: {e}") from None
            if ts <= pos.high_ns:
                reached_old = True
                continue
            objects.append(obj)
            times.append(ts)
        top = pos.top_ns if pos.walking else max(times, default=pos.high_ns)
        if reached_old or page.next_cursor is None:
            after = Position(high_ns=max(top, pos.high_ns))
        else:
            after = Position(high_ns=pos.high_ns, walking=True, top_ns=top,
                             cursor=page.next_cursor)
        if not objects and after == pos:
            return 0, True
        self._commit(rows(self.binding.resource, objects, times), base,
                     after.offsets(self.binding.list_url))
        return len(objects), not after.walking

    def _commit(self, batch: Any, base: dict[str, int], offsets: dict[str, int]) -> None:
        table, source = self.binding.table, self.binding.source
        info: TableInfo = self.db.catalog.load_table(table)
        written = []
        if batch.num_rows:
            shaped = shape_batch(batch, info.schema, table=table,
                                 ingest_time_ns=int(self.clock() * 1e9))
            written = [self.db.coordinator.write_extent(info, [shaped])]
        new = [SourceOffset(source, k, v) for k, v in sorted(offsets.items())]

        def build(_info: TableInfo) -> CommitSpec:
            if self.db.catalog.source_offsets(source) != base:
                raise OffsetsMovedError(table, source)
            return CommitSpec(operation="append", add=written, offsets=new,
                              summary={"source": "sentry", "added_extents": len(written),
                                       "added_rows": batch.num_rows})

        try:
            self.db.coordinator.run(table, build, written=written)
        except OffsetsMovedError:
            raise PipelineError(f'table "{table}": another Sentry pull of the same table '
                                "committed meanwhile; this page is left to it") from None
