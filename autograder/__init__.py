"""The grading engine for the transformer_hw assignment (see AUTOGRADER.md)."""
