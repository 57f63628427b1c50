"""Query lane: a statement checked, planned through the pruning cascade, routed to an engine.

Read it top-down (the import-linter contract keeps this order):

- `engine`: `QueryEngine`, the facade every edge calls: DDL in shoal, a SELECT planned,
  routed and run; `answer_stream` runs the same plan as streamed record batches.
- `cancel`: one statement's deadline and cancellation; `routing`: which engine answers.
- `spark/`: the Spark session, its cluster deployment, the executors' environment, the
  Python DataSource, the SQL functions as UDFs, Spark's failures in one line.
  `embedded/`: the in-process engine (DuckDB) and the Spark SQL it can answer identically.
- `planner`: the SQL analysis (one scan per table reference, its columns and predicate);
  `scan_plan`: one scan planned through stages 1-2 (`ScanSpec`); `scan_read`: a planned
  scan read as Arrow, in the one shape both engines see.
- `guard` (and `regex_rule`): what a statement may do; `ddl`: shoal's own DDL;
  `limits`: a statement's cost bounds; `results`: answers on the wire; `byte_functions`:
  the byte-decoding functions both engines run.
"""
