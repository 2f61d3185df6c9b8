# The agent's own exit codes, read by the controller through envsnap/errors.py's ExitCode.
# Kept to syntax that any python3 can parse: __main__.py reads it before it checks the
# interpreter's version.

OK = 0               # the JSON document was printed (a failed collector is in it, not here)
PYTHON_TOO_OLD = 90  # the host's python is older than 3.8; stderr says which it is
