"""The commands row of the engine (docs/DESIGN.md)."""
