"""Regular expressions, LIKE / ILIKE, split() and the smaller string functions answer on the
embedded engine exactly as on Spark.

Generated rows hold the characters the two regex dialects could read apart: \\n, \\r, U+0085,
U+2028 and U+2029 (Java's line terminators), the vertical tab (in Java's \\s, not RE2's),
characters beyond U+FFFF, delimiters and digits. Expressions whose answer is the same for
every text are compared over all of them; those guarded by the not-identical mark (`.`,
`$`, a pattern matching the empty string, case folding, byte-counting DuckDB functions)
over rows without the characters that trip the mark, and one case per mark shows the
statement going to Spark and answering as Spark does.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.query.embedded.functions.regex import java_regex
from shoal.query.embedded.transpile import NotLocal
from shoal.types import STRING, Column
from tests.query.conftest import ndjson, rows_at
from tests.query.test_functions_differential import (_same, _select, _table, both,  # noqa: F401
                                                     fdb)

pytestmark = pytest.mark.spark

WIDE = "ab,.;\n\r\x85\u2028\u2029 \t\x0b😀é1-$|_%"
NARROW = "abAB,.; \t1-_%"


def _rows(alphabet: str):
    edges = [t for t in ["", ",", "a,b,,", ",a", "ab12", "😀,😀", "a\r\n", "x\x0b"]
             if set(t) <= set(alphabet)]
    text = st.one_of(st.none(), st.sampled_from(edges), st.text(alphabet=alphabet,
                                                                  max_size=10))
    row = st.fixed_dictionaries({"s": text, "u": text, "a": st.none(), "x": st.none(),
                                 "y": st.none(), "i": st.one_of(st.none(), st.integers(
                                     -300, 300)), "l": st.none()})
    return st.lists(row, min_size=15, max_size=30)


# Answered alike for every text: no guard.
UNGUARDED = [
    "s RLIKE 'a'", "s RLIKE '^a'", "s RLIKE 'b|,'", "s RLIKE '[a-c]+1'", "s RLIKE '\\\\d'",
    "s RLIKE '\\\\w\\\\W'", "s RLIKE '\\\\s'", "s RLIKE 'a\\\\S'", "s RLIKE '[^a ]b'",
    "s RLIKE '(?:ab)+'", "s RLIKE 'a{2}'", "s RLIKE ',?b*?'", "s RLIKE '\\\\.'",
    "s RLIKE '[.]'", "s RLIKE '😀'", "s RLIKE '\\\\Aa'", "s RLIKE 'b\\\\z'",
    "s RLIKE '[\\\\s,]{2,}'", "s RLIKE '(?i)(^|[^A-Za-z0-9])ab($|[^A-Za-z0-9])'",
    "s RLIKE '(^|[^A-Za-z0-9])[Aa]b($|[^A-Za-z0-9])'",
    "regexp_extract(s, '([a-c]+)(\\\\d)?', 2)", "regexp_extract(s, '(a)|(b)', 2)",
    "regexp_extract(s, '\\\\w+', 0)", "regexp_extract(s, '(\\\\s+)')",
    "regexp_extract(s, '[^,]*', 0)",
    "regexp_replace(s, 'a+', 'X')", "regexp_replace(s, '(a)(b)', '$2$1')",
    "regexp_replace(s, '\\\\s', '\\\\\\\\')", "regexp_replace(s, '[😀,]', '[$0]')",
    "regexp_replace(s, '(1)|b', '<$1>')",
    "regexp_count(s, 'a')", "regexp_count(s, '[ab]+')", "regexp_substr(s, '[0-9]+')",
    "regexp_substr(s, 'a*')",
    "s LIKE 'a%'", "s LIKE '%\\\\_%'", "s NOT LIKE '%,'", "s LIKE '%!%%' ESCAPE '!'",
    "s LIKE '_b%'",
    "size(split(s, ','))", "size(split(s, ',', -1))", "size(split(s, '😀', 0))",
    "try_element_at(split(s, ','), 2)", "split(concat(s, ',x,y'), ',')[2]",
    "element_at(split(concat('p,q,', s), ','), -3)", "element_at(split(concat('p,', s), ','), 1)",
    "left(s, 2)", "left(s, 0)", "left(s, -1)", "right(s, 3)", "right(s, 0)", "right(s, -2)",
    "repeat(s, 3)", "repeat(s, -1)", "repeat(u, i % 4)",
    "translate(s, 'ab😀', 'x')", "translate(s, ',', u)", "translate(u, '', 'q')",
    "ascii(s)", "chr(i)", "chr(i * 7)", "locate('a', s)", "locate(',', s, 2)",
    "locate('', s, 3)", "locate('a', s, 0)", "locate('b', s, -1)", "locate(u, s, 1)",
    "position(',' IN s)",
]
# Guarded by the not-identical mark: answered over rows that do not trip it.
GUARDED = [
    "s RLIKE 'a.b'", "s RLIKE 'b$'", "regexp_extract(s, '(.)$', 1)",
    "regexp_substr(s, '.b')",
    "s ILIKE 'A%'", "s ILIKE '%b\\\\_%'", "reverse(s)", "levenshtein(s, u)",
]

COVERED = {
    "rlike": "s RLIKE 'a'", "regexp_extract": "regexp_extract(s, '(a)|(b)', 2)",
    "regexp_replace": "regexp_replace(s, '(a)(b)', '$2$1')", "regexp_count": "regexp_count(s, 'a')",
    "regexp_substr": "regexp_substr(s, '[0-9]+')", "like": "s LIKE 'a%'",
    "ilike": "s ILIKE 'A%'", "escape": "s LIKE '%!%%' ESCAPE '!'", "split": "size(split(s, ','))",
    "size": "size(split(s, ','))", "element_at": "split(concat(s, ',x,y'), ',')[2]",
    "left": "left(s, 2)", "right": "right(s, 3)", "repeat": "repeat(s, 3)",
    "translate": "translate(s, 'ab😀', 'x')", "ascii": "ascii(s)", "chr": "chr(i)",
    "levenshtein": "levenshtein(s, u)", "reverse": "reverse(s)",
    "instr": "locate(',', s, 2)",
}

_settings = settings(max_examples=3, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow, HealthCheck.data_too_large])


@_settings
@given(rows=_rows(WIDE))
def test_regex_split_and_string_functions_answer_as_spark_does(fdb, rows):  # noqa: F811
    name = _table(fdb, rows)
    both(fdb, _select(UNGUARDED, name))


@_settings
@given(rows=_rows(NARROW))
def test_guarded_functions_answer_as_spark_does_on_plain_text(fdb, rows):  # noqa: F811
    name = _table(fdb, rows)
    both(fdb, _select(GUARDED, name))


EDGES = [  # (expression over the one row of `redge`, why the embedded engine hands it on)
    ("s RLIKE 'a.b'", "rlike over a line terminator"),
    ("t RLIKE 'b$'", "rlike over a line terminator"),
    ("w ILIKE '%A%'", "ilike of non-ASCII text"),
    ("reverse(w)", "reverse() of non-ASCII text"),
    ("levenshtein(w, 'a')", "levenshtein() of non-ASCII text"),
    ("split(s, ',')[3]", "an array index past the end"),
    ("element_at(split(s, ','), -4)", "an array index past the end"),
]


@pytest.fixture(scope="module")
def redge(fdb):  # noqa: F811
    fdb.create_table("redge", [Column("s", STRING), Column("t", STRING), Column("w", STRING)])
    fdb.ingest_ndjson("redge", ndjson(rows_at(0, 1, s="a\rb", t="ab\n", w="a😀é")))
    return fdb


@pytest.mark.parametrize("expr,why", EDGES)
def test_texts_the_dialects_read_apart_go_to_spark(redge, expr, why):
    sql = f"SELECT {expr} AS v FROM redge"
    with pytest.raises(Exception, match=re.escape(why)):
        redge.sql(sql, engine="local")
    try:
        spark_answer = redge.sql(sql, engine="spark").table
    except Exception as e:          # ANSI: an index past the end raises in Spark
        with pytest.raises(type(e)):
            redge.sql(sql)
        return
    auto = redge.sql(sql)
    assert auto.stats.engine == "spark", auto.stats.engine_reason
    _same(spark_answer, auto.table, sql)


@pytest.mark.parametrize("sql,answer", [
    ("SELECT regexp_extract('abc', 'x(b)', 1) AS v", ""),
    ("SELECT regexp_extract('abc', '(x)?b', 1) AS v", ""),
    ("SELECT regexp_replace('abc', '(b)', '\\\\$1') AS v", "a$1c"),
    ("SELECT regexp_substr('abc', 'b*') AS v", None),
    ("SELECT size(split('a,b,,', ',')) AS v", 4),
    ("SELECT split('', ',')[0] AS v", ""),
    ("SELECT 'a\u000bb' RLIKE 'a\\\\sb' AS v", True),
    ("SELECT left('abc', -1) AS v", ""), ("SELECT right('abc', -1) AS v", ""),
    ("SELECT chr(321) AS v", "A"), ("SELECT chr(-1) AS v", ""),
    ("SELECT locate('', 'abc', 9) AS v", 1), ("SELECT locate('a', 'banana', 3) AS v", 4),
    ("SELECT 'a_c' LIKE 'a\\\\_c' AS v", True), ("SELECT 'Abc' ILIKE 'a%' AS v", True),
])
def test_known_spark_answers_locally(redge, sql, answer):
    """Answers read off the real Spark here, given by the embedded engine."""
    res = redge.sql(sql + " FROM redge", engine="local")
    assert res.stats.engine == "local"
    assert res.table.column("v").to_pylist()[0] == answer


@pytest.mark.parametrize("pattern", [
    "a(?=b)", "a(?<n>b)", "(?i)ab", "\\bword", "a++", "[a[b]]", "[a&&b]", "\\1", "a{,2}",
    "a{2000}", "\\p{L}", "\\Z", "[]a]", "x}", "\\Qa\\E", "[é-ü]",
])
def test_patterns_the_dialects_may_read_apart_are_refused(pattern):
    with pytest.raises(NotLocal, match="regular expression"):
        java_regex(pattern)


@pytest.mark.parametrize("sql", [
    "SELECT regexp_extract(s, '(a)', 2) AS v FROM redge",        # Spark raises
    "SELECT regexp_replace(s, 'a', '$2') AS v FROM redge",       # no group 2
    "SELECT regexp_replace(s, 'a', '${x}') AS v FROM redge",
    "SELECT split(s, '.') AS v FROM redge",                      # a regex delimiter
    "SELECT regexp_replace(s, 'x*', '-') AS v FROM redge",       # empty matches
    "SELECT regexp_count(s, 'b?') AS v FROM redge",
    "SELECT split(s, ',') AS v FROM redge",                      # an array answer
    "SELECT split(s, ',', 2) AS v FROM redge",
    "SELECT s LIKE 'a\\\\b' AS v FROM redge",                    # Spark refuses the escape
    "SELECT s RLIKE 'a\\tb' AS v FROM redge",                    # an escape in the SQL text
    "SELECT s ILIKE 'É%' AS v FROM redge",
])
def test_forms_left_to_spark_still_answer(redge, sql):
    res = None
    try:
        spark_answer = redge.sql(sql, engine="spark").table
    except Exception as e:
        with pytest.raises(type(e)):
            redge.sql(sql)
        return
    res = redge.sql(sql)
    assert res.stats.engine == "spark", res.stats.engine_reason
    _same(spark_answer, res.table, sql)


def test_every_expression_named_in_covered_is_compared():
    for fn, expr in COVERED.items():
        assert expr in UNGUARDED + GUARDED, fn
