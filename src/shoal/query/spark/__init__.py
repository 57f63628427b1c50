"""Spark: the process's session, its deployment on a cluster, the environment shipped to
executors, the Python DataSource that reads planned scans, shoal's SQL functions as UDFs, and
the one-line messages for its failures."""
