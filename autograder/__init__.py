"""The grading engine for the transformer_hw assignment (its contract: docs/AUTOGRADER.md)."""
