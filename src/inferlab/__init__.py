"""inferlab: the CLI, ansible-runner glue, lab services and report rendering beside the inferlab.distributed collection."""

__version__ = "0.1.0"
