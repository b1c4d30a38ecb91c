"""One module per ``hqval`` subcommand; see ``hqval.cli.COMMANDS``."""
