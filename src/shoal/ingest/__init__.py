"""The shared write path: coercion, evolution, group commit; commits (and the reject tables'
commits) go through `shoal.commit`."""
