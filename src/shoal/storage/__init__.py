"""Object stores: local directory and S3-compatible (SPEC §6)."""
