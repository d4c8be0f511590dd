"""Numeric core: layer norm step by step, its display, the answer parser and the grader."""
