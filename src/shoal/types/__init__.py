"""Column types, schemas, schema versions and upgrades (docs/sql.md, docs/ingest.md)."""

from shoal.types.columns import (BOOL, BYTES, DYNAMIC, FIELD_TYPE_KEY, HEADERS, INT, LONG, REAL,
                                 STRING, TIMESTAMP, ColumnType, parse_type, type_of_field,
                                 vector)
from shoal.types.schema import (MAX_NAME_CHARS, PROPS_COLUMN, RESERVED_COLUMNS, SCHEMA_MODES,
                                TIMESTAMP_COLUMN, Column, Schema, SchemaMode,
                                check_column_name, check_table_name, is_identifier_safe,
                                is_query_reserved, widening_allowed)
from shoal.types.upgrade import cast_column, upgrade_batch

__all__ = [
                                 "BOOL",
                                 "BYTES",
                                 "DYNAMIC",
                                 "FIELD_TYPE_KEY",
                                 "HEADERS",
                                 "INT",
                                 "LONG",
                                 "MAX_NAME_CHARS",
                                 "PROPS_COLUMN",
                                 "REAL",
                                 "RESERVED_COLUMNS",
                                 "SCHEMA_MODES",
                                 "STRING",
                                 "TIMESTAMP",
                                 "TIMESTAMP_COLUMN",
                                 "Column",
                                 "ColumnType",
                                 "Schema",
                                 "SchemaMode",
                                 "cast_column",
                                 "check_column_name",
                                 "check_table_name",
                                 "is_identifier_safe",
                                 "is_query_reserved",
                                 "parse_type",
                                 "type_of_field",
                                 "upgrade_batch",
                                 "vector",
                                 "widening_allowed",
]
