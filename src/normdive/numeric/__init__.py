"""Numeric core: layer norm step by step, its display, the answer parser and the grader.

Imports nothing from the rest of normdive, and never torch.
"""
