"""Transformer attention, one part per module (README.md says what each part asks).

This file imports nothing on purpose: each module is imported on its own, so a mistake in one
module only affects the parts that use it.
"""
