"""The facts row of the engine (docs/DESIGN.md)."""
