"""Stage 1 of the pruning cascade: a `BlockPredicate` as a catalog query.

`compile_predicate()` lowers a predicate into a SQL condition over manifest rows, for SQLite
(`json_each`) and Postgres (JSONB `@>`), using only what the catalog holds: time bounds,
distinct and token sets, present paths of dynamic columns. Membership (bloom) filters cannot
be evaluated in SQL; `bloom_leaves()` and `survives_filters()` apply them in Python to the
rows the SQL part kept.

Every rule is conservative: a leaf the catalog cannot decide becomes TRUE. Distinct/token
sets are trusted only for extents written under a schema version in which the column had a
type whose stored values compare equal to the looked-up value (a column widened from `int`
to `string` keeps ints in old extents' stats), so a widening can never cause a wrong prune.

Renamed and dropped columns: a predicate names the columns of the schema version read, while
an extent's stats are keyed by the names of the version it was written under. Versions are
grouped by where they keep the predicate's columns (`shoal.types.schema.stored_names`); each
group's extents are tested against the predicate with its own names, and a column an extent
has no values of (a dropped name taken again) is looked up under a name no extent has, which
keeps the extent. A table never renamed or dropped from compiles as one group, as before.

Bounded size: an `IN` list of more than `SMALL_IN` values is one leaf per value kind, its
values bound as ONE JSON array parameter (so 5,000 values stay one condition, far below
SQLite's expression-depth and variable limits); `OR`s of equalities on one column are
merged the same way; past `MAX_PARAMS` bound parameters any further leaf becomes TRUE
(sound: every leaf sits under AND/OR only, `NOT` is already TRUE). Membership filters
decide `IN` lists of at most `MAX_BLOOM_VALUES` values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Integer, and_, column, false, or_, text, true
from sqlalchemy.sql.elements import True_

from shoal.format.base import (And, BlockPredicate, DynamicPathEquals, DynamicPathExists, Equals,
                               InSet, Not, Or, StringHas, TimeRange)
from shoal.format.predicates import rename_columns
from shoal.format.tokens import tokenize
from shoal.types.schema import TIMESTAMP_COLUMN, Schema, stored_names

_INT_KINDS = ("int", "long")
SMALL_IN = 16            # IN lists up to this size: one leaf per value (as equalities)
MAX_PARAMS = 400         # bound parameters of one compiled predicate, at most (about)
MAX_BLOOM_VALUES = 256   # IN lists longer than this are not decided by membership filters
_INT64 = (-(2**63), 2**63 - 1)


def _value_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):  # no stored int lies outside int64; nor can it be bound
        return "int" if _INT64[0] <= value <= _INT64[1] else None
    if isinstance(value, str):
        return "str"
    return None


@dataclass
class _Compiler:
    dialect: str                          # "sqlite" | "postgresql"
    history: Sequence[Schema]             # every schema version of the table
    n: int = 0

    def _param(self, value: Any) -> str:
        self.n += 1
        return f"p{self.n}"

    def _versions(self, column: str, accept: Callable[[str], bool]) -> list[int] | None:
        """Schema versions whose type of `column` makes its stats comparable; None = all."""
        ok = [s.version for s in self.history if (c := s.get(column)) is not None
              and accept(c.type.kind)]
        having = [s.version for s in self.history if column in s]
        if not ok:
            return []
        return None if ok == having else ok

    def _contains(self, json_col: str, path: tuple[str, str] | tuple[str], value: Any,
                  params: dict[str, Any]) -> ColumnElement[bool]:
        """The JSON array at `path` of `json_col` is absent/not an array, or holds `value`."""
        p_path, p_val = self._param(None), self._param(None)
        if self.dialect == "postgresql":
            params[p_path] = "{" + ",".join(path) + "}"
            params[p_val] = json.dumps([value])
            sql = (f"(jsonb_typeof({json_col} #> CAST(:{p_path} AS text[])) IS DISTINCT FROM "
                   f"'array' OR ({json_col} #> CAST(:{p_path} AS text[])) @> "
                   f"CAST(:{p_val} AS jsonb))")
        else:
            params[p_path] = "$." + ".".join(f'"{p}"' for p in path)
            params[p_val] = value
            sql = (f"(json_type({json_col}, :{p_path}) IS NOT 'array' OR EXISTS (SELECT 1 FROM "
                   f"json_each({json_col}, :{p_path}) AS je WHERE je.value = :{p_val}))")
        return text(sql)  # type: ignore[return-value]

    def _restrict(self, cond: ColumnElement[bool], versions: list[int] | None,
                  params: dict[str, Any]) -> ColumnElement[bool]:
        if versions is None:
            return cond
        if not versions:
            return true()
        return or_(column("schema_version", Integer).not_in(versions), cond)

    def _contains_any(self, json_col: str, path: tuple[str, str], values: list[Any],
                      params: dict[str, Any]) -> ColumnElement[bool]:
        """The JSON array at `path` is absent/not an array, or holds one of `values` (bound
        as one JSON array parameter)."""
        p_path, p_vals = self._param(None), self._param(None)
        params[p_vals] = json.dumps(values)
        if self.dialect == "postgresql":
            params[p_path] = "{" + ",".join(path) + "}"
            at = f"{json_col} #> CAST(:{p_path} AS text[])"
            sql = (f"(jsonb_typeof({at}) IS DISTINCT FROM 'array' OR EXISTS (SELECT 1 FROM "
                   f"jsonb_array_elements(CASE WHEN jsonb_typeof({at}) = 'array' THEN {at} "
                   f"ELSE '[]'::jsonb END) AS je(v) WHERE je.v IN (SELECT "
                   f"jsonb_array_elements(CAST(:{p_vals} AS jsonb)))))")
        else:
            params[p_path] = "$." + ".".join(f'"{p}"' for p in path)
            sql = (f"(json_type({json_col}, :{p_path}) IS NOT 'array' OR EXISTS (SELECT 1 FROM "
                   f"json_each({json_col}, :{p_path}) AS je WHERE je.value IN (SELECT value "
                   f"FROM json_each(:{p_vals}))))")
        return text(sql)  # type: ignore[return-value]

    def _full(self) -> bool:
        """The parameter budget is spent: further leaves are TRUE (see the module doc)."""
        return self.n >= MAX_PARAMS

    def leaf_equals(self, column: str, value: Any, params: dict[str, Any]) -> ColumnElement[bool]:
        kind = _value_kind(value)
        if kind is None or self._full():
            return true()
        accept = (lambda k: k in _INT_KINDS) if kind == "int" else (lambda k: k == "string")
        versions = self._versions(column, accept)
        return self._restrict(self._contains("column_stats", (column, "distinct"), value, params),
                              versions, params)

    def leaf_in(self, column: str, values: Sequence[Any],
                params: dict[str, Any]) -> ColumnElement[bool]:
        """`column IN values`: per-value leaves for a short list, else one leaf per kind."""
        if not values:
            return false()
        if len(values) <= SMALL_IN:
            leaves = [self.leaf_equals(column, v, params) for v in values]
            return true() if any(isinstance(c, True_) for c in leaves) else or_(*leaves)
        by_kind: dict[str | None, list[Any]] = {}
        for v in dict.fromkeys(values):  # distinct, in order
            by_kind.setdefault(_value_kind(v), []).append(v)
        if None in by_kind or self._full():
            return true()  # a value the stats cannot decide: keep every extent
        conds = []
        for kind, vals in by_kind.items():
            accept = (lambda k: k in _INT_KINDS) if kind == "int" else (lambda k: k == "string")
            conds.append(self._restrict(
                self._contains_any("column_stats", (column, "distinct"), vals, params),
                self._versions(column, accept), params))
        return or_(*conds)

    def compile(self, pred: BlockPredicate | None, params: dict[str, Any]) -> ColumnElement[bool]:
        if pred is None:
            return true()
        if isinstance(pred, TimeRange):
            if pred.column != TIMESTAMP_COLUMN:
                return true()
            bounds = []
            if pred.lo_ns is not None:
                p = self._param(None)
                params[p] = int(pred.lo_ns)
                bounds.append(text(f"max_ts >= :{p}"))
            if pred.hi_ns is not None:
                p = self._param(None)
                params[p] = int(pred.hi_ns)
                bounds.append(text(f"min_ts <= :{p}"))
            if pred.lo_ns is not None and pred.hi_ns is not None and pred.lo_ns > pred.hi_ns:
                return false()
            return and_(true(), *bounds)
        if isinstance(pred, Equals):
            return self.leaf_equals(pred.column, pred.value, params)
        if isinstance(pred, InSet):
            return self.leaf_in(pred.column, pred.values, params)
        if isinstance(pred, StringHas):
            tokens = sorted(tokenize(pred.token))
            if not tokens or self._full():
                return true()
            versions = self._versions(pred.column, lambda k: k == "string")
            cond = and_(*(self._contains("column_stats", (pred.column, "tokens"), t, params)
                          for t in tokens))
            return self._restrict(cond, versions, params)
        if isinstance(pred, (DynamicPathExists, DynamicPathEquals)):
            if (isinstance(pred, DynamicPathEquals) and pred.value is None) or self._full():
                return true()
            return self._contains("present_paths", (pred.column,), pred.path, params)
        if isinstance(pred, And):
            conds = [c for c in (self.compile(c, params) for c in pred.children)
                     if not isinstance(c, True_)]
            return and_(*conds) if conds else true()
        if isinstance(pred, Or):
            if not pred.children:
                return false()
            conds = []
            for child in _merge_equalities(pred.children):
                cond = self.compile(child, params)
                if isinstance(cond, True_):  # OR with TRUE: the rest cannot prune
                    return true()
                conds.append(cond)
            return or_(*conds)
        if isinstance(pred, Not):
            return true()
        return true()


def _merge_equalities(children: Sequence[BlockPredicate]) -> list[BlockPredicate]:
    """OR children with the equalities (Equals, InSet) on one column merged into one InSet,
    so `a = 1 OR a = 2 OR ...` compiles like `a IN (1, 2, ...)`; other children as they are."""
    by_column: dict[str, list[Any]] = {}
    out: list[BlockPredicate] = []
    for c in children:
        if isinstance(c, Equals):
            by_column.setdefault(c.column, []).append(c.value)
        elif isinstance(c, InSet):
            by_column.setdefault(c.column, []).extend(c.values)
        else:
            out.append(c)
    return [InSet(col, tuple(vals)) for col, vals in by_column.items()] + out


def predicate_columns(pred: BlockPredicate | None) -> set[str]:
    """The columns `pred` looks up."""
    if isinstance(pred, (And, Or)):
        return set().union(*(predicate_columns(c) for c in pred.children))
    if isinstance(pred, Not):
        return predicate_columns(pred.child)
    column = getattr(pred, "column", None)
    return set() if column is None else {column}


def names_by_version(pred: BlockPredicate | None, history: Sequence[Schema],
                     read: Schema | None) -> dict[int, dict[str, str | None]]:
    """For each version of `history` whose extents keep a column of `pred` under another name
    than `read` gives it (or hold a dropped column of that name), where they keep them."""
    if read is None or not read.reshaped:
        return {}
    wanted = predicate_columns(pred)
    out: dict[int, dict[str, str | None]] = {}
    for s in history:
        names = {c: n for c, n in stored_names(read, s).items() if c in wanted}
        if names:
            out[s.version] = names
    return out


def compile_predicate(pred: BlockPredicate | None, *, dialect: str,
                      history: Sequence[Schema], read: Schema | None = None
                      ) -> tuple[ColumnElement[bool], dict[str, Any]]:
    """SQL condition over `manifests` columns plus its bound parameters. `read`: the schema
    version the predicate's names belong to (None: names are the same in every version)."""
    params: dict[str, Any] = {}
    compiler = _Compiler(dialect, history)
    renamed = names_by_version(pred, history, read)
    if not renamed:
        return compiler.compile(pred, params), params
    version = column("schema_version", Integer)
    groups: dict[tuple[tuple[str, str | None], ...], list[int]] = {}
    for v, names in renamed.items():
        groups.setdefault(tuple(sorted(names.items(), key=lambda kv: kv[0])), []).append(v)
    conds = [or_(version.in_(sorted(renamed)), compiler.compile(pred, params))]
    for key, versions in groups.items():
        cond = compiler.compile(rename_columns(pred, dict(key)), params)
        conds.append(or_(version.not_in(versions), cond))
    return and_(*conds), params


def bloom_leaves(pred: BlockPredicate | None) -> dict[str, set[Any]]:
    """Columns (and looked-up values) of Equals/InSet leaves a membership filter may decide."""
    out: dict[str, set[Any]] = {}

    def walk(p: BlockPredicate | None) -> None:
        if isinstance(p, Equals) and _value_kind(p.value):
            out.setdefault(p.column, set()).add(p.value)
        elif isinstance(p, InSet) and len(p.values) <= MAX_BLOOM_VALUES:
            out.setdefault(p.column, set()).update(v for v in p.values if _value_kind(v))
        elif isinstance(p, (And, Or)):
            for c in p.children:
                walk(c)
        # Not: conservative, nothing below it may prune.

    walk(pred)
    return {c: vals for c, vals in out.items() if len(vals) <= MAX_BLOOM_VALUES}


def survives_filters(pred: BlockPredicate | None,
                     might_contain: Callable[[str, Any], bool]) -> bool:
    """Evaluate `pred` with Equals/InSet decided by membership filters, all else TRUE.

    `might_contain(column, value)` answers True when the extent has no filter for the column.
    The result is ANDed with the SQL part, which keeps stage 1 conservative.
    """
    if pred is None:
        return True
    if isinstance(pred, Equals):
        return not _value_kind(pred.value) or might_contain(pred.column, pred.value)
    if isinstance(pred, InSet):
        if len(pred.values) > MAX_BLOOM_VALUES:
            return True
        return any(not _value_kind(v) or might_contain(pred.column, v) for v in pred.values)
    if isinstance(pred, And):
        return all(survives_filters(c, might_contain) for c in pred.children)
    if isinstance(pred, Or):
        return any(survives_filters(c, might_contain) for c in pred.children)
    return True
