"""The lesson as data (content/d9.toml), validated with pydantic.

Authors edit the TOML; nothing in code repeats its prose. The loader fails loudly, naming the
field, when the file is malformed (missing text, two right readings, an unknown slip, ...).

CONTRACT (the data helper implements `load_lesson` and writes content/d9.toml; the web
relies on these names):

class Choice(BaseModel):            id: str; label: str
class ReadingChoice(Choice):        correct: bool; feedback: str      # exactly one correct
class NumberField(BaseModel):
    id: str                          # e.g. "row1_mean" -- form field name and event key
    row: int                         # index into Lesson.hand_rows
    step: Literal["mean", "variance", "denominator"]
    label: str                       # accessible name, e.g. "Mean of [1, 2, 3]"
class Section(BaseModel):           id: str; number: str; title: str; paragraphs: list[str]

class Lesson(BaseModel):
    id: str                          # "d9"
    track: str; kicker: str; title: str; summary: str
    optional_note: str               # "This is optional. It opens once 8.5 ..."
    gate_summary: str
    prerequisite: Prerequisite       # id "8.5", title "The transformer block", locked_text
    sections: list[Section]          # the prose of each section, in order, by id:
                                     #   question, predict, try, compare, check
    predict: Predict                 # question, choices (layer_norm, residual), prompt, locked_note
    eps: Decimal                     # 1e-5 (the switch's on value; off is 0)
    tolerance: Decimal               # 0.001
    hand_rows: list[list[int]]       # [[1, 2, 3], [2, 2, 2, 6]]
    edge_row: list[int]              # [4, 4, 4, 4]
    number_fields: list[NumberField] # six, in page order
    slip_feedback: dict[str, str]    # slip name (numeric.targets.SLIPS) -> feedback text
    wrong_feedback: str              # a wrong answer that matches no slip
    reading: Reading                 # question, choices (4, one correct), prompt
    ablation: Ablation               # intro text, honesty statement, loading text (issue 4)
    hints: Hints                     # rung thresholds 3 and 5, intro text (issue 4)
    takeaway: Takeaway               # label, default line, max_chars 2000
    own_row: OwnRow                  # "Try your own row": label, placeholder, help

def load_lesson(path: Path | None = None) -> Lesson     # default: the packaged content/d9.toml
"""
