"""The shared write path: coercion, evolution, rejects, group commit; commits go through
`shoal.commit`."""
