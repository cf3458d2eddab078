"""The ground floor: file I/O, paths, config reading, caches, tokens, figure style.

Every module here stands on the standard library, third-party packages and other
modules of this package only; nothing in ``tersetalk.core`` imports a module of
another part of tersetalk (the layer test, tests/test_import_graph.py). Importing
the package itself imports nothing.
"""
