"""Foreign tables: live, read-only reads of a Postgres or MySQL/MariaDB table
(docs/connectors.md, "Federation").

- `source`: the source URL (scheme, host, credentials, masking) and how the source's column
  types map to shoal's;
- `pushdown`: the conjuncts of a statement that the source can evaluate, as its SQL;
- `readers`: the drivers (ADBC for Postgres, connectorx for MySQL/MariaDB) that answer a
  SELECT as Arrow, with the row cap, the statement timeout and a read-only session;
- `scan`: one foreign table reference of a statement — the SQL sent, the Arrow answer in the
  shapes the engines read, and what it fetched;
- `create`: `CREATE FOREIGN TABLE`, which checks the host and takes the columns from the
  source.
"""
