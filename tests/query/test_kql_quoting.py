"""How KQL's literals become SQL: every escape form KQL allows reads as the value it writes,
the value reaches the answer unchanged through sqlglot and either engine, and it never
changes the statement's shape. (A needle ending in a backslash, `contains "\\\\"`, once
closed the SQL literal early and let the rest of the query run as SQL.)

The many generated examples run on DuckDB as the embedded engine receives a statement (the
Spark SQL parsed by sqlglot's Spark dialect, written in DuckDB's) and through the embedded
engine itself; a fixed list of nasty strings runs on Spark. The string operators are checked
against Python: `contains`/`startswith`/`endswith` fold case per character (a letter whose
other case is one character), the `_cs` forms and `==` compare exactly, `has` looks for
the needle between non-alphanumerics (ASCII letters and digits make terms, as Kusto's).
"""

from __future__ import annotations

import json
import re

import duckdb
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

import shoal
from shoal.errors import KqlSyntaxError
from shoal.query.guard import classify
from shoal.frontends.kusto.kql import kql_to_sql
from shoal.frontends.kusto.kql.parser import parse
from shoal.query.routing import LocalEngineRefusedError
from shoal.types import LONG, STRING, Column
from tests.support.fixtures import SPARK_MASTER

TABLES = {"t": {"s": "string", "n": "long"}}
ATTACK = ('t | where false and s contains "\\\\" or s == "))) UNION ALL SELECT NULL, NULL, 42, '
          'version(), NULL --"')

# Strings that have broken SQL quoting somewhere: quotes, backslashes at the end, escapes
# that mean something to Spark (\u, octal, \%), comment and statement syntax, LIKE and
# regex metacharacters, line breaks, non-ASCII letters whose case is not one character.
NASTY = ["\\", "a\\", "\\\\", "'", "it's", "\\'", "'\\", '"', '\\"', "''", "\\u0041", "\\101",
         "\\%", "\\_", "%", "_", "50%_off", "*/", "/*", "--", "; SELECT 1", "))) --",
         "\n", "a\r\nb", "\t", "`", "``x`", "$x", "^[a-z]+$", "(.*a){7}", "\\z", "\\Q\\E",
         "Ab", "\u00e9\u00c9", "\u00df", "\u0130i", "\u01c5", "\u2028", "\U0001f600", "x" * 300,
         "a b", "a-b", "a.b", "?", "|", "{1}", "[x]", ""]
# Rows the string operators search: the nasty strings and some text around them.
ROWS = sorted(set(NASTY) | {f"pre {v} post" for v in NASTY[:20]} | {
    "foo", "FOO bar", "foobar", "bar-foo", "\u00c9t\u00e9", "x\\y", "100%", "under_score"})

# Text a KQL literal can hold: anything but NUL and lone surrogates (neither can be written
# in a SQL statement; the lexer refuses them with a position).
TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"),
               max_size=40)


# ---- KQL's literal forms ---------------------------------------------------------------------
def regular(value: str, quote: str = '"') -> str:
    """`value` as a KQL string with backslash escapes."""
    escaped = value.replace("\\", "\\\\").replace(quote, "\\" + quote)
    return quote + escaped.replace("\n", "\\n").replace("\r", "\\r") + quote


def verbatim(value: str, quote: str = '"') -> str | None:
    """`value` as a verbatim KQL string (None: a line break cannot be in one)."""
    if "\n" in value or "\r" in value:
        return None
    return "@" + quote + value.replace(quote, quote * 2) + quote


def multiline(value: str) -> str | None:
    return None if "```" in value or value.endswith("`") else f"```{value}```"


def forms(value: str) -> list[str]:
    out = [regular(value), regular(value, "'"), verbatim(value), verbatim(value, "'"),
           multiline(value), "h" + regular(value)]
    if len(value) > 1:          # adjacent literals are one: "ab" as "a" @'b'
        out.append(regular(value[:1]) + " " + (verbatim(value[1:], "'") or regular(value[1:])))
    return [f for f in out if f is not None]


def literal_of(kql_literal: str) -> str:
    body = parse(f"t | extend x = {kql_literal}").body
    return body.operators[0].items[0].expr.value


@pytest.mark.parametrize(("written", "value"), [
    ('"a\\\\b"', "a\\b"), ("'it\\'s'", "it's"), ('"say \\"hi\\""', 'say "hi"'),
    ('"tab\\tnl\\ncr\\r"', "tab\tnl\ncr\r"), ('@"C:\\dir\\"', "C:\\dir\\"),
    ("@'it''s'", "it's"), ('@"say ""hi"""', 'say "hi"'), ("```two\nlines \\n```", "two\nlines \\n"),
    ('h"secret"', "secret"), ("h@'x\\'", "x\\"), ('"a" \'b\' @"\\c"', "ab\\c"),
    ('"\u00e9\U0001f600"', "\u00e9\U0001f600"),
])
def test_each_literal_form_reads_as_its_value(written, value):
    assert literal_of(written) == value


@pytest.mark.parametrize(("query", "line", "column", "found"), [
    ('t | where s contains "\\q"', 1, 23, "'\\\\'"),
    ('t | where s contains "\\0"', 1, 23, "'\\\\'"),        # no NUL escape
    ('t | where s contains "abc', 1, 22, "'\"'"),
    ("t | where s contains ```abc", 1, 22, "'`'"),
    ('t | where s contains "a\nb"', 1, 22, "'\"'"),          # a line break ends nothing
    ('t\n| where s == "a\0b"', 2, 16, "U+0000"),
    ('t | where s == "\ud800"', 1, 17, "U+D800"),
])
def test_bad_literals_are_positioned_syntax_errors(query, line, column, found):
    with pytest.raises(KqlSyntaxError) as e:
        kql_to_sql(query, TABLES)
    assert (e.value.line, e.value.column, e.value.found) == (line, column, found)


# ---- the statement's shape -----------------------------------------------------------------
def one_select(sql: str) -> exp.Select:
    """The statement `sql`, asserting it is one SELECT without a set operation (and that
    the guard's tokenizer reads it as one statement too)."""
    trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
    assert len(trees) == 1, sql
    assert isinstance(trees[0], exp.Select), sql
    assert not list(trees[0].find_all(exp.SetOperation)), sql
    assert classify(sql).kind == "select"
    return trees[0]


def test_the_injection_is_one_select_comparing_the_payload_as_a_string():
    sql = kql_to_sql(ATTACK, TABLES).sql
    tree = one_select(sql)
    strings = {lit.this for lit in tree.find_all(exp.Literal) if lit.is_string}
    assert "))) UNION ALL SELECT NULL, NULL, 42, version(), NULL --" in strings
    assert not list(tree.find_all(exp.Anonymous))       # no version() call


@pytest.mark.parametrize("needle", ["\\", "a\\", "'", "\\'", "it's\\"])
@pytest.mark.parametrize("op", ["contains", "!contains", "startswith", "endswith", "has",
                                "hasprefix", "hassuffix", "contains_cs", "startswith_cs",
                                "endswith_cs", "has_cs", "==", "!=", "=~", "matches regex"])
def test_needles_with_backslashes_and_quotes_translate_to_one_select(op, needle):
    for lit in (regular(needle), verbatim(needle)):
        one_select(kql_to_sql(f't | where s {op} {lit} or s == "x) --"', TABLES).sql)


# ---- the round trip: generated text, DuckDB as the embedded engine receives the statement --
@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (s VARCHAR, n BIGINT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(v, i) for i, v in enumerate(ROWS)])
    yield con
    con.close()


def on_duckdb(con, sql: str) -> list[tuple]:
    return con.execute(sqlglot.transpile(sql, read="spark", write="duckdb")[0]).fetchall()


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=TEXT)
def test_any_text_round_trips_as_one_literal(duck, value):
    for written in forms(value):
        sql = kql_to_sql(f"t | project x = {written} | take 1", TABLES).sql
        tree = one_select(sql)
        (item,) = tree.selects
        assert isinstance(item.this, exp.Literal) and item.this.is_string, sql
        assert item.this.this == value, (written, sql)
        assert on_duckdb(duck, sql) == [(value,)], (written, sql)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=TEXT.filter(bool))
def test_any_text_is_one_column_name(duck, name):
    # ['...'] names a column whatever it holds; the name is the answer's column's name
    sql = kql_to_sql(f"t | project [{regular(name)}] = n | take 1", TABLES).sql
    (item,) = one_select(sql).selects
    assert isinstance(item, exp.Alias) and item.alias == name, sql
    duck.execute(sqlglot.transpile(sql, read="spark", write="duckdb")[0])
    assert [d[0] for d in duck.description] == [name]


# ---- the string operators against Python ----------------------------------------------------
def _cls(c: str) -> set[str]:
    lo, up = c.lower(), c.upper()
    return {c, lo, up} if lo != up and len(lo) == 1 and len(up) == 1 else {c}


def _at(s: str, x: str, i: int) -> bool:
    return 0 <= i <= len(s) - len(x) and all(s[i + j] in _cls(c) for j, c in enumerate(x))


def _word(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _has(s: str, x: str) -> bool:
    return any(_at(s, x, i) and (i == 0 or not _word(s[i - 1])) and (
        i + len(x) == len(s) or not _word(s[i + len(x)])) for i in range(len(s) + 1))


ORACLE = {
    "contains": lambda s, x: any(_at(s, x, i) for i in range(len(s) + 1)),
    "startswith": lambda s, x: _at(s, x, 0),
    "endswith": lambda s, x: _at(s, x, len(s) - len(x)),
    "contains_cs": lambda s, x: x in s,
    "startswith_cs": lambda s, x: s.startswith(x),
    "endswith_cs": lambda s, x: s.endswith(x),
    "==": lambda s, x: s == x,
    "has": _has,
}


def matching(op: str, needle: str) -> set[int]:
    return {i for i, s in enumerate(ROWS) if ORACLE[op](s, needle)}


def _needle(kql_lit: str, op: str) -> str:
    return f"t | where s {op} {kql_lit} | project n"


NEEDLES = st.one_of(TEXT, st.sampled_from(ROWS).flatmap(
    lambda row: st.tuples(st.integers(0, len(row)), st.integers(0, len(row))).map(
        lambda ij: row[min(ij):max(ij)])))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(needle=NEEDLES, op=st.sampled_from([o for o in ORACLE if o != "has"]))
def test_string_operators_match_what_python_says(duck, needle, op):
    for written in (regular(needle), verbatim(needle)):
        if written is None:
            continue
        sql = kql_to_sql(_needle(written, op), TABLES).sql
        one_select(sql)
        got = {n for (n,) in on_duckdb(duck, sql)}
        assert got == matching(op, needle), (op, needle, sql)


def test_regex_matches_a_quoted_needle_literally(duck):
    for needle in NASTY:
        if "\\E" in needle:
            continue
        sql = kql_to_sql(_needle(regular("\\Q" + needle + "\\E"), "matches regex"), TABLES).sql
        got = {n for (n,) in on_duckdb(duck, sql)}
        assert got == matching("contains_cs", needle), (needle, sql)


# ---- through the embedded engine ------------------------------------------------------------
def _fill(db) -> None:
    db.create_table("t", [Column("s", STRING), Column("n", LONG)])
    db.ingest_ndjson("t", "\n".join(json.dumps({"s": s, "n": i})
                                    for i, s in enumerate(ROWS)).encode())


@pytest.fixture(scope="module")
def local_db(tmp_path_factory):
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("kql-quoting")),
                       query_engine="local")
    _fill(db)
    yield db
    db.close()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=TEXT)
def test_the_embedded_engine_answers_the_literal_or_hands_it_to_spark(local_db, value):
    # A statement with a backslash escape other than the ones Spark and the embedded engine
    # read alike (a doubled backslash, the quote as \u0027, \_ and \%) goes to Spark;
    # anything else comes back as written.
    kql = f"t | project x = {regular(value)} | take 1"
    sql = kql_to_sql(kql, TABLES).sql
    if "\\" in re.sub(r"\\\\|\\u0027|\\[_%]", "", sql):
        with pytest.raises(LocalEngineRefusedError):
            local_db.kql(kql)
        return
    assert local_db.kql(kql).table.column("x").to_pylist() == [value]


def test_has_on_the_embedded_engine_matches_python(local_db):
    # terms (shoal's has() and its token sets); other needles use a regex Spark answers
    for needle in ["foo", "bar", "FOO", "Ab", "under", "score", "50", "off", "pre"]:
        result = local_db.kql(_needle(regular(needle), "has"))
        assert set(result.table.column("n").to_pylist()) == matching("has", needle), needle


# ---- Spark: the nasty list ------------------------------------------------------------------
@pytest.fixture(scope="module")
def spark_db(tmp_path_factory, spark):
    db = shoal.connect(data_dir=str(tmp_path_factory.mktemp("kql-quoting-spark")),
                       spark_master=SPARK_MASTER)
    _fill(db)
    yield db
    db.close()


def test_nasty_strings_on_spark(spark_db):
    ops = list(ORACLE)
    for value in NASTY:
        columns = ", ".join(f"c{k} = s {op} {regular(value)}" for k, op in enumerate(ops))
        named = f", [{regular(value)}] = n" if value else ""      # the value as a name too
        kql = (f"t | extend x = {verbatim(value) or regular(value)}, {columns}{named} "
               "| sort by n asc")
        result = spark_db.kql(kql, engine="spark")
        one_select(result.translated_sql)
        if value:
            assert result.table.column_names[-1] == value
        rows = result.table.to_pylist()
        assert {r["x"] for r in rows} == {value}, value
        for k, op in enumerate(ops):
            got = {r["n"] for r in rows if r[f"c{k}"]}
            assert got == matching(op, value), (op, value, result.translated_sql)
        if "\\E" not in value:
            regex = spark_db.kql(_needle(regular("\\Q" + value + "\\E"), "matches regex"),
                                 engine="spark")
            assert set(regex.table.column("n").to_pylist()) == matching("contains_cs", value)


def test_the_injection_on_spark_answers_no_row(spark_db):
    result = spark_db.kql(ATTACK.replace("NULL, NULL, 42, version(), NULL", "'x', 42"),
                          engine="spark")
    assert result.table.num_rows == 0
