"""KQL (Kusto Query Language) for shoal: a parser of our own and a translation to Spark SQL.

No well-kept Python KQL parser exists (Microsoft's parser is C#; the Python packages on
PyPI are abandoned or cover a sliver of the language), so shoal carries a small one: a
tokenizer (`lexer`), a recursive-descent parser producing a small tree (`ast`, `parser`)
and a translator (`translate`, `scalar`, `functions`) that writes one Spark SQL statement.
That statement goes through exactly the SQL path (`QueryEngine.execute`): the guard, the
planner's per-scan pushdown and pruning cascade, either engine, every function and the
stats are the same as for SQL. The subset and every place where the mapping approximates
KQL's semantics are listed in the docstrings of `translate` (tabular operators) and
`scalar` (expressions and functions).

Time travel (not in KQL): `table('logs', version=12)` reads snapshot 12 and
`table('logs', asof=datetime(2026-03-01 12:00))` the last snapshot committed by then.
`render` is returned as a hint (`Translation.render`), not applied.
"""

from __future__ import annotations

from collections.abc import Mapping

from shoal.frontends.kusto.kql.parser import parse
from shoal.frontends.kusto.kql.translate import Column, Translation, translate
from shoal.frontends.kusto.kql.values import now_ns

__all__ = ["Column", "Translation", "kql_to_sql"]


def kql_to_sql(text: str, tables: Mapping[str, Mapping[str, str]], *,
               now_ns_utc: int | None = None) -> Translation:
    """The Spark SQL of the KQL query `text`. `tables`: table -> column -> shoal type kind;
    `now_ns_utc`: the instant `now()` and `ago()` read (default: the current time)."""
    return translate(parse(text), tables, now_ns() if now_ns_utc is None else now_ns_utc)
