"""inferlab: the CLI, ansible-runner glue, lab helpers and reports beside the inferlab.distributed collection."""

__version__ = "0.3.0"
