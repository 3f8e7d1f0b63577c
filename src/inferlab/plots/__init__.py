"""The plots of a record (matplotlib, only when drawing)."""
