"""The function surface of the embedded engine: each Spark function it answers, by family.

Each family module registers its functions in `shoal.query.embedded.vetting.FUNCTIONS` (how
a call is vetted, its Spark result type, and the DuckDB expression with Spark's answer where
DuckDB's own function answers differently) and names in `SPARK_ONLY` the everyday functions
of its family left to Spark, with the reason. Importing this package registers them all.
"""

from __future__ import annotations

from shoal.query.embedded.functions import (aggregates, casts, conditional, decimals, numbers,
                                           regex, statistics, strings, time, windows)
from shoal.query.embedded.functions import collections  # after regex: it widens size()
from shoal.query.embedded.vetting import ANONYMOUS, FUNCTIONS, SPARK_ONLY, SPELLINGS

__all__ = ["ANONYMOUS", "FUNCTIONS", "SPARK_ONLY", "SPELLINGS", "aggregates", "casts",
           "collections", "conditional", "decimals", "function_table_markdown", "numbers",
           "regex", "statistics", "strings", "time", "windows"]


def function_table_markdown() -> str:
    """The table docs/sql.md shows: what the embedded engine answers, and what stays on
    Spark, from the same table `to_local` vets with."""
    lines = ["| function | engine | rule |", "|---|---|---|"]
    for f in [*FUNCTIONS.values(), *ANONYMOUS.values()]:
        lines.append(f"| `{f.names}` | embedded | {f.note} |")
    for names, why in SPARK_ONLY.items():
        lines.append(f"| `{names}` | Spark | {why} |")
    return "\n".join(lines) + "\n"
