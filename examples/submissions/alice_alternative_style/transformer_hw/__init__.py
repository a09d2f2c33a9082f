"""Alice's transformer_hw: an alternative-style implementation of SPEC.md.

Deliberately imports nothing, so each module loads on its own.
"""
