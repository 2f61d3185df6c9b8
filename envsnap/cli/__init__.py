"""The command line: parser, one module per command, shared options; the only code that prints."""
