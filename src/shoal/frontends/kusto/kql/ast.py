"""The KQL syntax tree: scalar expressions, tabular operators, pipelines and `let`.

Frozen dataclasses; every node keeps the token it starts at (`at`) for positioned errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.frontends.kusto.kql.lexer import Token


# ---- scalar expressions ---------------------------------------------------------------------
@dataclass(frozen=True)
class Expr:
    at: Token


@dataclass(frozen=True)
class Literal(Expr):
    kind: str           # string | long | real | bool | null | datetime | timespan
    value: object       # str, int, float, bool, None, ns since the epoch, ns


@dataclass(frozen=True)
class Name(Expr):
    name: str


@dataclass(frozen=True)
class Star(Expr):
    """`*` as an argument (`arg_max(ts, *)`)."""


@dataclass(frozen=True)
class Call(Expr):
    name: str           # lower case
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Binary(Expr):
    op: str             # ==, !=, <, <=, >, >=, =~, !~, +, -, *, /, %, and, or, has, ...
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Unary(Expr):
    op: str             # - (negation)
    operand: Expr


@dataclass(frozen=True)
class Member(Expr):
    """A path step into a dynamic value: `x.key`, `x['key']`, `x[0]`."""

    target: Expr
    key: str | int


@dataclass(frozen=True)
class InList(Expr):
    operand: Expr
    values: tuple[Expr, ...]
    negated: bool
    caseless: bool      # in~


@dataclass(frozen=True)
class Between(Expr):
    operand: Expr
    low: Expr
    high: Expr
    negated: bool


# ---- tabular ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Assignment:
    """`name = expr` or a bare `expr` (named by the translator) in project/extend/summarize."""

    name: str | None
    expr: Expr


@dataclass(frozen=True)
class SortKey:
    expr: Expr
    descending: bool = True         # KQL's default
    nulls_first: bool | None = None  # None: KQL's default (first ascending, last descending)


@dataclass(frozen=True)
class Operator:
    at: Token


@dataclass(frozen=True)
class Where(Operator):
    predicate: Expr


@dataclass(frozen=True)
class Project(Operator):
    items: tuple[Assignment, ...]


@dataclass(frozen=True)
class ProjectAway(Operator):
    names: tuple[Name, ...]


@dataclass(frozen=True)
class ProjectRename(Operator):
    renames: tuple[tuple[str, Name], ...]      # (new name, old column)


@dataclass(frozen=True)
class Extend(Operator):
    items: tuple[Assignment, ...]


@dataclass(frozen=True)
class Summarize(Operator):
    aggregates: tuple[Assignment, ...]
    by: tuple[Assignment, ...]


@dataclass(frozen=True)
class Take(Operator):
    count: Expr


@dataclass(frozen=True)
class Top(Operator):
    count: Expr
    keys: tuple[SortKey, ...]


@dataclass(frozen=True)
class Sort(Operator):
    keys: tuple[SortKey, ...]


@dataclass(frozen=True)
class Distinct(Operator):
    items: tuple[Expr, ...]         # a single Star for `distinct *`


@dataclass(frozen=True)
class Count(Operator):
    pass


@dataclass(frozen=True)
class Union(Operator):
    legs: tuple[Tabular, ...]
    with_source: str | None = None


@dataclass(frozen=True)
class JoinOn:
    left: str
    right: str
    at: Token


@dataclass(frozen=True)
class Join(Operator):
    kind: str
    right: Tabular
    on: tuple[JoinOn, ...]
    lookup: bool = False    # `lookup`: the right side's keys of the left's names not repeated


@dataclass(frozen=True)
class SeriesAggregate:
    """One aggregation of `make-series`: `[name =] aggregation [default = value]`."""

    name: str | None
    expr: Expr
    default: Expr | None


@dataclass(frozen=True)
class MakeSeries(Operator):
    aggregates: tuple[SeriesAggregate, ...]
    axis: Expr
    start: Expr | None
    end: Expr | None
    step: Expr
    by: tuple[Assignment, ...]


@dataclass(frozen=True)
class NestedLevel:
    """One clause of `top-nested`: `[N] of [name =] expr [with others = c] by [name =] agg
    [asc | desc]`."""

    at: Token
    count: Expr | None
    value: Assignment
    others: Expr | None
    aggregate: Assignment
    descending: bool = True


@dataclass(frozen=True)
class TopNested(Operator):
    levels: tuple[NestedLevel, ...]


@dataclass(frozen=True)
class Render(Operator):
    visualization: str
    properties: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class GetSchema(Operator):
    pass


@dataclass(frozen=True)
class ParsePart:
    """One element of a `parse` pattern: `*`, a string constant, or `name[:type]`."""

    at: Token
    kind: str               # star | text | column
    text: str = ""          # the constant (a regex with kind=regex), or the column's name
    type: str = "string"    # the column's type


@dataclass(frozen=True)
class Parse(Operator):
    source: Expr
    parts: tuple[ParsePart, ...]
    regex: bool = False     # kind=regex
    flags: str = ""         # flags= of kind=regex
    keep_only_parsed: bool = False      # parse-where


@dataclass(frozen=True)
class ExpandItem:
    name: str | None
    expr: Expr
    type: str | None        # to typeof(T)


@dataclass(frozen=True)
class MvExpand(Operator):
    items: tuple[ExpandItem, ...]
    index: str | None = None            # with_itemindex=
    limit: Expr | None = None


@dataclass(frozen=True)
class As(Operator):
    name: str


# ---- sources and queries --------------------------------------------------------------------
@dataclass(frozen=True)
class TableSource:
    at: Token
    name: str
    version: int | None = None          # table('t', version=12)
    timestamp: int | None = None        # table('t', asof=datetime(...)): ns


@dataclass(frozen=True)
class UnionSource:
    at: Token
    legs: tuple[Tabular, ...]
    with_source: str | None = None


@dataclass(frozen=True)
class PrintSource:
    """`print [name =] expr, ...`: one row."""

    at: Token
    items: tuple[Assignment, ...]


@dataclass(frozen=True)
class RangeSource:
    """`range name from start to stop step size`: one column, start, start + size, ... up to
    and including stop."""

    at: Token
    name: str
    start: Expr
    stop: Expr
    step: Expr


Source = TableSource | UnionSource | PrintSource | RangeSource


@dataclass(frozen=True)
class Pipeline:
    source: Source | Pipeline
    operators: tuple[Operator, ...]


Tabular = Pipeline


@dataclass(frozen=True)
class Let:
    at: Token
    name: str
    value: Expr | Pipeline


@dataclass(frozen=True)
class Query:
    lets: tuple[Let, ...]
    body: Pipeline
