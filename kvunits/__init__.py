"""The ``kvunits`` command line: plan, check, convert and describe KV caches from configs.

A thin layer over `contracts` (config loading, units) and `runtime` (capacity planning):
``kvunits plan`` reads a config, plans its cache and prints the table (or JSON). Run it as
``kvunits`` (the installed script) or ``python -m kvunits``.
"""

__version__ = "0.1.0"  # the distribution's version (pyproject.toml reads it from here)
