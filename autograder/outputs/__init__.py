"""The outputs row of the engine (docs/DESIGN.md)."""
