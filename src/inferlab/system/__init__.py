"""What the package needs of this machine: processes (alive, their trees) and private files."""
