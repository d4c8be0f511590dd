"""Lesson content: the text, rows, choices and rules of D9, loaded from data and validated."""
