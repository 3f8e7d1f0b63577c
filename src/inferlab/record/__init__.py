"""A run's record: assembled, validated, read, queried, exported; the run directories."""
