"""Query answers on the wire: the JSON document of `POST /v1/query` and `shoal sql --format
json`, CSV rows, and the Arrow IPC stream (docs/http-api.md).

JSON values: timestamps as RFC 3339 UTC strings with their full precision, binary as
base64, NaN/Infinity as strings (JSON has no such numbers), lists and structs nested.
Column types are spelled as Spark SQL spells them (`bigint`, `array<float>`, ...).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import math
from datetime import date, datetime, UTC
from decimal import Decimal
from typing import Any

import pyarrow as pa


def type_name(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t):
        return "tinyint"
    if pa.types.is_int16(t):
        return "smallint"
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "bigint"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return f"array<{type_name(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{type_name(f.type)}" for f in t) + ">"
    if pa.types.is_map(t):
        return f"map<{type_name(t.key_type)},{type_name(t.item_type)}>"
    if pa.types.is_null(t):
        return "void"
    return str(t)


def json_value(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            v = v.astimezone(UTC).replace(tzinfo=None)
        return v.isoformat() + "Z"
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, dict):
        return {k: json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        if v and isinstance(v[0], tuple) and len(v[0]) == 2:     # Arrow maps
            return {str(k): json_value(x) for k, x in v}
        return [json_value(x) for x in v]
    return str(v)


def columns_doc(table: pa.Table) -> list[dict[str, str]]:
    return [{"name": f.name, "type": type_name(f.type)} for f in table.schema]


def json_rows(table: pa.Table) -> list[list[Any]]:
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [[json_value(c[r]) for c in cols] for r in range(table.num_rows)]


def answer_document(table: pa.Table, stats: dict[str, Any]) -> dict[str, Any]:
    return {"columns": columns_doc(table), "rows": json_rows(table), "stats": stats}


def csv_text(table: pa.Table) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(table.schema.names)
    for row in json_rows(table):
        w.writerow(["" if v is None else (json.dumps(v) if isinstance(v, (list, dict)) else v)
                    for v in row])
    return out.getvalue()


def arrow_stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()
