"""How numbers are shown to a learner.

CONTRACT:
    def format_number(x: float) -> str
        six decimals fixed; NaN -> "not a number"; -0 (and anything rounding to -0.000000)
        -> "0.000000"; +inf -> "infinity", -inf -> "minus infinity".
    def format_row(xs: Sequence[float]) -> str   # "[-1.224736, 0.000000, 1.224736]"
    def format_input_row(xs: Sequence[float]) -> str  # "[1, 2, 3]" integers without decimals
"""
