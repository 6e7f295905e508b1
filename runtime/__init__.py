"""kvunits runtime: capacity planning, the paged block allocator, admission, the CLI.

Imports no torch and no triton; the hot paths work on plain ints after one unit check.
"""
