"""What the records show: statistics, comparisons and their verdicts, the sweep, the matrix."""
