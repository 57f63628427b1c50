"""What a query may do: read shoal tables, nothing else (queries are read-only: docs/security.md).

Every statement a query frontend receives is checked here, on its parsed tree, before any
engine sees it. The check is an allow-list, never a pattern on the text:

- statement kinds: a SELECT (with WITH, set operations, subqueries) or `EXPLAIN <select>`;
  shoal's own DDL (`shoal.query.ddl`) is classified here too, so the caller can demand the
  `admin` scope for CREATE/ALTER whatever comments or white space come first;
- relations: plain names (at most qualified by `shoal.`), which the engine resolves to
  shoal tables or the statement's own CTEs and nothing else, and a few table-valued
  generator functions (`range`, `explode`, `stack`...). File sources
  (``text.`/etc/passwd` ``), `read_files`, `IDENTIFIER(...)` and every other table
  function are refused;
- functions: sqlglot's typed functions (each a known SQL function) except those that read
  files or parse XML, and untyped calls only when their name is a Spark built-in on
  `ALLOWED_FUNCTIONS` or one of shoal's own. `reflect`, `java_method`, `xpath*`,
  `from_protobuf` (reads a descriptor file), `input_file_name` (leaks storage paths) and
  the like are refused by name;
- constructs: `TRANSFORM ... USING` (runs a process), hints, parameters and session
  variables are refused wherever they appear.

Statements are also bounded: at most `MAX_SQL_DEPTH` nested parentheses or expression
levels, so a pathological statement is a positioned 400, never a recursion error. Every
regular expression (`RLIKE`, `regexp_*`, `split`, `str_to_map`) and LIKE pattern is a string
literal that `shoal.query.regex_rule` accepts (no backtracking blow-up in Spark's Java
regex), else a positioned 400 `regex_too_complex` naming the pattern.

`SPARK_HARDENING` holds the session settings that back this up inside Spark (no SQL on
files, no `${env:...}` substitution, no SQL scripting), applied when the session starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, Tokenizer, TokenType

from shoal.errors import QueryError

MAX_SQL_DEPTH = 128

# Session settings that refuse, inside Spark itself, what the allow-list refuses first.
SPARK_HARDENING: dict[str, str] = {
    "spark.sql.runSQLOnFiles": "false",          # no fmt.`path` relations
    "spark.sql.variable.substitute": "false",    # no ${env:SECRET} / ${system:...} in text
    "spark.sql.scripting.enabled": "false",      # no BEGIN ... END programs
    "spark.sql.legacy.setCommandRejectsSparkCoreConfs": "true",
}

# Shoal's own functions (rewritten by the planner) and SQL forms that are not in Spark's
# function registry under their own name.
SHOAL_FUNCTIONS = frozenset({"has", "int_from_bytes", "bigint_from_bytes",
                             "double_from_bytes"})

# Spark built-ins that reach the host or run code: refused whatever parses them.
DENIED_FUNCTIONS = frozenset({
    "reflect", "java_method", "try_reflect",
    "xpath", "xpath_boolean", "xpath_double", "xpath_float", "xpath_int", "xpath_long",
    "xpath_number", "xpath_short", "xpath_string", "from_xml", "schema_of_xml", "to_xml",
    "from_protobuf", "to_protobuf", "from_avro", "to_avro", "schema_of_avro",
    "input_file_name", "input_file_block_start", "input_file_block_length",
    "python_worker_logs", "read_files", "identifier",
    "current_user", "user", "session_user",
})

# sqlglot's typed functions that read or write files or parse XML.
_DENIED_CLASSES: tuple[type[exp.Expr], ...] = tuple(
    c for c in (getattr(exp, n, None) for n in (
        "ToFile", "ReadCSV", "ReadParquet", "XMLElement", "XMLGet", "XMLTable", "CheckXml"))
    if c is not None)

# Table-valued functions allowed in FROM: generators over their arguments only.
ALLOWED_TABLE_FUNCTIONS = frozenset({
    "range", "explode", "explode_outer", "posexplode", "posexplode_outer", "inline",
    "inline_outer", "stack", "json_tuple", "variant_explode", "variant_explode_outer"})

# Spark 4.3's built-in functions (SHOW SYSTEM FUNCTIONS, operators left out), less the
# denied ones. An untyped call must name one of these.
_SPARK_BUILTINS = """
abs acos acosh add_months aes_decrypt aes_encrypt aggregate and any any_value
approx_count_distinct approx_percentile approx_top_k approx_top_k_accumulate
approx_top_k_combine approx_top_k_estimate array array_agg array_append array_compact
array_contains array_distinct array_except array_insert array_intersect array_join array_max
array_min array_position array_prepend array_remove array_repeat array_size array_sort
array_union arrays_overlap arrays_zip ascii asin asinh assert_true atan atan2 atanh avg base64
between bigint bin binary bit_and bit_count bit_get bit_length bit_or bit_xor bitmap_and_agg
bitmap_bit_position bitmap_bucket_number bitmap_construct_agg bitmap_count bitmap_or_agg
bool_and bool_or boolean bround btrim cardinality case cast cbrt ceil ceiling char char_length
character_length chr coalesce collate collation collations collect_list collect_set
collect_union concat concat_ws contains conv convert_timezone corr cos cosh cot count count_if
count_min_sketch counter_diff covar_pop covar_samp crc32 csc cume_dist curdate
current_catalog current_database current_date current_path current_schema current_time
current_timestamp current_timezone date date_add date_diff date_format date_from_unix_date
date_part date_sub date_trunc dateadd datediff datepart day dayname dayofmonth dayofweek
dayofyear decimal decode degrees dense_rank div double e element_at elt encode endswith
equal_null every exists exp explode explode_outer expm1 extract factorial filter find_in_set
first first_value flatten float floor forall format_number format_string from_base32 from_csv
from_json from_unixtime from_utc_timestamp get get_json_object getbit greatest grouping
grouping_id hash hex histogram_numeric hll_sketch_agg hll_sketch_estimate hll_union
hll_union_agg hmac hour hypot if ifnull ilike in initcap inline inline_outer instr int
is_valid_utf8 is_valid_variant is_variant_null isnan isnotnull isnull jaro_winkler_similarity
json_array_length json_object_keys json_tuple kll_merge_agg_bigint kll_merge_agg_double
kll_merge_agg_float kll_sketch_agg_bigint kll_sketch_agg_double kll_sketch_agg_float
kll_sketch_get_n_bigint kll_sketch_get_n_double kll_sketch_get_n_float
kll_sketch_get_quantile_bigint kll_sketch_get_quantile_double kll_sketch_get_quantile_float
kll_sketch_get_rank_bigint kll_sketch_get_rank_double kll_sketch_get_rank_float
kll_sketch_merge_bigint kll_sketch_merge_double kll_sketch_merge_float
kll_sketch_to_string_bigint kll_sketch_to_string_double kll_sketch_to_string_float kurtosis
lag last last_day last_value lcase lead least left len length levenshtein like listagg ln
localtime localtimestamp locate log log10 log1p log2 lower lpad ltrim luhn_check make_date
make_dt_interval make_interval make_time make_timestamp make_timestamp_ltz make_timestamp_ntz
make_valid_utf8 make_ym_interval map map_concat map_contains_key map_entries map_filter
map_from_arrays map_from_entries map_keys map_values map_zip_with mask max max_by md5 mean
measure median min min_by minute mod mode monotonically_increasing_id month monthname
months_between named_struct nanvl negative next_day not now nth_value ntile nullif nullifzero
nvl nvl2 octet_length or overlay parse_json parse_url percent_rank percentile
percentile_approx percentile_cont percentile_disc pi pmod posexplode posexplode_outer position
positive pow power printf quarter quote radians raise_error rand randn random randstr range
rank reduce regexp regexp_count regexp_extract regexp_extract_all regexp_instr regexp_like
regexp_replace regexp_substr regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope
regr_sxx regr_sxy regr_syy repeat replace reverse right rint rlike round row_number rpad rtrim
schema_of_csv schema_of_json schema_of_variant schema_of_variant_agg sec second sentences
sequence session_window sha sha1 sha2 shiftleft shiftright shiftrightunsigned shuffle sign
signum sin sinh size skewness slice smallint some sort_array soundex space spark_partition_id
split split_part sql_keywords sqrt st_asbinary st_geogfromwkb st_geomfromwkb st_setsrid st_srid
stack startswith std stddev stddev_pop stddev_samp str_to_map string string_agg struct substr
substring substring_index sum tan tanh theta_difference theta_intersection
theta_intersection_agg theta_sketch_agg theta_sketch_estimate theta_union theta_union_agg time
time_bucket time_diff time_from_micros time_from_millis time_from_seconds time_to_micros
time_to_millis time_to_seconds time_trunc timestamp timestamp_micros timestamp_millis
timestamp_nanos timestamp_seconds tinyint to_base32 to_binary to_char to_csv to_date to_json
to_number to_time to_timestamp to_timestamp_ltz to_timestamp_ntz to_unix_timestamp
to_utc_timestamp to_varchar to_variant_object transform transform_keys transform_values
translate trim trunc tuple_difference_double tuple_difference_integer
tuple_difference_theta_double tuple_difference_theta_integer tuple_intersection_agg_double
tuple_intersection_agg_integer tuple_intersection_double tuple_intersection_integer
tuple_intersection_theta_double tuple_intersection_theta_integer tuple_sketch_agg_double
tuple_sketch_agg_integer tuple_sketch_estimate_double tuple_sketch_estimate_integer
tuple_sketch_summary_double tuple_sketch_summary_integer tuple_sketch_theta_double
tuple_sketch_theta_integer tuple_union_agg_double tuple_union_agg_integer tuple_union_double
tuple_union_integer tuple_union_theta_double tuple_union_theta_integer try_add try_aes_decrypt
try_avg try_divide try_element_at
try_make_interval try_make_timestamp try_make_timestamp_ltz try_make_timestamp_ntz try_mod
try_multiply try_parse_json try_parse_url try_subtract try_sum try_to_binary try_to_date
try_to_number try_to_time try_to_timestamp try_url_decode try_validate_utf8
try_variant_array_append try_variant_get try_variant_insert try_variant_set typeof ucase
unbase64 unhex uniform unix_date unix_micros unix_millis unix_nanos unix_seconds
unix_timestamp upper url_decode url_encode uuid validate_utf8 var_pop var_samp variance
variant_array_append variant_delete variant_explode variant_explode_outer variant_get
variant_insert variant_set variant_strip_nulls vector_avg vector_cosine_similarity
vector_inner_product vector_l2_distance vector_norm vector_normalize vector_sum version weekday
weekofyear when width_bucket window window_time xxhash64 year zeroifnull zip_with
"""
ALLOWED_FUNCTIONS = (frozenset(_SPARK_BUILTINS.split()) | SHOAL_FUNCTIONS) - DENIED_FUNCTIONS

# Nodes that must not appear anywhere in a query, with what the refusal calls them.
_FORBIDDEN_NODES: dict[type[exp.Expr], str] = {
    exp.QueryTransform: "TRANSFORM ... USING (runs a process)",
    exp.Hint: "query hints",
    exp.JoinHint: "query hints",
    exp.Placeholder: "parameters",
    exp.Parameter: "parameters",
    exp.SessionParameter: "session variables",
    exp.Into: "SELECT ... INTO",
}

# Leading words of Spark statements other than queries: refused by name.
_STATEMENT_WORDS = frozenset([
    "SET", "RESET", "ADD", "LIST", "CACHE", "UNCACHE", "CLEAR", "REFRESH", "USE", "INSERT",
    "MERGE", "UPDATE", "DELETE", "DROP", "TRUNCATE", "LOAD", "MSCK", "ANALYZE", "CREATE",
    "ALTER", "REPLACE", "DESCRIBE", "DESC", "SHOW", "EXECUTE", "DECLARE", "CALL", "BEGIN",
    "COMMENT", "GRANT", "REVOKE", "REPAIR", "EXPORT", "IMPORT",
])

_DDL_WORDS = frozenset({"CREATE", "ALTER", "DESCRIBE", "DESC", "SHOW", "DROP", "UNDROP",
                        "DELETE", "TRUNCATE"})

# The bulk of any tree: nodes that cannot name a relation, a function or a statement.
_HARMLESS = (exp.Literal, exp.Identifier, exp.Column, exp.Star, exp.Binary, exp.Paren,
             exp.Alias, exp.Neg, exp.Not, exp.Boolean, exp.Null, exp.DataType, exp.Tuple)

StatementKind = Literal["select", "explain", "ddl", "admin_ddl"]


class ForbiddenQueryError(QueryError):
    """A statement that would do more than read shoal tables (400 `forbidden_query`)."""

    code = "forbidden_query"

    def __init__(self, what: str, *, line: int | None = None, column: int | None = None
                 ) -> None:
        self.what = what
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(f"not allowed in a query: {what}{where}; queries read shoal tables "
                         "only")


class SqlSyntaxError(QueryError):
    """A statement that does not parse; `line`/`column` (1-based) point at the offending
    token when the parser knows it (400 `sql_syntax`)."""

    code = "sql_syntax"

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None
                 ) -> None:
        self.line = line
        self.column = column
        super().__init__(message)


class SqlTooDeepError(QueryError):
    """A statement nested deeper than `MAX_SQL_DEPTH` (400 `sql_too_deep`)."""

    code = "sql_too_deep"

    def __init__(self, limit: int, *, line: int | None = None, column: int | None = None
                 ) -> None:
        self.line = line
        self.column = column
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"statement nested more than {limit} levels deep{where}")


class RegexTooComplexError(QueryError):
    """A regular expression or LIKE pattern whose matching could run away in a backtracking
    engine, or that is not a string literal (400 `regex_too_complex`)."""

    code = "regex_too_complex"

    def __init__(self, pattern: str | None, why: str, *, line: int | None = None,
                 column: int | None = None) -> None:
        self.pattern = pattern
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None else ""
        shown = "" if pattern is None else f" {pattern[:200]!r}"
        super().__init__(f"pattern{shown} refused{where}: {why}")


@dataclass(frozen=True)
class Statement:
    """A statement classified by its first token (comments and white space skipped)."""

    kind: StatementKind
    body: str           # for `explain`, the statement after EXPLAIN; else the whole text


class _Tokens(Tokenizer):
    QUOTES: ClassVar[list[str | tuple[str, str]]] = ["'", '"']
    IDENTIFIERS: ClassVar[list[str | tuple[str, str]]] = ["`"]
    COMMANDS: ClassVar[set[TokenType]] = set()


def _tokens(sql: str) -> list[Token]:
    try:
        return _Tokens().tokenize(sql)
    except TokenError as e:
        raise QueryError(f"SQL syntax error: {e}") from None


def position(sql: str, offset: int) -> tuple[int, int]:
    """(line, column), both 1-based, of character `offset` of `sql`."""
    return sql.count("\n", 0, offset) + 1, offset - sql.rfind("\n", 0, offset)


def classify(sql: str) -> Statement:
    """The kind of `sql`; refuses (400) what is neither a query nor shoal's DDL.

    DDL is recognised by `shoal.query.ddl.parse_ddl` (token based, so a leading comment
    cannot hide a CREATE); `admin_ddl` is what changes the catalog or a table's rows
    (CREATE, ALTER, DROP, UNDROP, DELETE, TRUNCATE), `ddl` DESCRIBE/SHOW.
    """
    from shoal.query.ddl import CHANGING_STATEMENTS, parse_ddl

    tokens = _tokens(sql)
    if not tokens:
        raise QueryError("empty statement")
    check_nesting(sql, tokens)
    first = tokens[0]
    word = first.text.upper()
    ddl = parse_ddl(sql) if word in _DDL_WORDS else None
    if ddl is not None:
        admin = isinstance(ddl, CHANGING_STATEMENTS)
        return Statement("admin_ddl" if admin else "ddl", sql)
    if word == "EXPLAIN":
        if len(tokens) < 2:
            raise QueryError("EXPLAIN needs a SELECT statement after it")
        nxt = tokens[1]
        if nxt.text.upper() in ("EXTENDED", "CODEGEN", "COST", "FORMATTED", "LOGICAL"):
            line, col = position(sql, nxt.start)
            raise ForbiddenQueryError(f"EXPLAIN {nxt.text.upper()}", line=line, column=col)
        return Statement("explain", sql[nxt.start:])
    if word in ("SELECT", "WITH", "FROM", "("):
        return Statement("select", sql)
    line, col = position(sql, first.start)
    if word in _STATEMENT_WORDS:
        raise ForbiddenQueryError(f"{word} statements", line=line, column=col)
    raise SqlSyntaxError(f"SQL syntax error at line {line}, col {col}: expected SELECT, WITH, "
                         f"EXPLAIN or shoal's DDL, found {first.text!r}", line=line, column=col)


def check_nesting(sql: str, tokens: Iterable[Token]) -> None:
    """Refuse more than `MAX_SQL_DEPTH` nested parentheses, naming where (before parsing:
    the parser recurses once per level)."""
    depth = 0
    for tok in tokens:
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
            if depth > MAX_SQL_DEPTH:
                line, col = position(sql, tok.start)
                raise SqlTooDeepError(MAX_SQL_DEPTH, line=line, column=col)
        elif tok.token_type == TokenType.R_PAREN:
            depth = max(0, depth - 1)


def check_query(tree: exp.Expr) -> None:
    """Refuse anything in the parsed SELECT `tree` beyond reading shoal tables."""
    if not isinstance(tree, (exp.Query, exp.Subquery)):
        raise ForbiddenQueryError(f"{tree.key.upper()} statements")
    _check_depth(tree)
    for node in tree.walk():
        what = _forbidden(node)
        if what is not None:
            line, col = _node_position(node)
            raise ForbiddenQueryError(what, line=line, column=col)
        if isinstance(node, _PATTERN_NODES):
            _check_patterns(node)


# Nodes whose arguments are Java regular expressions (or LIKE patterns), by argument name.
_REGEX_ARGS: dict[type[exp.Expr], tuple[str, ...]] = {
    **{c: ("expression",) for c in (
        getattr(exp, n, None) for n in (
            "RegexpLike", "RegexpILike", "RegexpExtract", "RegexpExtractAll",
            "RegexpReplace", "RegexpCount", "RegexpInstr", "RegexpSubstr", "RegexpSplit",
            "RegexpFullMatch")) if c is not None},
    exp.StrToMap: ("pair_delim", "key_value_delim"),
}
_LIKE_NODES: tuple[type[exp.Expr], ...] = (exp.Like, exp.ILike)
_PATTERN_NODES = (*_REGEX_ARGS, *_LIKE_NODES, exp.Anonymous)


def _check_patterns(node: exp.Expr) -> None:
    """Refuse a regular expression or LIKE pattern of `node` that `regex_rule` refuses."""
    from shoal.query.regex_rule import check_like, check_pattern

    if isinstance(node, exp.Anonymous):
        if str(node.this).lower() != "regexp" or len(node.expressions) < 2:
            return
        patterns, like = [node.expressions[1]], False
    elif isinstance(node, _LIKE_NODES):
        pattern = node.args.get("expression")
        if isinstance(pattern, (exp.Any, exp.All)):
            pattern = pattern.this
        patterns = list(pattern.expressions) if isinstance(pattern, exp.Tuple) else [pattern]
        like = True
    else:
        patterns = [node.args.get(name) for name in _REGEX_ARGS[type(node)]]
        like = False
    for pattern in patterns:
        if pattern is None:
            continue
        if isinstance(pattern, exp.Paren):
            pattern = pattern.unnest()
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            line, col = _node_position(node)
            raise RegexTooComplexError(None, "a pattern must be a string literal",
                                       line=line, column=col)
        text = pattern.this      # the literal's value (sqlglot reads its escapes)
        why = check_like(text) if like else check_pattern(text)
        if why is not None:
            line, col = _node_position(node)
            raise RegexTooComplexError(text, why, line=line, column=col)


def _forbidden(node: exp.Expr) -> str | None:
    if isinstance(node, _HARMLESS) and not isinstance(node, exp.Func):
        return None
    for cls, what in _FORBIDDEN_NODES.items():
        if isinstance(node, cls):
            return what
    if isinstance(node, (exp.Command, exp.Set, exp.Create, exp.Insert, exp.Cache,
                         exp.Use, exp.Describe, exp.Drop, exp.Alter, exp.Merge, exp.Delete,
                         exp.Update, exp.Uncache, exp.LoadData)):
        return f"{node.key.upper()} statements"
    if isinstance(node, exp.Table):
        return _forbidden_relation(node)
    if isinstance(node, exp.Func):
        return _forbidden_function(node)
    return None


def _forbidden_relation(node: exp.Table) -> str | None:
    this = node.this
    if isinstance(this, exp.Func):
        name = _function_name(this)
        if name in ALLOWED_TABLE_FUNCTIONS:
            return None
        return f"table function {name}()"
    if node.args.get("catalog") is not None:
        return f"relation {node.sql(dialect='spark')}"
    db = node.text("db")
    if db and db.lower() != "shoal":
        return f"relation {node.sql(dialect='spark')} (file sources and other catalogs)"
    if not isinstance(this, exp.Identifier):
        return f"relation {node.sql(dialect='spark')}"
    # A plain name: a shoal table, a CTE, or an unknown name that the engine answers with
    # "table not found" (404). Nothing else (no Spark view or catalog) is ever consulted.
    return None


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql_name().lower()


def _forbidden_function(node: exp.Func) -> str | None:
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name in DENIED_FUNCTIONS or name not in ALLOWED_FUNCTIONS:
            return f"function {name}()"
        return None
    if _DENIED_CLASSES and isinstance(node, _DENIED_CLASSES):
        return f"function {node.sql_name().lower()}()"
    name = node.sql_name().lower()
    if name in DENIED_FUNCTIONS:
        return f"function {name}()"
    return None


def _node_position(node: exp.Expr) -> tuple[int | None, int | None]:
    for n in node.walk():
        meta = n.meta if hasattr(n, "meta") else {}
        if "line" in meta and "col" in meta:
            return int(meta["line"]), int(meta["col"])
        this = n.args.get("this") if isinstance(n, exp.Expr) else None
        if isinstance(this, exp.Identifier) and "line" in this.meta:
            return int(this.meta["line"]), int(this.meta["col"])
    return None, None


def _check_depth(tree: exp.Expr) -> None:
    """Expression depth without recursion (a long `a + a + ...` chain nests too)."""
    stack: list[tuple[exp.Expr, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SQL_DEPTH * 4:
            line, col = _node_position(node)
            raise SqlTooDeepError(MAX_SQL_DEPTH * 4, line=line, column=col)
        for child in node.iter_expressions():
            stack.append((child, depth + 1))
