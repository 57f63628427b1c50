"""The parts of the sync that need no server: property checks, masking, positions, the
current-state SQL and the PostgreSQL text forms."""

from __future__ import annotations

import datetime as dt

import pytest

from shoal.errors import InvalidPropertyError
from shoal.frontends.sync.binding import parse_binding, redact
from shoal.frontends.sync.postgres import (_parse_text, lsn_text, parse_lsn, row_position,
                                           shoal_type)
from shoal.frontends.sync.source import current_state_sql
from shoal.secrets import mask_properties, mask_url
from shoal.types.columns import DYNAMIC, INT, LONG, STRING, TIMESTAMP

URL = "postgresql://u@db:5432/shop"


def test_binding_defaults_and_errors_name_the_property():
    b = parse_binding("Orders-Sync", {"sync_source": URL, "sync_table": "orders"})
    assert (b.source_table, b.mode, b.slot, b.batch) == ("public.orders", "cdc",
                                                         "shoal_orders_sync", 10_000)
    bad = [({"sync_source": "mysqlx://h/d", "sync_table": "t"}, "sync_source"),
           ({"sync_source": "postgresql:///d", "sync_table": "t"}, "sync_source"),
           ({"sync_source": URL, "sync_table": "a.b.c"}, "sync_table"),
           ({"sync_source": URL, "sync_table": "t; drop"}, "sync_table"),
           ({"sync_source": URL, "sync_table": "t", "sync_mode": "poll"}, "sync_cursor"),
           ({"sync_source": URL, "sync_table": "t", "sync_batch": "0"}, "sync_batch"),
           ({"sync_source": URL, "sync_table": "t", "sync_slot": "Bad-Slot"}, "sync_slot")]
    for props, name in bad:
        with pytest.raises(InvalidPropertyError, match=name):
            parse_binding("t", props)


def test_passwords_are_masked():
    assert redact("postgresql://u:p%40ss@h:5/d") == "postgresql://u:***@h:5/d"
    assert redact(URL) == URL
    assert mask_url("failed: mysql://root:x@h/db and postgresql://a:b@c/d") == (
        "failed: mysql://root:***@h/db and postgresql://a:***@c/d")
    assert mask_properties({"sync_source": "postgresql://u:pw@h/d", "api_token": "t0k",
                            "sync_password_env": "PGPASS", "retention": "7d"}) == {
        "sync_source": "postgresql://u:***@h/d", "api_token": "***",
        "sync_password_env": "PGPASS", "retention": "7d"}


def test_positions_sort_in_source_order():
    assert parse_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848
    assert lsn_text(parse_lsn("0/153BC00")) == "0/153BC00"
    ordered = [(0x9FFFFFFF, 10), (0xA0000000, 1), (0xA0000000, 2), (1 << 36, 1)]
    texts = [row_position(lsn, seq) for lsn, seq in ordered]
    assert texts == sorted(texts)


def test_type_mapping_and_text_forms():
    assert [shoal_type(t) for t in ("int4", "int8", "numeric", "jsonb", "date", "uuid")] == [
        INT, LONG, STRING, DYNAMIC, TIMESTAMP, STRING]
    ts = _parse_text("timestamptz")
    assert ts("2026-11-29 21:10:09.633933+00") == dt.datetime(
        2026, 11, 29, 21, 10, 9, 633933, tzinfo=dt.UTC)
    assert ts("2026-11-29 23:10:09+02") == dt.datetime(2026, 11, 29, 21, 10, 9,
                                                       tzinfo=dt.UTC)
    assert ts("2026-11-29") == dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
    assert ts("infinity") is None
    assert _parse_text("bytea")("\\x0102ff") == b"\x01\x02\xff"
    assert _parse_text("bool")("t") is True
    assert _parse_text("numeric")("12345678901234567890.01") == "12345678901234567890.01"
    assert _parse_text("jsonb")('{"a": [1]}') == b'{"a": [1]}'


def test_current_state_sql_names_key_and_columns():
    sql = current_state_sql("orders_sync", ["id"], ["id", "qty"])
    assert sql == ("SELECT `id`, `qty` FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY `id` "
                   "ORDER BY _source_position DESC) AS _rn FROM `orders_sync`) AS _log "
                   "WHERE _rn = 1 AND _op <> 'delete'")
