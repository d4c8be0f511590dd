"""The exact values a learner's six numbers are graded against, and the classic slips.

CONTRACT:
    STEPS = ("mean", "variance", "denominator")
    @dataclass(frozen=True) class ExactSteps:
        mean: Fraction
        variance: Fraction           # population, exact
        denominator: Fraction        # sqrt(variance + eps) to 40 significant digits (Decimal)
    def exact_steps(row: Sequence[int | Fraction], eps: Fraction) -> ExactSteps

    SLIPS = ("mean_not_divided", "variance_n_minus_1", "denominator_no_sqrt",
             "denominator_n_minus_1", ... )   # names are keys into the lesson's feedback texts
    def slip_values(row, eps, step) -> dict[str, Fraction]
        what a learner who made each slip would type for this step of this row.

    @dataclass(frozen=True) class Grade:
        right: bool
        slip: str | None            # the slip the wrong answer matches (within tolerance), if any
    def grade(value: Fraction, row, eps, step, tolerance: Fraction) -> Grade
"""
