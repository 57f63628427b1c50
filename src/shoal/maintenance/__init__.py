"""Maintenance: compaction (a Spark job), retention and snapshot expiry, orphan GC
and the ledger sweep, run as catalog work units by `MaintenanceWorker` and scheduled by
`Scheduler`; `service.build_worker(db)` wires them onto an open client."""
