"""The shipped playbooks, as the package envsnap.playbooks (pyproject.toml maps this folder):
envsnap reads them through importlib.resources, from a checkout and from a wheel alike."""
