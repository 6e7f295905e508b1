"""kvunits kernels: Triton kernels for the pooled paged KV cache, torch references, wrappers.

The only package of kvunits that imports torch and triton.
"""
