"""Nova's rules and the leveller's own: who may move, where, and apply's
re-checks."""
