"""Spark SQL -> the embedded engine's dialect, only where the answer is certainly identical.

Users write Spark SQL whatever engine runs it. `to_local(tree, views)` takes the
planner's statement with every table reference already reading its scan view and returns
the statement in DuckDB's dialect plus the names Spark would give the answer's columns --
or raises `NotLocal` with the reason when any part of it might answer differently.

The check is an allow-list on the statement after sqlglot has resolved every column
(`qualify`) and typed every expression (`annotate_types`) against the views' Spark types:

- relational shapes: SELECT (DISTINCT), joins of every kind, WHERE, GROUP BY, HAVING,
  ORDER BY (Spark sorts NULLs first ascending, last descending: made explicit), LIMIT,
  WITH, UNION [ALL], IN / EXISTS / scalar subqueries, correlated or not;
- operators: comparisons, AND/OR/NOT, IS [NOT] NULL, IN lists, BETWEEN, `<=>`, `+ - *` on
  integers and doubles (an overflow raises in both engines: ANSI), LIKE without escapes,
  RLIKE with a pattern both regex dialects read alike (`has()`'s rewrite included);
- functions: `date_trunc` (year .. second), `get_json_object` on simple `$.key.key` paths,
  shoal's byte functions, and the aggregate, conditional, window (QUALIFY included), string,
  math, date and time functions of `FUNCTIONS` (with `/`, DIV, %, and a timestamp moved by a
  day-time interval literal): each entry vets its arguments, gives
  Spark's result type and, where DuckDB's own function answers differently, the DuckDB
  expression with Spark's answer. Where only some values would differ (a zero divisor, text
  beyond ASCII for case mapping, a double beyond bigint) the expression raises the
  not-identical mark on such a row, and the statement goes to Spark. `SPARK_ONLY` names the
  everyday functions left to Spark and why; `function_table_markdown()` renders both for
  docs/sql.md;
- types: both sides of a comparison of one family (numbers, strings, booleans, timestamps,
  binary, dates); a string literal compared with a timestamp is parsed here exactly as Spark
  reads it (UTC session) or not at all. Decimal literals and `+ - * /` on them carry Spark's
  decimal types; casts are vetted like functions (ANSI: a value Spark would refuse goes to
  Spark). No arrays in comparisons, or anything sqlglot cannot type.

Names: an alias, a plain column's name, a `*` expanded over its sources, and for any other
expression the name Spark prints for it (`shoal.query.embedded.naming`), or the statement
goes to Spark, which names it. Every output column carries the Spark type the statement has
(`spark_types`), which the engine casts its answer to (exactly, or it fails).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from shoal.format.shred import hidden_name
from shoal.query.embedded.functions import (FUNCTIONS, SPARK_ONLY, SPELLINGS,
                                           function_table_markdown)
from shoal.query.embedded.functions.collections import array_arrow_type
from shoal.query.embedded.functions.patterns import STATEMENT_TEXT
from shoal.query.embedded.functions.time import shifts_time
from shoal.query.embedded.naming import spark_name
from shoal.query.embedded.vetting import (ARROW_TYPES, NOT_IDENTICAL_MARK, NotLocal, T, cast_to,
                                          decimal_of, describe, family_of, is_date_literal,
                                          int_literal, is_ts_literal, not_identical,
                                          operand_kinds, rule_for, same_family, spark_type)
from shoal.query.planner import BYTE_FUNCTIONS, _timestamp_us_as_ns

# What callers import from here: the statement check and the tables docs/sql.md shows.
__all__ = ["FUNCTIONS", "NOT_IDENTICAL_MARK", "SPARK_ONLY", "LocalStatement", "NotLocal",
           "function_table_markdown", "spark_sql_type", "to_local"]

_TRUNC_UNITS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"}
# Structure and operators whose meaning is the same in both engines once their operands
# pass the type rules below.
_PLAIN = (exp.Select, exp.Union, exp.From, exp.Join, exp.Where, exp.Group, exp.Having,
          exp.Order, exp.Ordered, exp.Limit, exp.Distinct, exp.With, exp.CTE, exp.Subquery,
          exp.TableAlias, exp.Table, exp.Column, exp.Identifier, exp.Alias, exp.Star,
          exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.And, exp.Or, exp.Not, exp.Is,
          exp.Exists, exp.Tuple, exp.Neg, exp.Var, exp.JSONPath, exp.JSONPathRoot,
          exp.JSONPathKey, exp.Boolean)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul)
_PATH_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# The backslash escapes Spark and sqlglot read alike in a string literal: a doubled
# backslash (one backslash), the quote written `\u0027`, and `\_` / `\%` (both keep the
# backslash, for LIKE). Any other escape sends the statement to Spark.
_BACKSLASH_PAIRS = re.compile(r"\\\\|\\u0027|\\[_%]")


@dataclass(frozen=True)
class LocalStatement:
    sql: str                        # DuckDB SQL over the scan views
    names: list[str]                # Spark's names of the answer's columns, in order
    spark_types: list[pa.DataType]  # and their Arrow types as Spark's answer has them
    functions: frozenset[str] = frozenset()     # shoal's functions the SQL calls
    # view -> (paths of its dynamic columns it reads as columns, `attrs.$a.b`; its columns
    # it no longer reads at all): what the view's scan must add and may leave out
    scan_paths: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)


def spark_sql_type(kind: str) -> str:
    """The Spark SQL type of a view column of shoal type `kind` (its Arrow shape, see
    `shoal.query.scan_read`)."""
    return {"bool": "BOOLEAN", "int": "INT", "long": "BIGINT", "real": "DOUBLE",
            "string": "STRING", "timestamp": "TIMESTAMP", "dynamic": "STRING",
            "bytes": "BINARY", "vector": "ARRAY<FLOAT>",
            "headers": "ARRAY<STRUCT<key STRING, value BINARY>>"}[kind]


def to_local(tree: exp.Expr, views: Mapping[str, Mapping[str, str]],
             sql_text: str, dynamic: Mapping[str, Collection[str]] | None = None
             ) -> LocalStatement:
    """DuckDB SQL for the Spark statement `tree` over `views` (view -> column -> Spark SQL
    type), or `NotLocal`. `sql_text` is what the user wrote (for lexical checks).
    `dynamic`: view -> its dynamic columns, whose `get_json_object(col, '$.a.b')` become
    scan columns (`shoal.format.shred`; `LocalStatement.scan_paths`)."""
    token = STATEMENT_TEXT.set(sql_text)     # datetime patterns are read back from it
    try:
        return _to_local(tree, views, sql_text, dynamic or {})
    finally:
        STATEMENT_TEXT.reset(token)


def _to_local(tree: exp.Expr, views: Mapping[str, Mapping[str, str]],
              sql_text: str, dynamic: Mapping[str, Collection[str]]) -> LocalStatement:
    if "\\" in _BACKSLASH_PAIRS.sub("", sql_text):
        raise NotLocal("backslash escapes in the statement (Spark and DuckDB read them "
                       "differently)")
    original = tree.copy()
    tree = tree.copy()
    for call_ in list(tree.find_all(exp.Anonymous)):    # Spark's other names of vetted ones
        spelled = SPELLINGS.get(str(call_.this).lower())
        read = spelled(call_.expressions) if spelled is not None else None
        if read is not None:
            call_.replace(read)
    try:
        typed = qualify(tree, dialect="spark", schema=dict(views),
                        validate_qualify_columns=True, identify=False)
        typed = annotate_types(typed, schema=dict(views), dialect="spark")
    except (OptimizeError, SqlglotError) as e:
        raise NotLocal(f"the statement could not be resolved for the local engine ({e})"
                       ) from e
    except Exception as e:      # sqlglot's optimizer on an unusual tree: Spark decides
        raise NotLocal(f"the statement could not be typed ({type(e).__name__}: {e})"
                       ) from e
    for lit in typed.find_all(exp.Literal):       # the narrowest reason first
        _vet(lit)
    for node in typed.walk():
        _vet(node)
    names = _output_names(original, typed)
    types = [_arrow_type(s) for s in _leftmost(typed).selects]
    functions = frozenset(str(a.this).lower() for a in typed.find_all(exp.Anonymous))
    # The vetted functions first, innermost first (a rewrite copies its operands), with
    # their operands' Spark types taken before anything is rewritten.
    zero_plans = [p for select in typed.find_all(exp.Select) for p in _zero_plans(select)]
    pending = [(node, rule.rewrite, operand_kinds(node))
               for node in reversed(list(typed.walk()))
               if (rule := rule_for(node)) is not None and rule.rewrite is not None]
    for node, rewrite, kinds in pending:
        node.replace(rewrite(node, kinds))
    scan_paths = _path_columns(typed, views, dynamic)
    for node in list(typed.walk()):
        _rewrite(node)
    for plan in zero_plans:
        plan()
    try:
        sql = typed.sql(dialect="duckdb", identify=True)
    except SqlglotError as e:
        raise NotLocal(f"no DuckDB form for the statement ({e})") from None
    return LocalStatement(sql, names, types, functions, scan_paths)


# ---- paths of dynamic columns as scan columns -----------------------------------------------
def _scan_aliases(tree: exp.Expr, views: Mapping[str, object]) -> dict[str, str]:
    """Source alias -> scan view, for the aliases that name exactly one source in the whole
    statement and that source is a scan view (any other alias may be shadowed or name a
    subquery, a CTE or an unnested array)."""
    sources: dict[str, set[str]] = {}
    for t in tree.find_all(exp.Table):
        plain = t.name in views and not t.args.get("db") and not t.args.get("catalog")
        sources.setdefault(t.alias_or_name, set()).add(t.name if plain else "")
    for a in tree.find_all(exp.TableAlias):
        if not isinstance(a.parent, exp.Table):
            sources.setdefault(a.name, set()).add("")
    return {alias: next(iter(found)) for alias, found in sources.items()
            if len(found) == 1 and "" not in found}


def _path_columns(tree: exp.Expr, views: Mapping[str, object],
                  dynamic: Mapping[str, Collection[str]]
                  ) -> dict[str, tuple[list[str], list[str]]]:
    """Rewrite `get_json_object(col, '$.a.b')` on a dynamic column straight from a scan
    view into that view's column `col.$a.b` (the scan gives the engine's answer: the
    shredded sub-column, or computed once from the JSON). Returns what each view's scan
    must add and which of its columns nothing reads any more."""
    if not any(dynamic.values()):
        return {}
    aliases = _scan_aliases(tree, views)
    added: dict[str, list[str]] = {}
    for node in list(tree.find_all(exp.JSONExtractScalar)):
        col = node.this
        if not isinstance(col, exp.Column) or not col.table:
            continue
        view = aliases.get(col.table)
        if view is None or col.name not in dynamic.get(view, ()):
            continue
        keys = [str(k.this) for k in node.expression.expressions[1:]]   # vetted: $.k.k
        name = hidden_name(col.name, ".".join(keys))
        taken = {n.lower(): n for n in added.get(view, [])}
        if taken.get(name.lower(), name) != name:
            continue        # DuckDB's names ignore case: `$.a` and `$.A` cannot both be one
        node.replace(exp.Column(this=exp.to_identifier(name, quoted=True),
                                table=exp.to_identifier(col.table)))
        if name not in added.setdefault(view, []):
            added[view].append(name)
    if not added:
        return {}
    read = {(aliases.get(c.table), c.name) for c in tree.find_all(exp.Column)}
    out = {}
    for view, names in added.items():
        sources = dict.fromkeys(n.partition(".$")[0] for n in names)
        out[view] = (names, [c for c in sources if (view, c) not in read])
    return out


# ---- the allow-list -------------------------------------------------------------------------
def _vet(node: exp.Expr) -> None:
    if isinstance(node, exp.Literal):
        if not node.is_string and spark_type(node) is None:
            raise NotLocal(f"the number literal {node.name}")
        if spark_type(node) == T.DECIMAL and decimal_of(node) is None:
            raise NotLocal(f"the decimal literal {node.name}")
        return
    if isinstance(node, exp.Union):
        return
    if isinstance(node, (exp.Intersect, exp.Except)):
        raise NotLocal(f"{node.key.upper()} (set semantics differ between the engines)")
    if isinstance(node, exp.Distinct) and node.args.get("on") is not None:
        raise NotLocal("DISTINCT ON")
    if isinstance(node, exp.Ordered):
        if family_of(node.this) is None:
            raise NotLocal(f"ORDER BY {describe(node.this)} (not a plain scalar type)")
        if isinstance(node.parent, exp.Order) and isinstance(
                node.parent.parent, exp.SetOperation) and _is_double(node.this):
            raise NotLocal(f"ORDER BY {describe(node.this)} over a UNION (DuckDB hands a "
                           "sorted double back as its key, -0.0 as 0.0)")
        return
    if isinstance(node, _COMPARISONS):
        same_family(node, node.this, node.expression)
        if isinstance(node, (exp.EQ, exp.NullSafeEQ)) and _joins_doubles(node.this,
                                                                          node.expression):
            raise NotLocal(f"{describe(node)} matches doubles of two tables (the local "
                           "engine's hash join misses -0.0 against 0.0, and NaN)")
        return
    if isinstance(node, exp.Between):
        for bound in (node.args.get("low"), node.args.get("high")):
            same_family(node, node.this, bound)
        return
    if isinstance(node, exp.In):
        if node.args.get("query") is not None:
            query = node.args["query"]
            sel = _leftmost(query.this if isinstance(query, exp.Subquery) else query)
            if len(sel.selects) != 1:
                raise NotLocal(f"IN over {len(sel.selects)} columns")
            same_family(node, node.this, sel.selects[0])
            if _is_double(sel.selects[0]):
                raise NotLocal(f"IN over a subquery of doubles ({describe(node.this)}): the "
                               "local engine's hash join misses -0.0 against 0.0, and NaN")
        else:
            for value in node.expressions:
                same_family(node, node.this, value)
        return
    rule = rule_for(node)
    if rule is not None:
        rule.vet(node)
        return
    if isinstance(node, _ARITHMETIC):
        if shifts_time(node):       # a timestamp moved by an interval literal
            return
        for side in (node.this, node.expression):
            if family_of(side) != "number":
                raise NotLocal(f"arithmetic on {describe(side)} (only on numbers locally)")
        return
    if isinstance(node, exp.TimestampTrunc):
        unit = node.args.get("unit")
        name = unit.name.upper() if isinstance(unit, (exp.Var, exp.Literal)) else ""
        if name not in _TRUNC_UNITS:
            raise NotLocal(f"date_trunc unit {name or (unit and describe(unit))!r}")
        if family_of(node.this) != "timestamp":
            raise NotLocal(f"date_trunc of {describe(node.this)}")
        return
    if isinstance(node, exp.JSONExtractScalar):
        path = node.expression
        keys = path.expressions[1:] if isinstance(path, exp.JSONPath) else None
        if not keys or not all(isinstance(k, exp.JSONPathKey) and _PATH_KEY.match(
                str(k.this)) for k in keys) or not isinstance(
                path.expressions[0], exp.JSONPathRoot):
            raise NotLocal(f"the JSON path of {describe(node)} (only $.key.key locally)")
        if family_of(node.this) != "string":
            raise NotLocal(f"get_json_object on {describe(node.this)}")
        return
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name not in BYTE_FUNCTIONS:
            raise NotLocal(f"function {name}() is not on the local engine's vetted list")
        order = node.expressions[1] if len(node.expressions) > 1 else None
        if not (isinstance(order, exp.Literal) and order.is_string):
            raise NotLocal(f"{name}() with a byte order that is not a string literal")
        return
    if isinstance(node, exp.Cast) and (is_ts_literal(node) or is_date_literal(node)):
        return
    if isinstance(node, exp.Cast):
        raise NotLocal(f"CAST ({describe(node)}): ANSI casts and their text forms differ")
    if isinstance(node, (exp.DataType, exp.DataTypeParam)) and (
            node.find_ancestor(exp.Cast) is not None):
        return          # the type a vetted cast names
    if isinstance(node, _PLAIN):
        return
    if isinstance(node, exp.Func):
        raise NotLocal(f"function {node.sql_name().lower()}() is not on the local engine's "
                       "vetted list")
    raise NotLocal(f"{node.key.upper()} ({describe(node)}) is not on the local engine's "
                   "vetted list")


def _is_double(node: exp.Expr) -> bool:
    return spark_type(node.this if isinstance(node, exp.Alias) else node) in (T.DOUBLE,
                                                                              T.FLOAT)


def _joins_doubles(a: exp.Expr, b: exp.Expr) -> bool:
    """Whether an equality compares doubles taken from different tables (a join key)."""
    if not (_is_double(a) and _is_double(b)):
        return False
    tables_a = {c.table for c in a.find_all(exp.Column)}
    tables_b = {c.table for c in b.find_all(exp.Column)}
    return bool(tables_a) and bool(tables_b) and tables_a != tables_b


# ---- output names and types -----------------------------------------------------------------
def _leftmost(node: exp.Expr) -> exp.Select:
    while not isinstance(node, exp.Select):
        if isinstance(node, (exp.SetOperation, exp.Subquery)):
            node = node.this
        else:
            raise NotLocal(f"a {node.key.upper()} at the top of the statement")
    return node


def _output_names(original: exp.Expr, typed: exp.Expr) -> list[str]:
    """Spark's column names of the answer, from the statement as written (`original`) and
    its star expansions (`typed`)."""
    written = _leftmost(original).selects
    expanded = _leftmost(typed).selects
    if _leftmost(original).args.get("qualify") is not None and any(
            not isinstance(e, (exp.Alias, exp.Column, exp.Star)) for e in written):
        # Spark answers QUALIFY through a subquery, which names such a column `_c`, `_c_2`..
        raise NotLocal("an unaliased expression beside QUALIFY (Spark names it _c; give it "
                       "an alias)")
    stars = [e for e in written if _is_star(e)]
    if len(stars) > 1:
        raise NotLocal("more than one * in the select list")
    if stars and any(a.alias != a.alias.lower() for a in original.find_all(exp.Alias)):
        raise NotLocal("* over columns with mixed-case aliases")
    width = len(expanded) - (len(written) - len(stars))
    names: list[str] = []
    i = 0
    for e in written:
        if _is_star(e):
            names.extend(x.alias_or_name for x in expanded[i:i + width])
            i += width
            continue
        names.append(_spark_name(e))
        i += 1
    if i != len(expanded):
        raise NotLocal("the select list could not be matched to its expansion")
    return names


def _is_star(e: exp.Expr) -> bool:
    return isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this,
                                                                                  exp.Star))


def _spark_name(e: exp.Expr) -> str:
    if isinstance(e, exp.Alias):
        return e.alias
    if isinstance(e, exp.Column):
        if e.name != e.name.lower():
            raise NotLocal(f"the column {e.name} written in another case than its name")
        return e.name
    return spark_name(e)


def _arrow_type(select: exp.Expr) -> pa.DataType:
    node = select.this if isinstance(select, exp.Alias) else select
    t = spark_type(node)
    if t in ARROW_TYPES:
        return ARROW_TYPES[t]
    if t == T.DECIMAL and (ps := decimal_of(node)) is not None:
        return pa.decimal128(*ps)
    if (collected := array_arrow_type(node)) is not None:
        return collected
    dtype = node.type
    if dtype is not None and dtype.this == T.ARRAY:
        inner = dtype.expressions[0] if dtype.expressions else None
        if inner is not None and inner.this == T.FLOAT:
            return pa.list_(pa.field("element", pa.float32()))
        if inner is not None and inner.this == T.STRUCT:
            return pa.list_(pa.field("element", pa.struct(
                [pa.field("key", pa.string()), pa.field("value", pa.binary())])))
    raise NotLocal(f"the output column {describe(select)} has a type the local engine "
                   f"does not reproduce ({dtype.sql('spark') if dtype else 'unknown'})")


# ---- rewrites into DuckDB's reading ---------------------------------------------------------
def _rewrite(node: exp.Expr) -> None:
    if isinstance(node, exp.Literal) and not node.is_string and spark_type(node) == T.DECIMAL:
        p, s = decimal_of(node) or (38, 0)      # vetted: a decimal literal has its type
        node.replace(cast_to(exp.Literal.string(node.name), f"DECIMAL({p}, {s})"))
        return
    if isinstance(node, _COMPARISONS):
        _replace_ts_literal(node.this, node.expression)
        _replace_ts_literal(node.expression, node.this)
        return
    if isinstance(node, exp.Between):
        _replace_ts_literal(node.this, node.args.get("low"))
        _replace_ts_literal(node.this, node.args.get("high"))
        return
    if isinstance(node, exp.In):
        for value in node.expressions:
            _replace_ts_literal(node.this, value)
        return
    if isinstance(node, exp.Cast) and is_ts_literal(node):
        ns = _timestamp_us_as_ns(node.this.name)
        if ns is None:
            raise NotLocal(f"the timestamp literal {node.this.name!r}")
        node.replace(_ts_literal(ns))
        return
    if isinstance(node, exp.JSONExtractScalar):
        # Spark re-renders JSON numbers and nested values with Jackson (1.0E7), DuckDB with
        # yyjson (10000000.0): only strings, integers, booleans and nulls are answered here.
        kind = exp.Anonymous(this="json_type", expressions=[node.this.copy(),
                                                            node.expression.copy()])
        risky = exp.In(this=kind, expressions=[exp.Literal.string(k) for k in
                                               ("DOUBLE", "OBJECT", "ARRAY")])
        fail = not_identical("a JSON number or object")
        node.replace(exp.Case(ifs=[exp.If(this=risky, true=fail)], default=node.copy()))


# -0.0 and 0.0 are one key to both engines, but DuckDB hands back a sorted, grouped or
# partitioned double column from its key, where Spark returns the stored value for a sort
# or window key and 0.0 for a grouping key. Keys of type double are therefore written as
# `key + 0.0` (the same order and groups; -0.0 + 0.0 is 0.0), which makes DuckDB return the
# stored value beside a sort key and the normalized one for a grouping key or DISTINCT.
def _plus_zero(e: exp.Expr) -> exp.Expr:
    return exp.Paren(this=exp.Add(this=exp.Paren(this=e), expression=exp.Literal.number("0.0")))


def _resolved(select: exp.Select, key: exp.Expr) -> exp.Expr | None:
    """The select item an ORDER BY / GROUP BY ordinal or alias names, unaliased."""
    n = int_literal(key) if isinstance(key, exp.Literal) else None
    if n is not None:
        if not 1 <= n <= len(select.selects):
            return None
        item = select.selects[n - 1]
        return item.this if isinstance(item, exp.Alias) else item
    if isinstance(key, exp.Column) and not key.table:
        for item in select.selects:
            if isinstance(item, exp.Alias) and item.alias == key.name:
                return item.this
    return None


def _zero_plans(select: exp.Select) -> list:
    """The rewrites of `select`'s double keys, decided while the statement still has its
    Spark types and applied after the functions are rewritten (so on their DuckDB form)."""
    plans = []
    group = select.args.get("group")
    if isinstance(group, exp.Group):
        for i, key in enumerate(group.expressions):
            target = _resolved(select, key) if isinstance(key, exp.Literal) else key
            if target is not None and _is_double(target):
                plans.append(lambda i=i: _normalize_group_key(select, i))
    if select.args.get("distinct") is not None:
        for i, item in enumerate(select.selects):
            if _is_double(item):
                plans.append(lambda i=i: _normalize_item(select, i))
    order = select.args.get("order")
    for ordered in order.expressions if isinstance(order, exp.Order) else []:
        key = ordered.this
        target = _resolved(select, key)
        if not _is_double(target if target is not None else key):
            continue
        if select.args.get("distinct") is not None:
            continue                # DISTINCT's items are normalized: DuckDB sorts by them
        plans.append(lambda o=ordered: _sort_by_value(select, o))
    return plans


def _normalize_group_key(select: exp.Select, i: int) -> None:
    group = select.args["group"]
    key = group.expressions[i]
    if isinstance(key, exp.Literal):        # an ordinal: its select item is normalized
        n = int_literal(key) or 0
        _normalize_item(select, n - 1)
        return
    parts = [*select.selects, select.args.get("having"), select.args.get("order"),
             select.args.get("qualify")]
    for part in parts:
        if part is None:
            continue
        for node in list(part.walk()):
            if node == key and not _inside_aggregate(node, select):
                if node is part and isinstance(node, exp.Column):
                    node.replace(exp.Alias(this=_plus_zero(node.copy()),
                                           alias=exp.to_identifier(node.name)))
                else:
                    node.replace(_plus_zero(node.copy()))


def _inside_aggregate(node: exp.Expr, select: exp.Select) -> bool:
    parent = node.parent
    while parent is not None and parent is not select:
        if isinstance(parent, (exp.AggFunc, exp.Select)):
            return True
        parent = parent.parent
    return False


def _normalize_item(select: exp.Select, i: int) -> None:
    item = select.selects[i]
    if isinstance(item, exp.Alias):
        item.set("this", _plus_zero(item.this))
    elif isinstance(item, exp.Column):
        item.replace(exp.Alias(this=_plus_zero(item.copy()), alias=exp.to_identifier(item.name)))
    else:
        item.replace(_plus_zero(item.copy()))


def _sort_by_value(select: exp.Select, ordered: exp.Ordered) -> None:
    target = _resolved(select, ordered.this)
    key = target.copy() if target is not None else ordered.this
    ordered.set("this", _plus_zero(key))


def _replace_ts_literal(column: exp.Expr, value: exp.Expr | None) -> None:
    """A string literal compared with a timestamp, read as Spark reads it (UTC)."""
    if value is None or not (isinstance(value, exp.Literal) and value.is_string):
        return
    if family_of(column) != "timestamp":
        return
    ns = _timestamp_us_as_ns(value.name)
    if ns is None:
        raise NotLocal(f"the timestamp literal {value.name!r}")
    value.replace(_ts_literal(ns))


def _ts_literal(ns: int) -> exp.Expr:
    """A DuckDB TIMESTAMP (no zone: the local engine reads timestamps as UTC wall time)."""
    from datetime import datetime

    us = ns // 1_000
    dt = datetime.fromtimestamp(us // 1_000_000, tz=UTC)
    text = f"{dt.year:04d}-" + dt.strftime("%m-%d %H:%M:%S") + f".{us % 1_000_000:06d}"
    return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("TIMESTAMP"))
