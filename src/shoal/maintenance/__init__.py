"""Maintenance: orphan GC now; compaction, retention and the ledger sweep as work units later."""
