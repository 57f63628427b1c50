"""Sync frontend (docs/connectors.md): a table that is the change log of a source table.

- `binding.py`: the properties (`sync_source`, `sync_table`, `sync_mode`, `sync_cursor`),
  their check at CREATE and the source's columns as the table's;
- `source.py`: the `SyncSource` protocol a database plugs into, and the change batches;
- `postgres.py`: PostgreSQL logical replication (pgoutput) and cursor polling;
- `pipeline.py`: snapshot, then change batches, each committed with its source position;
- `kind.py`: sync bindings as a kind run by the binding supervisor.
"""
