"""`shoal extent ...`: look inside extent objects (docs/storage.md).

`shoal extent inspect PATH [--storage-url URL]` prints one JSON document: version, byte
size, row and block counts, the Arrow schema (name, Arrow type, shoal type), the block stats
of the footer, and the min/max `_timestamp` computed by reading the data. Without
`--storage-url`, PATH is a local file; with it, PATH is a key in that store. A missing or
malformed extent prints one line `error: ...` on stderr and exits 1.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shoal.cli.common import fail, print_json
from shoal.errors import ShoalError

if TYPE_CHECKING:
    import pyarrow as pa

    from shoal.storage import ObjectStore


def extent_group() -> None:
    """Inspect extents."""     # a callback keeps `inspect` a subcommand, even when run alone


def _shoal_type(f: pa.Field) -> str | None:
    from shoal.errors import InvalidSchemaError
    from shoal.types.columns import type_of_field

    try:
        return str(type_of_field(f))
    except InvalidSchemaError:
        return None


def inspect_extent(store: ObjectStore, key: str) -> dict[str, Any]:
    """The inspection document of one extent (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from shoal.format.tlm import TlmReader
    from shoal.types.schema import TIMESTAMP_COLUMN

    with TlmReader(store, key) as reader:
        meta = reader.metadata()
        lo = hi = None
        if TIMESTAMP_COLUMN in meta.schema.names:
            for i in range(meta.block_count):
                col = reader.read_block(i, [TIMESTAMP_COLUMN]).column(0)
                if col.null_count == len(col):
                    continue
                mm = pc.min_max(col.view(pa.int64()))
                b_lo, b_hi = mm["min"].as_py(), mm["max"].as_py()
                lo = b_lo if lo is None else min(lo, b_lo)
                hi = b_hi if hi is None else max(hi, b_hi)
        return {
            "path": key,
            "version": meta.version,
            "byte_size": meta.byte_size,
            "row_count": meta.row_count,
            "block_count": meta.block_count,
            "schema": [{"name": f.name, "arrow_type": str(f.type), "type": _shoal_type(f)}
                       for f in meta.schema],
            "block_stats": meta.block_stats,
            "min_timestamp": lo,
            "max_timestamp": hi,
            "bytes_read": reader.bytes_read,
        }


def inspect_command(
    path: Annotated[str, typer.Argument(help="Extent file, or key with --storage-url")],
    storage_url: Annotated[str | None, typer.Option(
        "--storage-url", help="Object store URL (file:///dir, s3://bucket/prefix); "
                              "PATH is then a key in it")] = None,
) -> None:
    """Print an extent's framing, schema, block stats and time bounds as JSON."""
    from shoal.storage import open_store

    try:
        if storage_url is None:
            full = os.path.abspath(path)
            if not os.path.isfile(full):
                fail(f"{path}: no such file")
            store = open_store(Path(os.path.dirname(full)).as_uri())
            key = os.path.basename(full)
        else:
            store = open_store(storage_url)
            key = path
        doc = inspect_extent(store, key)
    except (ShoalError, ValueError) as e:     # ValueError: a key the store cannot name
        fail(str(e))
    print_json(doc, ensure_ascii=False)
