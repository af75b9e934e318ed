"""PostgreSQL's own: the one-statement engine's statements, their plans and prepared sessions, NOTIFY."""
