"""The kvunits command line, run as users run it: the real entry point in a subprocess."""
