"""The sources row of the engine (docs/DESIGN.md)."""
