"""`python -m flows.cli`: the `xlembed` command line."""

from flows.cli import entrypoint

entrypoint()
