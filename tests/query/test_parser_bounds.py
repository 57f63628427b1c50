"""The bounds of the KQL and PromQL front ends, each a syntax error naming where the query
went over: KQL's `let` count, its nesting and expression depth with every `let` expanded,
and the SQL a query may become; PromQL's length, bracket nesting and operator count, read
on the text before promql-parser (whose cost grows faster than the text) sees it. Queries
at the bounds still parse and evaluate (no RecursionError below them)."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.errors import KqlSyntaxError
from shoal.frontends.kusto.kql import kql_to_sql
from shoal.frontends.kusto.kql.lexer import MAX_KQL_TOKENS
from shoal.frontends.kusto.kql.parser import MAX_KQL_EXPR_DEPTH, MAX_KQL_LETS, MAX_KQL_NESTING
from shoal.frontends.kusto.kql.sqltext import MAX_KQL_SQL_WRITTEN
from shoal.frontends.prometheus.promql.bounds import (MAX_PROMQL_CHARS, MAX_PROMQL_DEPTH,
                                                      MAX_PROMQL_OPERATORS, check_bounds)
from shoal.frontends.prometheus.promql.engine import parse
from shoal.frontends.prometheus.promql.errors import PromQLParseError
from shoal.frontends.prometheus.promql.evaluator import Evaluator
from shoal.frontends.prometheus.promql.storage import SampleBudget

TABLES = {"t": {"s": "string", "n": "long", "ts": "timestamp"}}


def kql_error(query: str) -> KqlSyntaxError:
    with pytest.raises(KqlSyntaxError) as e:
        kql_to_sql(query, TABLES)
    return e.value


# ---- KQL ---------------------------------------------------------------------------------
def test_a_let_past_the_count_is_refused_where_it_starts():
    lets = [f"let a{i} = {i};" for i in range(2000)]
    err = kql_error("\n".join(lets) + "\nt | take 1")
    assert (err.line, err.column, err.found) == (MAX_KQL_LETS + 1, 1, "'let'")
    assert f"at most {MAX_KQL_LETS} let statements" in str(err)
    # at the bound the query translates
    kql_to_sql("\n".join(lets[:MAX_KQL_LETS]) + f"\nt | extend x = a{MAX_KQL_LETS - 1}", TABLES)


def test_a_query_past_the_token_count_is_refused_at_the_first_token_over():
    # t | where n in (1, 1, ...): 6 tokens before the list, 2 per element
    over = MAX_KQL_TOKENS // 2
    query = "t | where n in (" + ",\n".join(["1"] * over) + ")"
    err = kql_error(query)
    assert f"at most {MAX_KQL_TOKENS} tokens" in str(err)
    token = MAX_KQL_TOKENS + 1                         # 1-based: the first one over
    assert (err.line, err.found) == ((token - 6) // 2 + 1, "'1'" if token % 2 else "','")
    kql_to_sql("t | where n in (" + ", ".join(["1"] * 1000) + ")", TABLES)


def test_scalar_lets_expanded_past_the_depth_are_refused():
    # each let is shallow; expanded into each other they are 2 * 120 calls deep
    lets = ["let a0 = 1;"] + [f"let a{i} = abs(abs(a{i - 1}));" for i in range(1, 120)]
    err = kql_error("".join(lets) + "t | extend x = a119")
    assert f"at most {MAX_KQL_EXPR_DEPTH} operators deep (let values expanded)" in str(err)
    assert err.line == 1 and err.column > 1


def test_tabular_lets_expanded_past_the_nesting_are_refused():
    lets = ["let v0 = t;"] + [f"let v{i} = v{i - 1} | where n > {i};" for i in range(1, 100)]
    err = kql_error("\n".join(lets) + "\nv99")
    assert f"nested at most {MAX_KQL_NESTING} deep (let values expanded)" in str(err)
    assert err.found.startswith("'v")


@pytest.mark.parametrize("query", [
    # each level repeats its argument: the SQL doubles per level of a tiny query
    "t | extend x = " + "bin(" * 40 + "ts" + ", 7ms)" * 40,
    # (slow: about a million short pieces are written before the budget is reached)
    pytest.param("".join(f"let a{i} = strcat(a{i - 1}, a{i - 1});" if i else "let a0 = 'x';"
                         for i in range(40)) + "t | extend x = a39", marks=pytest.mark.slow),
    "".join(f"let v{i} = v{i - 1} | union v{i - 1};" if i else "let v0 = t;"
            for i in range(40)) + "v39",
    # many moderate copies add up
    pytest.param("".join(f"let a{i} = strcat(a{i - 1}, a{i - 1});" if i else "let a0 = 'x';"
                         for i in range(19))
                 + "t | project " + ", ".join(f"x{i} = a18" for i in range(200)),
                 marks=pytest.mark.slow),
])
def test_sql_that_would_outgrow_the_budget_is_refused(query):
    err = kql_error(query)
    assert f"at most {MAX_KQL_SQL_WRITTEN >> 20} MiB" in str(err)
    assert err.line == 1 and err.column >= 1


# ---- PromQL --------------------------------------------------------------------------------
def promql_error(expr: str) -> PromQLParseError:
    with pytest.raises(PromQLParseError) as e:
        check_bounds(expr)
    return e.value


@pytest.mark.parametrize(("expr", "where", "what"), [
    ("(" * 5000 + "up" + ")" * 5000, (1, MAX_PROMQL_DEPTH + 1), "nested more than"),
    ("sum(" * 63 + 'rate(x{a=~"("}[5m])' + ")" * 63, (1, 4 * 63 + 7), "nested more than"),
    ("+".join(["up"] * 3000), (1, 3 * MAX_PROMQL_OPERATORS + 3), "operators"),
    ("up\n" + "\n".join("- up" for _ in range(300)), (MAX_PROMQL_OPERATORS + 2, 1), "operators"),
    ("-" * 1000 + "1", (1, MAX_PROMQL_OPERATORS + 1), "operators"),
    ("up " + "or up " * 300, (1, 4 + 6 * MAX_PROMQL_OPERATORS), "operators"),
    ("up" + " " * MAX_PROMQL_CHARS, (1, MAX_PROMQL_CHARS + 1), "longer than"),
])
def test_promql_past_a_bound_is_refused_where_it_goes_over(expr, where, what):
    err = promql_error(expr)
    assert (err.line, err.column) == where
    assert str(err).startswith(f"{where[0]}:{where[1]}: parse error: ")
    assert what in str(err)


def test_strings_comments_and_matchers_count_for_nothing():
    matchers = ", ".join(f'l{i}!="((+-" ' for i in range(500))
    check_bounds(f"up{{{matchers}}} # (((((( + + + +\n+ 1")
    check_bounds('label_replace(up, "a", "' + "(" * 1000 + '", "b", "c")')


def test_at_the_bounds_promql_parses_and_evaluates():
    chain = "+".join(["vector(1)"] * (MAX_PROMQL_OPERATORS + 1))
    expr = "abs(" * (MAX_PROMQL_DEPTH - 1) + chain + ")" * (MAX_PROMQL_DEPTH - 1)
    node = parse(expr)
    ev = Evaluator(None, np.array([0], dtype=np.int64), start_ms=0, end_ms=0,  # type: ignore[arg-type]
                   lookback_ms=300_000, budget=SampleBudget(1000))
    value = ev.eval(node)
    assert float(value.values[0, 0]) == MAX_PROMQL_OPERATORS + 1
