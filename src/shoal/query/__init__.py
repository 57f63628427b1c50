"""Query lane: scans through the pruning cascade; the Spark DataSource and planner build on it."""
