"""The shared write path: coercion, evolution, ledger, group commit, commit coordinator."""
