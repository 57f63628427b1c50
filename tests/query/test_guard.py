"""The query allow-list on parsed statements (`shoal.query.guard`): what passes, what is
refused and where, and that the function list matches the Spark this project ships."""

from __future__ import annotations

import pytest

from shoal.errors import QueryError
from shoal.query.guard import (ALLOWED_FUNCTIONS, DENIED_FUNCTIONS, ForbiddenQueryError,
                               SqlSyntaxError, SqlTooDeepError, check_query, classify)
from shoal.query.planner import analyze, parse

ALLOWED = [
    "SELECT * FROM logs",
    "SELECT * FROM shoal.logs WHERE has(msg, 'deadlock') AND n IN (1, 2, 3)",
    "WITH a AS (SELECT n FROM logs) SELECT count(*) FROM a JOIN logs b ON a.n = b.n",
    "SELECT n FROM logs UNION ALL SELECT n FROM logs",
    "SELECT * FROM logs VERSION AS OF 3",
    "SELECT * FROM logs LATERAL VIEW explode(array(1, 2)) t AS x",
    "SELECT * FROM range(10)",
    "SELECT * FROM VALUES (1, 2) AS t(a, b)",
    "SELECT get_json_object(attrs, '$.http.method'), int_from_bytes(b), "
    "bigint_from_bytes(b, 'LITTLE_ENDIAN'), double_from_bytes(b) FROM logs",
    "SELECT date_trunc('hour', _timestamp) AS h, percentile_approx(n, 0.5), "
    "collect_list(msg), row_number() OVER (PARTITION BY msg ORDER BY n) FROM logs GROUP BY 1",
    "SELECT CASE WHEN n > 1 THEN 'a' ELSE 'b' END, CAST(n AS string), try_cast(msg AS int), "
    "aggregate(array(1, 2), 0, (acc, x) -> acc + x), regexp_extract(msg, 'a(b)', 1) FROM logs",
    "SELECT '${env:HOME}' AS not_substituted",
    "FROM logs SELECT n",
    "(SELECT 1)",
]

REFUSED = [
    ("SELECT TRANSFORM(1) USING 'id' AS (o string)", "TRANSFORM"),
    ("SELECT reflect('java.lang.System', 'getenv', 'X')", "reflect()"),
    ("SELECT java_method('a', 'b')", "java_method()"),
    ("SELECT try_reflect('a', 'b')", "try_reflect()"),
    ("SELECT xpath_string('<a/>', 'a')", "xpath_string()"),
    ("SELECT * FROM text.`/etc/passwd`", "text.`/etc/passwd`"),
    ("SELECT * FROM read_files('/etc/passwd')", "read_files()"),
    ("SELECT * FROM IDENTIFIER('logs')", "identifier()"),
    ("SELECT * FROM spark_catalog.default.t", "spark_catalog.default.t"),
    ("SELECT /*+ BROADCAST(l) */ * FROM logs l", "hints"),
    ("SELECT made_up_function(1)", "made_up_function()"),
    ("SET spark.sql.ansi.enabled = false", "SET"),
    ("ADD JAR /tmp/x.jar", "ADD"),
    ("CACHE TABLE logs", "CACHE"),
    ("CREATE TEMPORARY VIEW v AS SELECT 1", "CREATE"),
    ("INSERT INTO logs VALUES (1)", "INSERT"),
    ("EXPLAIN EXTENDED SELECT 1", "EXPLAIN EXTENDED"),
    ("EXECUTE IMMEDIATE 'SELECT 1'", "EXECUTE"),
    ("DESCRIBE FUNCTION reflect", "DESCRIBE"),
]


def guard(sql: str) -> str:
    statement = classify(sql)
    if statement.kind in ("select", "explain"):
        check_query(parse(statement.body))
    return statement.kind


@pytest.mark.parametrize("sql", ALLOWED)
def test_reading_queries_pass(sql):
    assert guard(sql) == "select"


@pytest.mark.parametrize("sql,named", REFUSED)
def test_everything_else_is_refused_naming_it(sql, named):
    with pytest.raises(ForbiddenQueryError) as e:
        guard(sql)
    assert named in str(e.value)


def test_refusals_carry_the_position():
    with pytest.raises(ForbiddenQueryError) as e:
        guard("SELECT n,\n       reflect('a', 'b')\nFROM logs")
    assert (e.value.line, e.value.column) == (2, 14)


def test_statement_kinds_ignore_leading_comments():
    assert guard("/* c */ -- d\n EXPLAIN SELECT * FROM logs") == "explain"
    assert classify("/* c */ EXPLAIN SELECT 1").body == "SELECT 1"
    assert classify("-- c\nCREATE TABLE t (a int)").kind == "admin_ddl"
    assert classify("/**/ALTER TABLE t ADD COLUMN b int").kind == "admin_ddl"
    assert classify("ALTER TABLE t SET TBLPROPERTIES ('sort_by' = 'a')").kind == "admin_ddl"
    assert classify("ALTER TABLE t UNSET TBLPROPERTIES ('sort_by')").kind == "admin_ddl"
    assert classify("/* c */ DESCRIBE t").kind == "ddl"
    assert classify("SHOW TABLES").kind == "ddl"
    with pytest.raises(SqlSyntaxError, match="SELEC"):
        classify("SELEC 1")
    with pytest.raises(QueryError, match="empty"):
        classify("  -- only a comment")


def test_the_planner_applies_the_guard():
    with pytest.raises(ForbiddenQueryError):
        analyze("SELECT reflect('a', 'b') FROM logs", {"logs": {}})


@pytest.mark.parametrize("sql", [
    "SELECT " + "(" * 3000 + "1" + ")" * 3000,
    "SELECT " + "+".join(["1"] * 5000),
    "SELECT " + "NOT " * 3000 + "true",
    "SELECT " + "coalesce(" * 400 + "1" + ")" * 400,
    "SELECT * FROM logs WHERE " + " AND ".join(f"n = {i}" for i in range(3000)),
])
def test_deep_statements_are_refused_not_crashing(sql):
    with pytest.raises(QueryError) as e:
        guard(sql)
    assert isinstance(e.value, (SqlTooDeepError, SqlSyntaxError))
    assert "nested more than" in str(e.value) or "syntax" in str(e.value).lower()


def test_deep_parentheses_name_where():
    with pytest.raises(SqlTooDeepError) as e:
        classify("SELECT\n" + "(" * 200 + "1" + ")" * 200)
    assert e.value.line == 2 and e.value.column == 129


def test_wide_but_shallow_statements_pass():
    assert guard("SELECT * FROM logs WHERE n IN (" + ", ".join(map(str, range(5000))) + ")") \
        == "select"


def test_function_lists_match_the_spark_we_ship(spark):
    """Every allowed name is a Spark built-in, and every built-in is either allowed or
    denied on purpose: a Spark upgrade that adds functions fails here until reviewed."""
    builtins = {r[0] for r in spark.sql("SHOW SYSTEM FUNCTIONS").collect()
                if r[0][:1].isalpha()}
    shoal_own = {"has", "int_from_bytes", "bigint_from_bytes", "double_from_bytes"}
    assert ALLOWED_FUNCTIONS - shoal_own <= builtins
    unreviewed = builtins - ALLOWED_FUNCTIONS - DENIED_FUNCTIONS
    assert not unreviewed, sorted(unreviewed)


def test_spark_itself_refuses_what_the_guard_refuses_first(spark, tmp_path):
    """Defence in depth: the hardened session refuses file relations and does not expand
    `${env:...}`, even for a statement that never passed the guard."""
    from pyspark.errors import AnalysisException

    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    for key, value in {"spark.sql.runSQLOnFiles": "false",
                       "spark.sql.variable.substitute": "false",
                       "spark.sql.scripting.enabled": "false"}.items():
        assert spark.conf.get(key) == value
    with pytest.raises(AnalysisException):
        spark.sql(f"SELECT * FROM text.`{secret}`").collect()
    assert spark.sql("SELECT '${env:HOME}' AS v").collect()[0].v == "${env:HOME}"


# Patterns that backtrack away in Java's regex (or that only a backtracking engine runs),
# with what the refusal says.
BACKTRACKING = [
    (r"s RLIKE '(.*a){7}$'", "nested repetition"),
    (r"s RLIKE '(a+)+b'", "nested repetition"),
    (r"regexp_extract(s, '(\\w+\\s?)*x', 1)", "nested repetition"),
    (r"s RLIKE '(a|aa)+b'", "repeated alternation"),
    (r"s RLIKE '.*a.*b'", "degree 3"),
    (r"regexp_replace(s, 'a.*b.*c', '')", "degree 3"),
    (r"split(s, '(?=,)')", "not a linear-time regular expression"),
    (r"s RLIKE '(a)\\1'", "not a linear-time regular expression"),
    (r"regexp(s, '(x+)+')", "nested repetition"),
    (r"s LIKE '%a%b%c%'", "3 runs of %"),
    (r"s LIKE ANY ('%a%', '%a%a%a%a%')", "4 runs of %"),
    (r"str_to_map(s, '(,+)+', ':')", "nested repetition"),
    ("s RLIKE s", "string literal"),
    ("s LIKE concat('%', s)", "string literal"),
]
LINEAR_ENOUGH = [
    r"s RLIKE 'u1[0-9] login'", r"s RLIKE 'error.*timeout'", r"s RLIKE '^a.*b.*c'",
    r"s RLIKE '^(db|auth) '", r"s RLIKE '(foo|bar)+x'", r"s RLIKE '\\d{1,3}\\.\\d{1,3}'",
    r"s RLIKE '\\p{L}+x'", r"s RLIKE '(?i)(^|[^A-Za-z0-9])tok($|[^A-Za-z0-9])'",
    r"s RLIKE '[ ][Oo][Kk]\\z'", r"split(s, ',')", r"s LIKE '%a%b%'", r"s LIKE 'abc%'",
    r"regexp_extract(s, '([a-z]+)=([0-9]+)', 2)",
    # quoted runs (what KQL's needles become): literal text, whatever they hold
    r"s RLIKE '\\Q\\\\E'", r"s RLIKE '(?i)\\Qa.*b(+\\E'", r"s RLIKE '\\Qno end'",
]


@pytest.mark.parametrize("expr, why", BACKTRACKING)
def test_backtracking_patterns_are_refused_with_where_and_why(expr, why):
    from shoal.query.guard import RegexTooComplexError

    with pytest.raises(RegexTooComplexError, match=why) as e:
        check_query(parse(f"SELECT n,\n  {expr} AS x FROM logs"))
    assert e.value.code == "regex_too_complex"
    assert e.value.line == 2


@pytest.mark.parametrize("expr", LINEAR_ENOUGH)
def test_linear_or_quadratic_patterns_pass(expr):
    check_query(parse(f"SELECT {expr} AS x FROM logs"))
