"""report.md: one module a section, and the text helpers they share."""
