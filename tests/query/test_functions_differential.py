"""The everyday string and math functions answer on the embedded engine exactly as on Spark.

Generated rows (nulls, empty strings, spaces and tabs, non-BMP text, combining marks,
negative numbers, halves, -0.0, integers near their limits) are ingested into one table per
example; each statement evaluates many functions over the whole table on both engines
(`engine=spark`, `engine=local`) and the answers must match exactly: names, Arrow types
and every value (floats by their exact representation, so -0.0 and NaN count). The cases
where the embedded engine would differ (a zero divisor, non-ASCII case mapping, a double
beyond bigint) go to Spark under `auto` and answer as Spark does. Every function on the
embedded engine's list appears in `COVERED`, checked against the table the router uses.
"""

from __future__ import annotations

import importlib
import itertools
import math
import re
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shoal
from shoal.query.embedded.transpile import FUNCTIONS, function_table_markdown
from shoal.types import INT, LONG, REAL, STRING, Column
from tests.query.conftest import SPARK_MASTER, ndjson, rows_at

INT_MIN, INT_MAX, LONG_MIN, LONG_MAX = -2**31, 2**31 - 1, -2**63, 2**63 - 1

# Text a user's rows hold: spaces and tabs at the ends, non-BMP characters, combining marks,
# letters whose case mapping is special, the delimiters the statements below use.
EDGE_TEXT = ["", " ", "\xa0x\xa0 ", "  a b  ", "\tx\t", "abc", "aaa", "Straße", "İı", "ΣΑΣ",
             "😀a😀", "e\u0301", "ab|cd", "-", "m", "x😀"]
text_st = st.one_of(st.none(), st.sampled_from(EDGE_TEXT), st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from(
        " \tab😀"), max_size=8))
ascii_st = st.one_of(st.none(), st.text(alphabet=st.characters(
    min_codepoint=32, max_codepoint=126), max_size=8))
EDGE_REAL = [0.0, -0.0, 2.5, -2.5, 2.675, -2.675, 0.5, -0.5, 1.5, 1e15 + 0.5, -9.1e18, 9.1e18,
             1e-300, 4.0, -4.0, 2.0]
real_st = st.one_of(st.none(), st.sampled_from(EDGE_REAL), st.floats(
    min_value=-9e18, max_value=9e18, allow_nan=False, allow_infinity=False))
int_st = st.one_of(st.none(), st.sampled_from([0, 1, -1, 2, -7, 7, INT_MIN + 1, INT_MAX]),
                   st.integers(INT_MIN + 1, INT_MAX))
long_st = st.one_of(st.none(), st.sampled_from([0, 1, -1, 3, -3, LONG_MIN + 1, LONG_MAX]),
                    st.integers(LONG_MIN + 1, LONG_MAX))
row_st = st.fixed_dictionaries({"s": text_st, "u": text_st, "a": ascii_st, "x": real_st,
                                "y": real_st, "i": int_st, "l": long_st})
rows_st = st.lists(row_st, min_size=20, max_size=40)

STRINGS = [
    "length(s)", "char_length(u)", "trim(s)", "ltrim(s)", "rtrim(s)",
    "substring(s, 2)", "substr(s, 0, 2)", "substr(s, -3, 2)", "substr(s, -1)",
    "substring(s, 3, -1)", "substr(s, -10, 12)", "substr(s, 1, 0)", "substring(u, 2, 3)",
    "concat(s, u)", "concat(s, '-', u)", "concat_ws('|', s, u, 'z')", "concat_ws('', u, s)",
    "replace(s, 'a', 'xy')", "replace(s, u, '!')", "replace(u, '', 'q')",
    "lpad(s, 6, 'ab')", "rpad(s, 3, '😀')", "lpad(s, 0, '.')", "rpad(s, -2, '.')",
    "lpad(u, 2)", "rpad(u, 4)",
    "instr(s, 'a')", "instr(s, u)", "instr(u, '')",
    "startswith(s, u)", "endswith(s, 'c')", "contains(s, u)", "contains(u, '')",
    "lower(a)", "upper(a)", "lcase(concat(a, 'X'))", "ucase(trim(a))",
    "greatest(s, u)", "least(s, u, 'm')", "length(concat_ws('', s, u))",
]
MATHS = [
    "abs(x)", "abs(i)", "abs(l)", "ceil(x)", "floor(x)", "ceiling(y)", "ceil(i)", "floor(l)",
    "sign(x)", "signum(i)", "signum(y)", "sqrt(x)", "sqrt(i)", "sqrt(l)",
    "least(x, i)", "greatest(x, y, l)", "least(i, l)", "greatest(i, 3)",
]
# Divisors are never zero here: a zero divisor is Spark's (see below).
DIVISIONS = ["x / y", "i / l", "l / 2", "x / i", "l div i", "i div 2", "i % l", "x % y",
             "l % 3", "x % 2", "i % -1", "l div -3"]
NONZERO = "WHERE y <> 0 AND i <> 0 AND l <> 0"

# Each function on the embedded engine's list and a statement above exercising it.
COVERED = {
    "lower": "lower(a)", "upper": "upper(a)", "length": "length(s)", "trim": "trim(s)",
    "substring": "substr(s, -3, 2)", "concat": "concat(s, u)",
    "concat_ws": "concat_ws('|', s, u, 'z')", "replace": "replace(s, u, '!')",
    "lpad": "lpad(s, 6, 'ab')", "instr": "instr(s, u)", "startswith": "startswith(s, u)",
    "endswith": "endswith(s, 'c')", "contains": "contains(s, u)", "abs": "abs(x)",
    "ceil": "ceil(x)", "floor": "floor(x)", "sign": "sign(x)", "sqrt": "sqrt(x)",
    "least": "least(x, i)", "greatest": "greatest(x, y, l)", "/": "x / y", "div": "l div i",
    "%": "x % y",
}


def _canon(v):
    if isinstance(v, float):
        return repr(v)          # 'nan', '-0.0' and every bit of the value
    return v


def _same(spark: pa.Table, local: pa.Table, sql: str) -> None:
    assert local.schema.names == spark.schema.names, sql
    for f, g in zip(spark.schema, local.schema, strict=True):
        assert g.type.equals(f.type), f"{sql}: {f.name} is {g.type} locally, {f.type} in Spark"
    for name in spark.schema.names:
        a = [_canon(v) for v in spark.column(name).to_pylist()]
        b = [_canon(v) for v in local.column(name).to_pylist()]
        diff = [(k, x, y) for k, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        assert not diff, f"{sql}: column {name} (row, spark, local): {diff[:5]}"


def both(db, sql: str) -> pa.Table:
    s = db.sql(sql, engine="spark")
    loc = db.sql(sql, engine="local")
    assert s.stats.engine == "spark" and loc.stats.engine == "local"
    assert s.table.num_rows == loc.table.num_rows, sql
    _same(s.table, loc.table, sql)
    return loc.table


def _select(exprs: list[str], table: str, where: str = "") -> str:
    cols = ", ".join(f"{e} AS c{k}" for k, e in enumerate(exprs))
    return f"SELECT k, {cols} FROM {table} {where} ORDER BY k"


@pytest.fixture(scope="module")
def fdb(tmp_path_factory, spark):
    client = shoal.connect(data_dir=str(tmp_path_factory.mktemp("functions")),
                           spark_master=SPARK_MASTER)
    yield client
    client.close()


_names = itertools.count()
SCHEMA = [Column("k", LONG), Column("s", STRING), Column("u", STRING), Column("a", STRING),
          Column("x", REAL), Column("y", REAL), Column("i", INT), Column("l", LONG)]


def _table(db, rows: list[dict]) -> str:
    name = f"fn{next(_names)}"
    db.create_table(name, SCHEMA)
    db.ingest_ndjson(name, ndjson(rows_at(0, len(rows), k=lambda n: n,
                                          **{c: (lambda n, c=c: rows[n][c])
                                             for c in rows[0]})))
    return name


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(rows=rows_st)
def test_string_and_math_functions_answer_as_spark_does(fdb, rows):
    name = _table(fdb, rows)
    both(fdb, _select(STRINGS, name))
    both(fdb, _select(MATHS, name))
    both(fdb, _select(DIVISIONS, name, NONZERO))


EDGES = [  # (statement over one row of `edge`, why the embedded engine hands it to Spark)
    ("SELECT lower(s) AS v FROM edge", "lower() of non-ASCII text"),
    ("SELECT upper(s) AS v FROM edge", "upper() of non-ASCII text"),
    ("SELECT ceil(x * 1000000) AS v FROM edge", "ceil() beyond bigint"),
    ("SELECT floor(-x * 1000000) AS v FROM edge", "floor() beyond bigint"),
    ("SELECT x / i AS v FROM edge", "division by zero"),
    ("SELECT l div i AS v FROM edge", "div by zero"),
    ("SELECT l % i AS v FROM edge", "remainder by zero"),
]


@pytest.fixture(scope="module")
def edge(fdb):
    fdb.create_table("edge", [Column("s", STRING), Column("x", REAL), Column("i", INT),
                              Column("l", LONG)])
    fdb.ingest_ndjson("edge", ndjson(rows_at(0, 1, s="Straße İ ΣΑΣ", x=1e16, i=0, l=7)))
    return fdb


@pytest.mark.parametrize("sql,why", EDGES)
def test_rows_the_embedded_engine_would_answer_differently_go_to_spark(edge, sql, why):
    with pytest.raises(Exception, match=re.escape(why)):
        edge.sql(sql, engine="local")
    auto = spark_answer = None
    try:
        spark_answer = edge.sql(sql, engine="spark").table
    except Exception as e:          # Spark's ANSI mode raises on a zero divisor
        with pytest.raises(type(e)):
            edge.sql(sql)
        return
    auto = edge.sql(sql)
    assert auto.stats.engine == "spark", auto.stats.engine_reason
    _same(spark_answer, auto.table, sql)


@pytest.mark.parametrize("sql,answer", [
    ("SELECT substr('Spark SQL', -3) AS v", "SQL"), ("SELECT substr('abc', 0, 2) AS v", "ab"),
    ("SELECT lpad('hi', 5, '??') AS v", "???hi"), ("SELECT lpad('hello', 2, '?') AS v", "he"),
    ("SELECT rpad('hello', 2, '?') AS v", "he"), ("SELECT length('😀é') AS v", 2),
    ("SELECT trim('\t x \t') AS v", "\t x \t"), ("SELECT concat('a', NULL) AS v", None),
    ("SELECT concat_ws('-', 'a', NULL, 'b') AS v", "a-b"), ("SELECT 7 DIV -2 AS v", -3),
    ("SELECT -7 % 2 AS v", -1), ("SELECT sqrt(-4) AS v", math.nan), ("SELECT sign(-3) AS v", -1.0),
    ("SELECT ceil(-7) AS v", -7), ("SELECT 1 / 4 AS v", 0.25),
])
def test_known_spark_answers_locally(edge, sql, answer):
    """Spark's documented answers (its function reference), given by the embedded engine."""
    got = edge.sql(sql + " FROM edge", engine="local").table.column("v").to_pylist()[0]
    assert repr(got) == repr(answer)


def _covered_everywhere() -> set[str]:
    """The functions named in this file's COVERED and in each family file's."""
    covered = set(COVERED)
    for path in Path(__file__).parent.glob("test_functions_*_differential.py"):
        covered |= set(importlib.import_module(f"tests.query.{path.stem}").COVERED)
    return covered


def test_every_function_on_the_embedded_list_has_a_differential_case():
    from tests.query import test_functions_agg_differential as agg   # imports this module

    names = {n.strip() for f in FUNCTIONS.values() for n in f.names.split(",")}
    firsts = {f.names.split(",")[0].strip() for f in FUNCTIONS.values()}
    covered = _covered_everywhere()
    assert firsts <= covered, firsts - covered
    statements = STRINGS + MATHS + DIVISIONS
    for fn, expr in COVERED.items():
        assert expr in statements, fn
    for fn, expr in agg.COVERED.items():
        assert expr in agg.STATEMENTS, fn
    assert len(names) >= 30


def test_sql_doc_lists_what_runs_where_from_the_routers_table():
    doc = (Path(__file__).parents[2] / "docs" / "sql.md").read_text()
    begin, end = "<!-- functions: generated -->\n", "<!-- functions: end -->"
    assert begin in doc and end in doc
    assert doc.split(begin, 1)[1].split(end, 1)[0] == function_table_markdown()


@pytest.fixture(scope="module")
def shapes(fdb):
    fdb.create_table("shapes", [Column("s", STRING), Column("n", LONG)])
    fdb.ingest_ndjson("shapes", ndjson(rows_at(0, 8, s=lambda i: [
        "Ab", "aB", None, "x", "ab", "", "AB", "a-b"][i], n=lambda i: i - 2)))
    return fdb


@pytest.mark.parametrize("sql", [
    "SELECT lower(s) AS v, count(*) AS c FROM shapes GROUP BY lower(s) ORDER BY v",
    "SELECT substr(s, -1) AS v, sum(n / 2) AS c, max(n DIV 2) AS d FROM shapes GROUP BY 1 "
    "ORDER BY 1",
    "SELECT s, n FROM shapes WHERE length(s) = 2 AND n % 2 = 0 ORDER BY upper(s), n",
    "SELECT concat_ws(':', s, s) AS v FROM shapes WHERE startswith(lower(s), 'a') "
    "AND ceil(n / 3) >= 1 ORDER BY v",
])
def test_functions_in_grouping_filters_and_order_answer_as_spark_does(shapes, sql):
    both(shapes, sql)
