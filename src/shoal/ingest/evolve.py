"""Schema evolution mid-batch: which unknown fields become columns (docs/ingest.md).

The write path in `evolve` mode: the top-level keys the schema lacks, in order of first
appearance (`scan_unknown_fields()`; coercion with `unknown="props"` finds the same list in
its own msgspec pass, `Coerced.unknown_fields`, so the write path needs no pre-scan);
`plan_evolution()` keeps the identifier-safe ones, at most `cap` (32) per request in order of
first appearance, each as a nullable `string` column; everything else goes to `props`. The
caller adds the columns (`Schema.evolve`), re-reads the table, and coerces against the fresh
schema with `unknown="props"`, so the names left out land in `props`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shoal.ingest._lines import OBJECT, FieldSet, LineIndex, raw_pass
from shoal.types.columns import STRING
from shoal.types.schema import Column, Schema, is_identifier_safe

EVOLUTION_CAP = 32


def scan_unknown_fields(body: bytes, schema: Schema) -> list[str]:
    """Top-level keys of any line not in the schema, in order of first appearance (one pre-scan).

    Lines that are not one valid JSON object are skipped (coercion reports them). One msgspec
    pass over the body with the schema's columns declared and unknown fields forbidden: a
    chunk that meets a new key is decoded once more to collect its keys.
    """
    body = bytes(body)
    index = LineIndex.build(body)
    rows = raw_pass(index, index.lines_of(OBJECT),
                    FieldSet(schema.names, forbid_unknown=True), known=schema.names,
                    keep=False)
    return rows.discovered


@dataclass(frozen=True)
class EvolutionPlan:
    new_columns: list[Column]  # identifier-safe names, first `cap` by appearance: nullable string
    to_props: list[str]        # the other unknown names: over the cap, unsafe or reserved


def plan_evolution(unknown: Sequence[str], schema: Schema, *,
                   cap: int = EVOLUTION_CAP) -> EvolutionPlan:
    """Split unknown field names into new columns and names left for `props`.

    `unknown` is in order of first appearance (duplicates are ignored). A reserved or
    non-identifier-safe name always goes to props; a safe name the schema already has is
    skipped (it is not unknown).
    """
    if cap < 0:
        raise ValueError("cap must be >= 0")
    new_columns: list[Column] = []
    to_props: list[str] = []
    seen: set[str] = set()
    for name in unknown:
        if name in seen:
            continue
        seen.add(name)
        if not is_identifier_safe(name):
            to_props.append(name)
        elif name in schema:
            continue
        elif len(new_columns) < cap:
            new_columns.append(Column(name, STRING))
        else:
            to_props.append(name)
    return EvolutionPlan(new_columns, to_props)
