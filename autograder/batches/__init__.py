"""The batches row of the engine (docs/DESIGN.md)."""
