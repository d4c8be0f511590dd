"""Parsing a row the learner types in "Try your own row".

CONTRACT:
    MAX_ROW_LENGTH = 16
    @dataclass(frozen=True) class RowError: message: str
    def parse_row(text: str) -> tuple[float, ...] | RowError
        1 to 16 finite numbers separated by commas and/or spaces, optional surrounding [ ];
        Unicode minus accepted. Anything else: RowError with a message a learner understands.
"""
