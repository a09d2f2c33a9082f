"""The grading row of the engine (docs/DESIGN.md)."""
