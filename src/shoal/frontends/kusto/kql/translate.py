"""KQL tabular pipelines -> one Spark SQL statement over shoal's tables.

The translation tracks the output columns (name and type) through the pipe, so every
projection is written out (`project-away`, `extend` replacing a column in place, `union`
aligning legs by name, join's `name1` for a right column whose name the left has). Each
operator fills a slot of the current SELECT (WHERE, select list, GROUP BY, ORDER BY, LIMIT,
DISTINCT) while SQL's evaluation order agrees with the pipe's; otherwise the SELECT so far
becomes a subquery and the operator starts a new one. A `where` on columns an `extend` or
`project` left unchanged joins the inner WHERE, so predicates reach the planner next to
their table and are pushed down (pruning) whatever projections come first.

Semantics kept from KQL: columns come out in KQL's order (summarize: `by` columns, then
aggregations); `sort` defaults to descending, nulls last descending and first ascending;
`take` is any n rows; `arg_max`/`arg_min` pick, of a tie, the row whose returned columns
sort first (so that both engines pick the same one); `top-nested` and `make-series` are
described at their methods; ordering survives later projections and filters (the ORDER BY is
carried outward); unnamed columns are named as Kusto names them (`count_`, `sum_x`,
`percentile_x_95`, `attrs_http_method`, `Column1`...); `count` gives `Count`.
`join` without `kind=` is Kusto's `innerunique` (the left side deduplicated by its keys,
keeping an arbitrary row per key); `union` is `kind=outer` (a column missing from a leg is
null there; a column whose type differs between legs is read as a string).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from shoal.errors import TableNotFoundError
from shoal.frontends.kusto.kql import ast
from shoal.frontends.kusto.kql.functions import AGGREGATE_PREFIX, AGGREGATES, percentile_sql
from shoal.frontends.kusto.kql.lexer import Token
from shoal.frontends.kusto.kql.parser import MAX_KQL_NESTING
from shoal.frontends.kusto.kql.scalar import Scalars, path_name
from shoal.frontends.kusto.kql.sqltext import (NUMERIC, SPARK_TYPES, Sql, SqlBudget, literal,
                                               over_bound, quote_ident, quote_string,
                                               regex_literal, semantic)
from shoal.frontends.kusto.kql.values import spark_timestamp

# The most bins one `make-series` writes: each bin is a term of the statement's arrays.
MAX_SERIES_BINS = 4096
# The most rows one `range` makes (its rows come from cross joins of ten-row tables).
MAX_RANGE_ROWS = 1_000_000
# shoal kind -> (.NET type, Kusto type) as `getschema` reports a column
_SCHEMA_TYPES = {"bool": ("System.Boolean", "bool"), "int": ("System.Int32", "int"),
                 "long": ("System.Int64", "long"), "real": ("System.Double", "real"),
                 "string": ("System.String", "string"), "bytes": ("System.String", "string"),
                 "timestamp": ("System.DateTime", "datetime"),
                 "timespan": ("System.TimeSpan", "timespan")}
# A `parse` column's capture by type (read alike by Java's regex and RE2), and its value
_CAPTURES = {"long": "(-?[0-9]+)", "int": "(-?[0-9]+)",
             "real": "(-?[0-9]+(?:[.][0-9]+)?(?:[eE][-+]?[0-9]+)?)",
             "bool": "([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])"}
_TEN = " UNION ALL ".join(f"SELECT {d} AS d" for d in range(10))
JOIN_SQL = {"inner": "INNER JOIN", "innerunique": "INNER JOIN", "leftouter": "LEFT OUTER JOIN",
            "rightouter": "RIGHT OUTER JOIN", "fullouter": "FULL OUTER JOIN",
            "leftsemi": "LEFT SEMI JOIN", "leftanti": "LEFT ANTI JOIN",
            "anti": "LEFT ANTI JOIN", "leftantisemi": "LEFT ANTI JOIN",
            "rightsemi": "LEFT SEMI JOIN", "rightanti": "LEFT ANTI JOIN",
            "rightantisemi": "LEFT ANTI JOIN"}


@dataclass(frozen=True)
class Column:
    name: str
    kind: str | None


@dataclass
class Stage:
    """One SELECT being filled: its FROM, input columns and the slots set so far."""

    frm: str
    inputs: list[Column]
    where: list[str] = field(default_factory=list)
    items: list[tuple[str, str]] | None = None       # (sql, output name); None: the inputs
    outputs: list[Column] = field(default_factory=list)
    passthrough: set[str] = field(default_factory=set)  # outputs equal to their input
    group: list[str] | None = None
    order: list[str] | None = None
    order_names: bool = False       # every ORDER BY key is an output column's name
    carried: list[str] | None = None    # an ORDER BY of the subquery this reads, kept
    limit: int | None = None
    distinct: bool = False

    @staticmethod
    def reading(frm: str, columns: list[Column]) -> Stage:
        return Stage(frm, list(columns), outputs=list(columns),
                     passthrough={c.name for c in columns})

    @property
    def shaped(self) -> bool:
        """Something beyond WHERE is set: a new projection would change its meaning."""
        return (self.items is not None or self.group is not None or self.order is not None
                or self.limit is not None or self.distinct)

    def scope(self) -> dict[str, str | None]:
        return {c.name: c.kind for c in self.outputs}

    def sql(self) -> str:
        items = self.items if self.items is not None else [
            (quote_ident(c.name), c.name) for c in self.inputs]
        # a name with capitals is aliased even when it is the column itself: the embedded
        # engine names a bare column only when it is written in lower case
        select = ", ".join(text if text == quote_ident(name) and name == name.lower() else
                           f"{text} AS {quote_ident(name)}" for text, name in items)
        out = f"SELECT {'DISTINCT ' if self.distinct else ''}{select} FROM {self.frm}"
        if self.where:
            out += " WHERE " + " AND ".join(self.where)
        if self.group:
            out += " GROUP BY " + ", ".join(self.group)
        order = self.order
        if order is None and self.carried is not None and self.group is None and not (
                self.distinct):
            order = self.carried
        if order:
            out += " ORDER BY " + ", ".join(order)
        if self.limit is not None:
            out += f" LIMIT {self.limit}"
        return out


@dataclass(frozen=True)
class Translation:
    sql: str
    columns: tuple[Column, ...]
    render: dict[str, object] | None = None


def translate(query: ast.Query, tables: Mapping[str, Mapping[str, str]], now: int
              ) -> Translation:
    """`query` as Spark SQL. `tables`: table -> column -> shoal type kind."""
    return _Translator(query, tables, now).run()


class _Translator:
    def __init__(self, query: ast.Query, tables: Mapping[str, Mapping[str, str]],
                 now: int) -> None:
        self.query = query
        self.tables = tables
        self.lets: dict[str, ast.Let] = {}
        self.scalars = Scalars(self.lets, now)
        self.aliases = itertools.count(1)
        self.columns = itertools.count(1)
        self.render: dict[str, object] | None = None
        self.expanding: set[str] = set()
        self.named: dict[str, tuple[str, list[Column]]] = {}    # `as` names: SQL, columns
        self.roots: list[str] = []      # the table each pipeline being translated reads
        self.depth = 0          # pipelines being translated, `let` values expanded included
        self.at = _first_token(query.body)      # the operator being translated (errors)

    def run(self) -> Translation:
        for let in self.query.lets:
            self.lets[let.name] = let
        stage = self.pipeline(self.query.body)
        sql = SqlBudget.statement(stage.sql(), self.at)
        return Translation(sql, tuple(stage.outputs), self.render)

    def alias(self) -> str:
        return f"_k{next(self.aliases)}"

    def wrap(self, stage: Stage) -> Stage:
        frm = self.scalars.budget.spend(f"({stage.sql()}) AS {self.alias()}", self.at)
        out = Stage.reading(frm, stage.outputs)
        if stage.order is not None and stage.order_names:
            out.carried = stage.order
        elif stage.order is None and stage.carried is not None and stage.items is None \
                and stage.group is None and not stage.distinct:
            out.carried = stage.carried
        return out

    # ---- sources ----------------------------------------------------------------------------
    def pipeline(self, p: ast.Pipeline) -> Stage:
        at = _first_token(p)
        if self.depth >= MAX_KQL_NESTING:
            raise over_bound(f"tabular expressions nested at most {MAX_KQL_NESTING} deep "
                             "(let values expanded)", at)
        self.depth += 1
        try:
            return self._pipeline(p)
        finally:
            self.depth -= 1

    def _pipeline(self, p: ast.Pipeline) -> Stage:
        self.roots.append(_root_name(p))
        try:
            return self._operators(p)
        finally:
            self.roots.pop()

    def _operators(self, p: ast.Pipeline) -> Stage:
        stage = self.source(p.source)
        for i, op in enumerate(p.operators):
            self.at = op.at
            if isinstance(op, ast.Render):
                if i != len(p.operators) - 1 or p is not self.query.body:
                    raise semantic("render comes last in the query", op.at)
                self.render = {"visualization": op.visualization, **(
                    {"properties": op.properties} if op.properties else {})}
                continue
            stage = getattr(self, "op_" + type(op).__name__.lower())(stage, op)
        return stage

    def source(self, src: ast.Source | ast.Pipeline) -> Stage:
        if isinstance(src, ast.Pipeline):
            return self.wrap(self.pipeline(src))
        if isinstance(src, ast.UnionSource):
            return self.union([self.pipeline(leg) for leg in src.legs], src.legs,
                              src.with_source)
        if isinstance(src, ast.PrintSource):
            return self.print_source(src)
        if isinstance(src, ast.RangeSource):
            return self.range_source(src)
        named = self.named.get(src.name)
        if named is not None and src.version is None and src.timestamp is None:
            sql, columns = named
            frm = self.scalars.budget.spend(f"({sql}) AS {self.alias()}", src.at)
            return Stage.reading(frm, columns)
        let = self.lets.get(src.name)
        if let is not None and src.version is None and src.timestamp is None:
            if src.name in self.expanding:
                raise semantic(f"let '{src.name}' refers to itself", src.at)
            value = let.value
            if isinstance(value, ast.Name):
                value = ast.Pipeline(ast.TableSource(value.at, value.name), ())
            if not isinstance(value, ast.Pipeline):
                raise semantic(f"'{src.name}' is a scalar, not a table", src.at)
            self.expanding.add(src.name)
            try:
                return self.wrap(self.pipeline(value))
            finally:
                self.expanding.discard(src.name)
        name = src.name.lower()
        if name not in self.tables:
            raise TableNotFoundError(src.name)
        frm = quote_ident(name)
        if src.version is not None:
            frm += f" VERSION AS OF {src.version}"
        elif src.timestamp is not None:
            literal = spark_timestamp(src.timestamp)       # CAST('...' AS TIMESTAMP)
            frm += f" TIMESTAMP AS OF {literal[len('CAST('):-len(' AS TIMESTAMP)')]}"
        return Stage.reading(frm, [Column(c, k) for c, k in self.tables[name].items()])

    def one_row(self) -> str:
        return self.scalars.budget.spend(f"(SELECT 1 AS __kql_one) AS {self.alias()}", self.at)

    def print_source(self, src: ast.PrintSource) -> Stage:
        """`print`: one row of the expressions (unnamed ones `print_0`, `print_1`...)."""
        items: list[tuple[str, str]] = []
        outputs: list[Column] = []
        for i, a in enumerate(src.items):
            value = self.scalars.translate(a.expr, {})
            name = a.name or f"print_{i}"
            if name in (c.name for c in outputs):
                raise semantic(f"a column named '{name}' is printed twice", a.expr.at)
            items.append((value.text, name))
            outputs.append(Column(name, value.kind))
        return Stage(self.one_row(), [], items=items, outputs=outputs)

    def range_source(self, src: ast.RangeSource) -> Stage:
        """`range`: start, start + step, ... while not past stop (stop included), in order.
        The row numbers come from cross joins of a ten-row table, one per decimal digit, so
        the statement stays small and the embedded engine answers it."""
        start, stop, step = (self.scalars.translate(e, {}) for e in (src.start, src.stop,
                                                                     src.step))
        if not all(x.is_const for x in (start, stop, step)):
            raise semantic("range takes constant bounds and step", src.start.at)
        if start.kind == "timestamp" and stop.kind == "timestamp":
            if step.kind != "timespan" or step.const % 1_000 or not step.const:
                raise semantic("range over datetimes steps by a non-zero timespan of whole "
                               "microseconds", src.step.at)
            lo, hi, size = start.const // 1_000, stop.const // 1_000, step.const // 1_000
            kind = "timestamp"
        elif all(x.kind in NUMERIC for x in (start, stop, step)):
            lo, hi, size = start.const, stop.const, step.const
            kind = "real" if "real" in (start.kind, stop.kind, step.kind) else "long"
            if not size:
                raise semantic("range takes a non-zero step", src.step.at)
        else:
            raise semantic("range goes over numbers (a numeric step) or datetimes (a "
                           "timespan step)", src.start.at)
        steps = (hi - lo) / size if kind == "real" else (hi - lo) // size
        if kind == "real":          # 0.3 / 0.1 is 2.9999999999999996: stop is still a row
            steps = math.floor(steps + 1e-9)
        count = max(0, int(steps) + 1)
        if count > MAX_RANGE_ROWS:
            raise semantic(f"range makes at most {MAX_RANGE_ROWS:,} rows, not {count:,}",
                           src.step.at)
        digits = max(1, len(str(max(count - 1, 0))))
        index = " + ".join(f"_d{i}.d" + (f" * {10 ** i}" if i else "") for i in range(digits))
        index = f"CAST({index} AS BIGINT)"
        if kind == "timestamp":
            value = f"timestamp_micros({lo} + {index} * {size})"
        elif kind == "real":
            value = f"CAST({float(lo)!r} AS DOUBLE) + {index} * CAST({float(size)!r} AS DOUBLE)"
        else:
            value = f"{literal('long', lo, src.at).text} + {index} * " \
                    f"{literal('long', size, src.at).text}"
        joins = " CROSS JOIN ".join(f"({_TEN}) AS _d{i}" for i in range(digits))
        name = quote_ident(src.name)
        frm = self.scalars.budget.spend(
            f"(SELECT {value} AS {name} FROM {joins} WHERE {index} < {count}) AS {self.alias()}",
            src.at)
        out = Stage.reading(frm, [Column(src.name, kind)])
        out.carried = [f"{name} {'ASC' if size > 0 else 'DESC'}"]
        return out

    def rows(self, columns: list[Column], rows: list[list[Sql]], order: str) -> Stage:
        """A stage of constant rows (at least one), ordered by the column `order`."""
        selects = []
        for row in rows:
            cells = [f"{v.text} AS {quote_ident(c.name)}" for c, v in zip(columns, row,
                                                                          strict=True)]
            selects.append("SELECT " + ", ".join(cells))
        frm = self.scalars.budget.spend(f"({' UNION ALL '.join(selects)}) AS {self.alias()}",
                                        self.at)
        out = Stage.reading(frm, columns)
        out.carried = [f"{quote_ident(order)} ASC"]
        return out

    def with_columns(self, stage: Stage, added: list[tuple[str, str, str | None]]) -> Stage:
        """`stage` with columns (name, SQL over its inputs, kind) set as `extend` sets them:
        a column of an existing name replaced in place, a new one appended."""
        items = stage.items if stage.items is not None else [
            (quote_ident(c.name), c.name) for c in stage.inputs]
        outputs = list(stage.outputs)
        for name, text, kind in added:
            names = [c.name for c in outputs]
            if name in names:
                i = names.index(name)
                items = [*items[:i], (text, name), *items[i + 1:]]
                outputs[i] = Column(name, kind)
            else:
                items = [*items, (text, name)]
                outputs.append(Column(name, kind))
        return replace(stage, items=items, outputs=outputs,
                       passthrough=stage.passthrough - {n for n, _, _ in added})

    # ---- operators --------------------------------------------------------------------------
    def op_as(self, stage: Stage, op: ast.As) -> Stage:
        self.named[op.name] = (stage.sql(), list(stage.outputs))
        return stage

    def op_getschema(self, stage: Stage, op: ast.GetSchema) -> Stage:
        columns = [Column("ColumnName", "string"), Column("ColumnOrdinal", "int"),
                   Column("DataType", "string"), Column("ColumnType", "string")]
        rows = []
        for i, c in enumerate(stage.outputs):
            dotnet, kusto = _SCHEMA_TYPES.get(c.kind or "string", ("System.Object", "dynamic"))
            rows.append([literal("string", c.name, op.at), Sql(str(i), "int", const=i),
                         literal("string", dotnet, op.at), literal("string", kusto, op.at)])
        if not rows:
            raise semantic("getschema of rows without columns", op.at)
        return self.rows(columns, rows, "ColumnOrdinal")

    def op_parse(self, stage: Stage, op: ast.Parse) -> Stage:
        """`parse`/`parse-where`: the pattern becomes one regex (constants matched literally
        with kind=simple, as regexes with kind=regex; `*` any text, lazily; a column any
        text lazily, or to the end when it ends the pattern, or a number or bool by its
        type), anchored at the start. A row the regex does not match gets nulls
        (`parse`) or is dropped (`parse-where`)."""
        if stage.shaped:
            stage = self.wrap(stage)
        src = self.scalars.translate(op.source, stage.scope())
        if src.names - stage.passthrough:
            stage = self.wrap(stage)
            src = self.scalars.translate(op.source, stage.scope())
        text = src.text if src.kind in ("string", "dynamic", None) else \
            f"CAST({src.text} AS STRING)"
        pieces: list[str] = [f"(?{op.flags})" if op.flags else "", "^"]
        columns: list[tuple[ast.ParsePart, int]] = []
        group = 0
        for i, part in enumerate(op.parts):
            last = i == len(op.parts) - 1
            nxt = op.parts[i + 1] if not last else None
            # Any text up to the next constant: when that constant is one character c of a
            # kind=simple pattern, `[^c]*` (the same match, and the regex guard does not count
            # it as a costly repetition), else the lazy `.*?`.
            upto = ".*?"
            if nxt is not None and nxt.kind == "text" and not op.regex and len(nxt.text) == 1:
                upto = f"[^{_class_char(nxt.text)}]*"
            if part.kind == "star":
                pieces.append("" if last else upto)
            elif part.kind == "text":
                if op.regex:
                    try:
                        group += re.compile(part.text).groups
                    except re.error as e:
                        raise semantic(f"the regex {part.text!r}: {e}", part.at) from None
                    pieces.append(f"(?:{part.text})" if "|" in part.text else part.text)
                else:
                    pieces.append(regex_literal(part.text, caseless=False))
            else:
                group += 1
                pieces.append(_CAPTURES.get(part.type, "(.*)" if last else f"({upto})"))
                columns.append((part, group))
        regex = quote_string("".join(pieces))
        matched = f"{text} RLIKE {regex}"
        if op.keep_only_parsed:
            stage.where.append(matched)
        added: list[tuple[str, str, str | None]] = []
        for part, g in columns:
            value = f"regexp_extract({text}, {regex}, {g})"
            kind: str | None = part.type
            if part.type in ("long", "int", "real"):
                value = f"CAST({value} AS {SPARK_TYPES[part.type]})"
            elif part.type == "bool":
                value = f"(lower({value}) = 'true')"
            elif part.type == "timestamp":
                value = f"try_cast({value} AS TIMESTAMP)"
            if part.text in (n for n, _, _ in added):
                raise semantic(f"the pattern names '{part.text}' twice", part.at)
            added.append((part.text, value if op.keep_only_parsed else
                          f"CASE WHEN {matched} THEN {value} END", kind))
        return self.with_columns(stage, added)

    def op_mvexpand(self, stage: Stage, op: ast.MvExpand) -> Stage:
        """`mv-expand`: one row per element of the arrays (in parallel, the shorter padded
        with nulls); a null or non-array value gives one row with null, an empty array
        none. Elements are JSON text (`dynamic`) unless `to typeof()` casts them. Spark
        answers it (the embedded engine does not explode arrays)."""
        if stage.shaped:
            stage = self.wrap(stage)
        scope = stage.scope()
        arrays: list[str] = []
        values: list[tuple[str, str, str | None]] = []
        for j, item in enumerate(op.items, 1):
            value = self.scalars.translate(item.expr, scope)
            name = item.name or path_name(item.expr)
            if name is None:
                raise semantic("mv-expand of an expression needs a name (name = expr)",
                               item.expr.at)
            if value.kind == "array":
                array = f"CAST({value.text} AS ARRAY<STRING>)"
            elif value.kind in ("dynamic", "string", None):
                array = f"from_json({value.text}, 'array<string>')"
            else:
                raise semantic(f"mv-expand expands dynamic arrays, not {value.kind}",
                               item.expr.at)
            arrays.append(f"coalesce({array}, array(CAST(NULL AS STRING))) AS __kql_a{j}")
            element = f"get(__kql_a{j}, __kql_i)"
            kind = item.type or "dynamic"
            if kind in ("long", "int", "real", "bool", "timestamp"):
                element = f"try_cast({element} AS {SPARK_TYPES[kind]})"
            if name in (n for n, _, _ in values):
                raise semantic(f"mv-expand names '{name}' twice", item.expr.at)
            values.append((name, element, kind))
        sizes = [f"size(__kql_a{j})" for j in range(1, len(arrays) + 1)]
        count = sizes[0] if len(sizes) == 1 else f"greatest({', '.join(sizes)})"
        if op.limit is not None:
            count = f"least({count}, {self.count_of(op.limit, 'mv-expand limit')})"
        cols = [quote_ident(c.name) for c in stage.outputs]
        inner = (f"SELECT {', '.join(cols + arrays)} FROM ({stage.sql()}) AS {self.alias()}")
        frm = self.scalars.budget.spend(
            f"({inner}) AS {self.alias()} LATERAL VIEW explode(sequence(0, {count})) "
            f"{self.alias()} AS __kql_i", self.at)
        out = Stage(frm, [*stage.outputs, Column("__kql_i", "int")])
        out.where.append(f"__kql_i < {count}")
        out = self.with_columns(replace(out, items=[(q, c.name) for q, c in zip(
            cols, stage.outputs, strict=True)], outputs=list(stage.outputs)), values)
        if op.index is not None:
            out = self.with_columns(out, [(op.index, "CAST(__kql_i AS BIGINT)", "long")])
        return out

    def op_where(self, stage: Stage, op: ast.Where) -> Stage:
        preds = [self.scalars.translate(c, stage.scope()) for c in _conjuncts(op.predicate)]
        for pred in preds:
            if pred.kind not in ("bool", None):
                raise semantic(f"where takes a boolean expression, not a {pred.kind}", op.at)
        open_where = (stage.group is None and stage.order is None and stage.limit is None
                      and not stage.distinct)
        # Conjuncts on unchanged columns join this SELECT's WHERE (next to the scan); the
        # rest filter its output.
        outer = []
        for pred in preds:
            if open_where and pred.names <= stage.passthrough:
                stage.where.append(pred.text)
            else:
                outer.append(pred.text)
        if outer:
            stage = self.wrap(stage)
            stage.where.extend(outer)
        return stage

    def op_project(self, stage: Stage, op: ast.Project) -> Stage:
        if stage.shaped:
            stage = self.wrap(stage)
        items: list[tuple[str, str]] = []
        outputs: list[Column] = []
        passthrough: set[str] = set()
        for a in op.items:
            value = self.scalars.translate(a.expr, stage.scope())
            name = a.name or self.column_name(a.expr)
            if name in (c.name for c in outputs):
                raise semantic(f"a column named '{name}' is projected twice", a.expr.at)
            items.append((value.text, name))
            outputs.append(Column(name, value.kind))
            if isinstance(a.expr, ast.Name) and a.expr.name == name:
                passthrough.add(name)
        return replace(stage, items=items, outputs=outputs, passthrough=passthrough)

    def op_extend(self, stage: Stage, op: ast.Extend) -> Stage:
        if (stage.group is not None or stage.order is not None or stage.limit is not None
                or stage.distinct):
            stage = self.wrap(stage)
        added: set[str] = set()
        for a in op.items:
            scope = {c.name: c.kind for c in stage.outputs}
            value = self.scalars.translate(a.expr, scope)
            if value.names & added or value.names - stage.passthrough:
                stage = self.wrap(stage)      # reads a column computed in this SELECT
                added = set()
                value = self.scalars.translate(a.expr, stage.scope())
            name = a.name or self.column_name(a.expr)
            items = stage.items if stage.items is not None else [
                (quote_ident(c.name), c.name) for c in stage.inputs]
            outputs = list(stage.outputs)
            names = [c.name for c in outputs]
            if name in names:
                i = names.index(name)
                items = [*items[:i], (value.text, name), *items[i + 1:]]
                outputs[i] = Column(name, value.kind)
            else:
                items = [*items, (value.text, name)]
                outputs.append(Column(name, value.kind))
            passthrough = stage.passthrough - {name}
            stage = replace(stage, items=items, outputs=outputs, passthrough=passthrough)
            added.add(name)
        return stage

    def op_projectaway(self, stage: Stage, op: ast.ProjectAway) -> Stage:
        drop = {n.name for n in op.names}
        for n in op.names:
            self.check_column(stage, n)
        return self.reshape(stage, [(c.name, c.name) for c in stage.outputs
                                    if c.name not in drop])

    def op_projectrename(self, stage: Stage, op: ast.ProjectRename) -> Stage:
        renames = {}
        for new, old in op.renames:
            self.check_column(stage, old)
            renames[old.name] = new
        return self.reshape(stage, [(c.name, renames.get(c.name, c.name))
                                    for c in stage.outputs])

    def reshape(self, stage: Stage, keep: list[tuple[str, str]]) -> Stage:
        """Keep output columns (old name, new name) in that order."""
        if stage.group is not None or stage.distinct or stage.order is not None:
            stage = self.wrap(stage)
        items = stage.items if stage.items is not None else [
            (quote_ident(c.name), c.name) for c in stage.inputs]
        by_name = {name: (text, col) for (text, name), col in zip(items, stage.outputs,
                                                                  strict=True)}
        new_items, outputs, passthrough = [], [], set()
        for old, new in keep:
            text, col = by_name[old]
            new_items.append((text, new))
            outputs.append(Column(new, col.kind))
            if old == new and old in stage.passthrough:
                passthrough.add(new)
        return replace(stage, items=new_items, outputs=outputs, passthrough=passthrough)

    def op_summarize(self, stage: Stage, op: ast.Summarize) -> Stage:
        if stage.shaped:
            stage = self.wrap(stage)
        scope = stage.scope()
        items: list[tuple[str, str]] = []
        outputs: list[Column] = []
        group: list[str] = []
        kinds: list[str | None] = []
        by_names: set[str] = set()
        for a in op.by:
            value = self.scalars.translate(a.expr, scope)
            name = a.name or self.by_name(a.expr)
            group.append(value.text)
            kinds.append(value.kind)
            items.append((value.text, name))
            outputs.append(Column(name, value.kind))
            by_names.add(name)
        ranks: dict[int, str] = {}
        picks = [a for a in op.aggregates if _is_arg_pick(a.expr)]
        if picks:
            stage, ranks = self.rank_rows(stage, picks, list(zip(group, kinds, strict=True)))
        for a in op.aggregates:
            for text, name, kind in self.aggregate(a, stage, by_names, ranks):
                if name in (c.name for c in outputs):
                    raise semantic(f"a column named '{name}' is produced twice", a.expr.at)
                items.append((text, name))
                outputs.append(Column(name, kind))
        stage = replace(stage, items=items, outputs=outputs, passthrough=set(),
                        group=group, carried=None)
        return stage

    def rank_rows(self, stage: Stage, picks: list[ast.Assignment],
                  group: list[tuple[str, str | None]]) -> tuple[Stage, dict[int, str]]:
        """The rows of `stage` numbered for each `arg_max`/`arg_min` of a summarize: 1 for the
        row it picks in its group. Ordered by the expression (nulls last: a row whose value is
        null is picked only when the whole group's is), then by every column it returns,
        ascending, nulls first, so that a tie picks the same values on either engine."""
        scope = stage.scope()
        numbers: list[str] = []
        ranks: dict[int, str] = {}
        for a in picks:
            e = a.expr
            assert isinstance(e, ast.Call)
            if len(e.args) < 2:
                raise semantic(f"{e.name}(by, column, ...) takes 2+ arguments", e.at)
            if isinstance(e.args[0], ast.Star):
                raise semantic(f"{e.name}() maximizes an expression, not '*'", e.args[0].at)
            by = self.scalars.translate(e.args[0], scope)
            keys = [f"{_key(by.text, by.kind)} {'DESC' if e.name == 'arg_max' else 'ASC'} "
                    "NULLS LAST"]
            for arg in e.args[1:]:
                if isinstance(arg, ast.Star):
                    keys += [f"{_key(quote_ident(c.name), c.kind)} ASC NULLS FIRST"
                             for c in stage.outputs if c.kind != "array"]
                else:
                    value = self.scalars.translate(arg, scope)
                    keys.append(f"{_key(value.text, value.kind)} ASC NULLS FIRST")
            name = f"__kql_pick{len(numbers) + 1}"
            part = f"PARTITION BY {', '.join(_key(t, k) for t, k in group)} " if group else ""
            keys = list(dict.fromkeys(keys))
            numbers.append(f"row_number() OVER ({part}ORDER BY {', '.join(keys)}) AS {name}")
            ranks[id(e)] = name
        cols = ", ".join(quote_ident(c.name) for c in stage.outputs)
        frm = self.scalars.budget.spend(
            f"(SELECT {cols}, {', '.join(numbers)} FROM ({stage.sql()}) AS {self.alias()}) "
            f"AS {self.alias()}", self.at)
        return Stage.reading(frm, stage.outputs), ranks

    def aggregate(self, a: ast.Assignment, stage: Stage, by_names: set[str],
                  ranks: Mapping[int, str]) -> list[tuple[str, str, str | None]]:
        e = a.expr
        scope = stage.scope()
        if isinstance(e, ast.Call) and e.name in ("arg_max", "arg_min"):
            picked = ranks[id(e)]

            def pick(text: str) -> str:
                return f"max(CASE WHEN {picked} = 1 THEN {text} END)"

            by = self.scalars.translate(e.args[0], scope)
            out = [(pick(by.text), a.name or self.column_name(e.args[0]), by.kind)]
            for arg in e.args[1:]:
                if isinstance(arg, ast.Star):
                    cols = [c for c in stage.outputs if c.name not in by_names
                            and c.name != out[0][1]]
                    out += [(pick(quote_ident(c.name)), c.name, c.kind) for c in cols]
                else:
                    value = self.scalars.translate(arg, scope)
                    out.append((pick(value.text), self.column_name(arg), value.kind))
            return out
        if isinstance(e, ast.Call) and e.name == "percentiles":
            if len(e.args) < 2:
                raise semantic("percentiles(column, p, ...) takes 2+ arguments", e.at)
            x = self.scalars.translate(e.args[0], scope)
            base = path_name(e.args[0]) or ""
            out = []
            for p_expr in e.args[1:]:
                p = self.scalars.translate(p_expr, scope)
                if not p.is_const or not isinstance(p.const, (int, float)):
                    raise semantic("percentiles() takes constant percentages", p_expr.at)
                agg = percentile_sql(x, float(p.const))
                out.append((agg.text, f"percentile_{base}_{_pct(p.const)}", agg.kind))
            return out
        value = self.scalars.translate(e, scope, aggregates=True)
        if not value.aggregate:
            raise semantic("summarize takes aggregations (count(), sum(x), ...)", e.at)
        return [(value.text, a.name or self.aggregate_name(e), value.kind)]

    def aggregate_name(self, e: ast.Expr) -> str:
        if isinstance(e, ast.Call) and e.name in AGGREGATES:
            prefix = AGGREGATE_PREFIX[e.name]
            if e.name == "percentile" and len(e.args) == 2 and isinstance(
                    e.args[1], ast.Literal):
                return f"percentile_{path_name(e.args[0]) or ''}_{_pct(e.args[1].value)}"
            arg = path_name(e.args[0]) if e.args and e.name not in ("countif",) else None
            return f"{prefix}_{arg or ''}"
        return self.column_name(e)

    def by_name(self, e: ast.Expr) -> str:
        if isinstance(e, ast.Call) and e.name in ("bin", "floor", "startofday",
                                                  "startofmonth", "startofyear") and e.args:
            inner = path_name(e.args[0])
            if inner is not None:
                return inner
        return self.column_name(e)

    def column_name(self, e: ast.Expr) -> str:
        return path_name(e) or f"Column{next(self.columns)}"

    def op_take(self, stage: Stage, op: ast.Take) -> Stage:
        n = self.count_of(op.count, "take")
        stage.limit = n if stage.limit is None else min(stage.limit, n)
        return stage

    def count_of(self, e: ast.Expr, what: str) -> int:
        value = self.scalars.translate(e, {})
        if not (value.is_const and isinstance(value.const, int)) or value.const < 0:
            raise semantic(f"{what} takes a constant row count", e.at)
        return int(value.const)

    def op_sort(self, stage: Stage, op: ast.Sort | ast.Top) -> Stage:
        if stage.order is not None or stage.limit is not None:
            stage = self.wrap(stage)
        outputs = {c.name for c in stage.outputs}
        bare = all(isinstance(k.expr, ast.Name) and k.expr.name in outputs for k in op.keys)
        if not bare and (stage.items is not None or stage.group is not None or
                         stage.distinct):
            stage = self.wrap(stage)
        keys = []
        for k in op.keys:
            value = self.scalars.translate(k.expr, stage.scope())
            nulls_first = (not k.descending) if k.nulls_first is None else k.nulls_first
            keys.append(f"{value.text} {'DESC' if k.descending else 'ASC'} "
                        f"NULLS {'FIRST' if nulls_first else 'LAST'}")
        stage.order, stage.order_names = keys, bare
        stage.carried = None
        return stage

    def op_top(self, stage: Stage, op: ast.Top) -> Stage:
        n = self.count_of(op.count, "top")
        stage = self.op_sort(stage, op)
        stage.limit = n
        return stage

    def op_distinct(self, stage: Stage, op: ast.Distinct) -> Stage:
        if stage.shaped:
            stage = self.wrap(stage)
        if len(op.items) == 1 and isinstance(op.items[0], ast.Star):
            items = [(quote_ident(c.name), c.name) for c in stage.outputs]
            outputs = list(stage.outputs)
        else:
            items, outputs = [], []
            for e in op.items:
                value = self.scalars.translate(e, stage.scope())
                name = self.column_name(e)
                items.append((value.text, name))
                outputs.append(Column(name, value.kind))
        return replace(stage, items=items, outputs=outputs, distinct=True, carried=None,
                       passthrough={c.name for c in outputs} & stage.passthrough)

    def op_count(self, stage: Stage, op: ast.Count) -> Stage:
        if stage.shaped:
            stage = self.wrap(stage)
        return replace(stage, items=[("count(*)", "Count")], outputs=[Column("Count", "long")],
                       passthrough=set(), group=[], carried=None)

    def op_topnested(self, stage: Stage, op: ast.TopNested) -> Stage:
        """Level by level: the rows' groups by the level's value (within the groups the levels
        above kept), the top N of them by the aggregation in each (ties by the value,
        ascending, nulls first), and with `with others` one row more per group above,
        aggregating the rows outside its top N, with the levels below left null. One
        statement: a WITH per level, the rows a level keeps joined (null-safe) to the next."""
        scope = stage.scope()
        levels: list[_Level] = []
        names: set[str] = set()
        for clause in op.levels:
            value = self.scalars.translate(clause.value.expr, scope)
            agg = self.scalars.translate(clause.aggregate.expr, scope, aggregates=True)
            if not agg.aggregate:
                raise semantic("top-nested ranks by an aggregation (count(), sum(x), ...)",
                               clause.aggregate.expr.at)
            vname = clause.value.name or self.column_name(clause.value.expr)
            aname = clause.aggregate.name or f"aggregated_{vname}"
            for name, e in ((vname, clause.value.expr), (aname, clause.aggregate.expr)):
                if name in names:
                    raise semantic(f"a column named '{name}' is produced twice", e.at)
                names.add(name)
            others = None
            if clause.others is not None:
                o = self.scalars.translate(clause.others, {})
                text_kinds = ("string", "dynamic")
                if not o.is_const or not (o.kind == value.kind or o.kind is None or (
                        o.kind in NUMERIC and value.kind in NUMERIC) or (
                        o.kind in text_kinds and value.kind in text_kinds)):
                    raise semantic(f"with others = takes a constant {value.kind or 'value'} "
                                   f"(the type of '{vname}')", clause.others.at)
                others = o.text if o.kind == value.kind or o.kind in text_kinds else \
                    f"CAST({o.text} AS {SPARK_TYPES.get(value.kind or '', 'STRING')})"
            count = None if clause.count is None else self.count_of(clause.count, "top-nested")
            levels.append(_Level(value, agg, vname, aname, others, count, clause.descending))
        p = self.alias()
        cols = [quote_ident(c.name) for c in stage.outputs]
        values = [f"{lv.value.text} AS __kql_v{i}" for i, lv in enumerate(levels, 1)]
        ctes = [f"{p}_r0 AS (SELECT {', '.join(cols + values)} FROM ({stage.sql()}) AS {p}_in)"]
        parts: list[str] = []
        k = len(levels)
        for i, lv in enumerate(levels, 1):
            above = [f"__kql_{x}{j}" for j in range(1, i) for x in ("v", "a")]
            keys = [f"__kql_v{j}" for j in range(1, i + 1)]
            outer = [f"r.{c}" for c in above]
            grouped = (f"SELECT {', '.join([*outer, f'r.__kql_v{i}'])}, {lv.agg.text} AS "
                       f"__kql_a{i} FROM {p}_r{i - 1} AS r GROUP BY "
                       f"{', '.join([*outer, f'r.__kql_v{i}'])}")
            if lv.count is not None:
                part = ("PARTITION BY " + ", ".join(
                    _key(f"__kql_v{j}", levels[j - 1].value.kind) for j in range(1, i)) + " "
                    if i > 1 else "")
                order = (f"{_key(f'__kql_a{i}', lv.agg.kind)} "
                         f"{'DESC' if lv.descending else 'ASC'} NULLS LAST, "
                         f"{_key(f'__kql_v{i}', lv.value.kind)} ASC NULLS FIRST")
                level_cols = ", ".join([*above, f"__kql_v{i}", f"__kql_a{i}"])
                grouped = (f"SELECT {level_cols} FROM (SELECT {level_cols}, row_number() OVER "
                           f"({part}ORDER BY {order}) AS __kql_n FROM ({grouped}) AS {p}_g) "
                           f"AS {p}_n WHERE __kql_n <= {lv.count}")
            ctes.append(f"{p}_t{i} AS ({grouped})")
            on = " AND ".join(f"r.{c} <=> t.{c}" for c in keys)
            if i < k:
                ctes.append(f"{p}_r{i} AS (SELECT r.*, t.__kql_a{i} FROM {p}_r{i - 1} AS r "
                            f"JOIN {p}_t{i} AS t ON {on})")
            if lv.others is not None:
                # Nulls of the lower levels' types, written as values of those types that
                # are never taken (both engines read these; a bare typed NULL not everywhere).
                below = [f"{text} AS __kql_{x}{j}" for j in range(i + 1, k + 1)
                         for x, text in (("v", f"max(IF(FALSE, r.__kql_v{j}, NULL))"),
                                         ("a", f"IF(FALSE, {levels[j - 1].agg.text}, NULL)"))]
                group = f" GROUP BY {', '.join(outer)}" if outer else " HAVING count(*) > 0"
                parts.append(f"SELECT {', '.join([*outer, f'{lv.others} AS __kql_v{i}'])}, "
                             f"{lv.agg.text} AS __kql_a{i}{''.join(', ' + b for b in below)} "
                             f"FROM {p}_r{i - 1} AS r LEFT ANTI JOIN {p}_t{i} AS t ON {on}"
                             f"{group}")
        every = [f"__kql_{x}{j}" for j in range(1, k + 1) for x in ("v", "a")]
        parts.insert(0, f"SELECT {', '.join(every)} FROM {p}_t{k}")
        body = " UNION ALL ".join(f"({part})" if len(parts) > 1 else part for part in parts)
        outputs = [Column(name, kind) for lv in levels
                   for name, kind in ((lv.vname, lv.value.kind), (lv.aname, lv.agg.kind))]
        select = ", ".join(f"__kql_{x}{j} AS {quote_ident(c.name)}" for (j, x), c in zip(
            ((j, x) for j in range(1, k + 1) for x in ("v", "a")), outputs, strict=True))
        frm = self.scalars.budget.spend(
            f"(WITH {', '.join(ctes)} SELECT {select} FROM ({body}) AS {p}_u) AS {p}", self.at)
        return Stage.reading(frm, outputs)

    def op_makeseries(self, stage: Stage, op: ast.MakeSeries) -> Stage:
        """One row per group of the `by` values that has rows in [from, to): each aggregation
        as an array over the bins from + i * step, the default (0 unless given) where a bin
        has no rows or its aggregation is null, and the axis as the array of bin starts.
        Each bin is aggregated per group, then the arrays are written out bin by bin."""
        if op.start is None or op.end is None:
            raise semantic("make-series takes 'from' and 'to' (shoal builds the bins from "
                           "them)", op.at)
        if stage.shaped:
            stage = self.wrap(stage)
        scope = stage.scope()
        axis = self.scalars.translate(op.axis, scope)
        start, end, step = (self.scalars.translate(e, {}) for e in (op.start, op.end, op.step))
        at = op.step.at
        if axis.kind == "timestamp":
            if start.kind != "timestamp" or end.kind != "timestamp" or not (
                    start.is_const and end.is_const):
                raise semantic("make-series over a datetime takes constant datetimes 'from' "
                               "and 'to'", op.start.at)
            if step.kind != "timespan" or not step.is_const or step.const < 1_000:
                raise semantic("make-series over a datetime takes a constant timespan step "
                               "of at least 1 microsecond", at)
            lo, hi, size = start.const // 1_000, end.const // 1_000, step.const // 1_000
            bin_of = f"((unix_micros({axis.text}) - {lo}) DIV {size})"
        elif axis.kind in NUMERIC:
            if not all(x.is_const and x.kind in NUMERIC for x in (start, end, step)):
                raise semantic("make-series over a number takes constant numbers 'from', "
                               "'to' and 'step'", op.start.at)
            lo, hi, size = start.const, end.const, step.const
            if size <= 0:
                raise semantic("make-series takes a positive step", at)
            bin_of = f"CAST(floor(({axis.text} - {start.text}) / {step.text}) AS BIGINT)"
        else:
            raise semantic(f"make-series takes a datetime or numeric axis, not "
                           f"{axis.kind or 'an untyped value'}", op.axis.at)
        bins = -(-(hi - lo) // size) if isinstance(size, int) and isinstance(lo, int) and \
            isinstance(hi, int) else math.ceil((hi - lo) / size)
        if not 1 <= bins <= MAX_SERIES_BINS:
            raise semantic(f"make-series makes 1 to {MAX_SERIES_BINS} bins, not {bins}", at)
        inner: list[str] = []
        group: list[str] = []
        items: list[tuple[str, str]] = []
        outputs: list[Column] = []
        for j, a in enumerate(op.by, 1):
            value = self.scalars.translate(a.expr, scope)
            inner.append(f"{value.text} AS __kql_b{j}")
            group.append(value.text)
            items.append((f"__kql_b{j}", a.name or self.by_name(a.expr)))
            outputs.append(Column(items[-1][1], value.kind))
        for j, sa in enumerate(op.aggregates, 1):
            value = self.scalars.translate(sa.expr, scope, aggregates=True)
            if not value.aggregate:
                raise semantic("make-series takes aggregations (count(), avg(x), ...)",
                               sa.expr.at)
            default = literal("long", 0, sa.expr.at) if sa.default is None else \
                self.scalars.translate(sa.default, {})
            if not default.is_const:
                raise semantic("default = takes a constant", sa.default.at if sa.default
                               else sa.expr.at)
            inner.append(f"{value.text} AS __kql_s{j}")
            cells = ", ".join(f"coalesce(max(CASE WHEN __kql_bin = {i} THEN __kql_s{j} END), "
                              f"{default.text})" for i in range(bins))
            items.append((f"array({cells})", sa.name or self.aggregate_name(sa.expr)))
            outputs.append(Column(items[-1][1], "array"))
        starts = [literal("timestamp", start.const + i * step.const, at).text
                  if axis.kind == "timestamp" else repr(lo + i * size) for i in range(bins)]
        items.append((f"array({', '.join(starts)})", self.column_name(op.axis)))
        outputs.append(Column(items[-1][1], "array"))
        if len({name for _, name in items}) != len(items):
            raise semantic("make-series produces two columns of one name (name them with "
                           "'name = ')", op.at)
        lower, upper = (literal("timestamp" if axis.kind == "timestamp" else x.kind or "real",
                                x.const, at)
                        for x in (start, end))
        inner_sql = (f"SELECT {', '.join(inner)}, {bin_of} AS __kql_bin FROM ({stage.sql()}) "
                     f"AS {self.alias()} WHERE {axis.text} >= {lower.text} AND {axis.text} < "
                     f"{upper.text} GROUP BY {', '.join([*group, bin_of])}")
        keys = [f"__kql_b{j}" for j in range(1, len(op.by) + 1)]
        select = ", ".join(f"{text} AS {quote_ident(name)}" for text, name in items)
        tail = f" GROUP BY {', '.join(keys)}" if keys else " HAVING count(*) > 0"
        frm = self.scalars.budget.spend(
            f"(SELECT {select} FROM ({inner_sql}) AS {self.alias()}{tail}) AS {self.alias()}",
            self.at)
        return Stage.reading(frm, outputs)

    def op_union(self, stage: Stage, op: ast.Union) -> Stage:
        legs = [stage] + [self.pipeline(leg) for leg in op.legs]
        return self.union(legs, None, op.with_source,
                          [self.roots[-1], *(_root_name(leg) for leg in op.legs)])

    def union(self, legs: list[Stage], sources: tuple[ast.Pipeline, ...] | None,
              with_source: str | None, labels: list[str] | None = None) -> Stage:
        columns: dict[str, set[str | None]] = {}
        for leg in legs:
            for c in leg.outputs:
                columns.setdefault(c.name, set()).add(c.kind)
        kinds = {name: (k.pop() if len(k) == 1 else "string") for name, k in columns.items()}
        parts = []
        for i, leg in enumerate(legs):
            have = {c.name: c.kind for c in leg.outputs}
            select = []
            if with_source is not None:
                label = _root_name(sources[i]) if sources is not None else (
                    labels[i] if labels is not None else f"leg{i + 1}")
                select.append(f"{quote_string(label)} AS {quote_ident(with_source)}")
            for name, kind in kinds.items():
                if name not in have:
                    select.append(f"CAST(NULL AS {SPARK_TYPES.get(kind or '', 'STRING')}) "
                                  f"AS {quote_ident(name)}")
                elif have[name] != kind:
                    select.append(f"CAST({quote_ident(name)} AS STRING) AS {quote_ident(name)}")
                else:
                    select.append(quote_ident(name))
            if [c.name for c in leg.outputs] == list(kinds) and with_source is None:
                parts.append(self.scalars.budget.spend(leg.sql(), self.at))
            else:
                parts.append(self.scalars.budget.spend(
                    f"SELECT {', '.join(select)} FROM ({leg.sql()}) AS {self.alias()}", self.at))
        cols = ([Column(with_source, "string")] if with_source is not None else []) + [
            Column(n, k) for n, k in kinds.items()]
        body = " UNION ALL ".join(f"({p})" for p in parts)
        return Stage.reading(self.scalars.budget.spend(f"({body}) AS {self.alias()}", self.at),
                             cols)

    def op_join(self, stage: Stage, op: ast.Join) -> Stage:
        right = self.pipeline(op.right)
        left = stage
        if op.kind in ("rightsemi", "rightanti", "rightantisemi"):
            left, right = right, left
            on = [(c.right, c.left, c.at) for c in op.on]
        else:
            on = [(c.left, c.right, c.at) for c in op.on]
        for lname, rname, at in on:
            if lname not in {c.name for c in left.outputs}:
                raise semantic(f"the join key '{lname}' is not a column of the left side", at)
            if rname not in {c.name for c in right.outputs}:
                raise semantic(f"the join key '{rname}' is not a column of the right side", at)
        la, ra = self.alias(), self.alias()
        left_sql = left.sql()
        if op.kind == "innerunique" and not op.lookup:
            left_sql = _dedupe(left, [lname for lname, _, _ in on], self.alias())
        # lookup: a right key of the same name as its left key is not repeated
        same_keys = {rname for lname, rname, _ in on if lname == rname} if op.lookup else set()
        cond = " AND ".join(f"{la}.{quote_ident(lname)} = {ra}.{quote_ident(rname)}"
                            for lname, rname, _ in on)
        items: list[tuple[str, str]] = []
        outputs: list[Column] = []
        for c in left.outputs:
            items.append((f"{la}.{quote_ident(c.name)}", c.name))
            outputs.append(c)
        if "SEMI" not in JOIN_SQL[op.kind] and "ANTI" not in JOIN_SQL[op.kind]:
            taken = {c.name for c in outputs}
            for c in right.outputs:
                if c.name in same_keys:
                    continue
                name = c.name
                k = 1
                while name in taken:
                    name, k = f"{c.name}{k}", k + 1
                taken.add(name)
                items.append((f"{ra}.{quote_ident(c.name)}", name))
                outputs.append(Column(name, c.kind))
        select = ", ".join(f"{text} AS {quote_ident(name)}" for text, name in items)
        sql = (f"SELECT {select} FROM ({left_sql}) AS {la} {JOIN_SQL[op.kind]} "
               f"({right.sql()}) AS {ra} ON {cond}")
        return Stage.reading(self.scalars.budget.spend(f"({sql}) AS {self.alias()}", self.at),
                             outputs)

    def check_column(self, stage: Stage, name: ast.Name) -> None:
        if name.name not in {c.name for c in stage.outputs}:
            raise semantic(f"Failed to resolve column named '{name.name}'", name.at)


def _first_token(p: ast.Pipeline) -> Token:
    src: ast.Source | ast.Pipeline = p
    while isinstance(src, ast.Pipeline):
        src = src.source
    return src.at


@dataclass(frozen=True)
class _Level:
    """One translated clause of `top-nested`."""

    value: Sql
    agg: Sql
    vname: str
    aname: str
    others: str | None
    count: int | None
    descending: bool


def _key(text: str, kind: str | None) -> str:
    """A window's PARTITION BY / ORDER BY key: a real as an expression, not the bare value.
    The embedded engine hands a bare double key's -0.0 back as 0.0 in the rows it numbers
    (measured); an expression of it sorts and partitions alike and leaves the rows alone."""
    return f"(-(-{text}))" if kind == "real" else text


def _is_arg_pick(e: ast.Expr) -> bool:
    return isinstance(e, ast.Call) and e.name in ("arg_max", "arg_min")


def _conjuncts(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Binary) and e.op == "and":
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _dedupe(stage: Stage, keys: list[str], alias: str) -> str:
    cols = ", ".join(quote_ident(c.name) for c in stage.outputs)
    kinds = {c.name: c.kind for c in stage.outputs}
    part = ", ".join(_key(quote_ident(k), kinds.get(k)) for k in keys)
    return (f"SELECT {cols} FROM (SELECT {cols}, row_number() OVER (PARTITION BY {part} "
            f"ORDER BY {part}) AS __kql_rn FROM ({stage.sql()}) AS {alias}) AS {alias}_u "
            "WHERE __kql_rn = 1")


def _root_name(p: ast.Pipeline) -> str:
    src = p.source
    while isinstance(src, ast.Pipeline):
        src = src.source
    return src.name if isinstance(src, ast.TableSource) else "union"


def _class_char(c: str) -> str:
    """`c` as a member of a regex character class (Java's and RE2's)."""
    return "\\" + c if c in "]\\^-[" else c


def _pct(p: object) -> str:
    text = f"{p:g}" if isinstance(p, float) else str(p)
    return text.replace(".", "_")

