"""Where a PromQL parse error is (`shoal.frontends.prometheus.promql.errpos`), in bounded time: the
positions themselves are checked against a real Prometheus in test_promql_differential."""

from __future__ import annotations

import pytest

from shoal.frontends.prometheus.promql.engine import parse
from shoal.frontends.prometheus.promql.errors import PromQLParseError
from shoal.frontends.prometheus.promql.errpos import MAX_PROBES, line_col, tokens


def test_line_and_column_are_one_based_and_count_lines():
    assert line_col("abc", 0) == (1, 1)
    assert line_col("ab\ncd", 4) == (2, 2)


def test_strings_and_comments_are_not_brackets():
    kinds = [t.kind for t in tokens('x{a=")"} # (\n+ 1')]
    assert kinds == ["ident", "open", "ident", "op", "string", "close", "op", "number"]


@pytest.mark.parametrize(("expr", "where"), [
    ("sum(rate(x[5m])", (1, 16)),
    ("x\n  + )", (2, 6)),
    ('x{a=")"}}', (1, 9)),
])
def test_a_parse_error_says_its_line_and_column(expr, where):
    with pytest.raises(PromQLParseError) as raised:
        parse(expr)
    assert (raised.value.line, raised.value.column) == where
    assert str(raised.value).startswith(f"{where[0]}:{where[1]}: parse error: ")


def test_a_long_bad_query_is_placed_without_probing_every_prefix():
    expr = " + ".join(["x"] * (MAX_PROBES + 10)) + " foo bar"
    with pytest.raises(PromQLParseError) as raised:
        parse(expr)
    assert raised.value.line == 1      # placed (at the start), not parsed 400+ times
