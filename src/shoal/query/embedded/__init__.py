"""The embedded in-process engine (DuckDB): a SELECT over small pruned scans, transpiled from
Spark SQL only where the answer is certainly identical."""
