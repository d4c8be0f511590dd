"""What the depth sweep says, in the lesson's sentences: filled from the sweep file, so a
sweep whose answer flips at another depth (or never) says so without an edit.

CONTRACT: sweep_sentences(sweep, lesson) -> list[str]: for each initialisation, at which
depths each single component recovers more (or neither, or the seeds disagree) and where
the answer changes; then what the initialisation changes; then which depths trained fewer
seeds. compare_line(sweep, lesson, prediction, depth=, init=, agrees=) -> str | None: the
compare section's line when the learner's opening prediction, wrong (or tied) in the
recording, is what happens at other depths of the sweep with the recording's initialisation.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from normdive.i18n.catalogues import ngettext, pgettext
from normdive.lesson.content import COMPONENT_ROWS, Lesson
from normdive.recording.runs import Runs, SweepPlan
from normdive.recording.sweep_reader import DepthVerdict, verdicts

# The predict choice id whose single-component row each verdict names.
VERDICT_CHOICES = {row: choice for choice, row in COMPONENT_ROWS.items()}


def listed(items: Sequence[object]) -> str:
    """ "2", "2 and 4", "2, 4 and 8" in the current locale ("2, 4 und 8"; Arabic joins every
    item with "و", "2 و4 و8")."""
    if len(items) == 1:
        return str(items[0])
    head = pgettext("between the items of a list", ", ").join(map(str, items[:-1]))
    return pgettext("the last two items of a list", "{head} and {last}").format(
        head=head, last=items[-1]
    )


def seed_words(seeds: Sequence[int]) -> str:
    """ "seed 0", "seeds 0 and 1", "seeds 0, 1 and 2": the noun in the current locale's plural
    form for the number of seeds."""
    return ngettext("seed {seeds}", "seeds {seeds}", len(seeds)).format(seeds=listed(seeds))


def depth_words(depths: Sequence[int]) -> str:
    """ "depth 2", "depths 2 and 4", "depths 2, 4 and 8", as seed_words."""
    return ngettext("depth {depths}", "depths {depths}", len(depths)).format(depths=listed(depths))


def init_label(lesson: Lesson, init: str) -> str:
    return lesson.sweep.init_labels.get(init, init)


def _by_init(found: list[DepthVerdict]) -> dict[str, list[DepthVerdict]]:
    grouped: dict[str, list[DepthVerdict]] = {}
    for verdict in found:
        grouped.setdefault(verdict.init, []).append(verdict)
    return grouped


def _verdict_sentence(lesson: Lesson, init: str, verdict: str, depths: list[int]) -> str:
    text = lesson.sweep
    fields = {"init": init_label(lesson, init), "depths": depth_words(depths)}
    if verdict in VERDICT_CHOICES:
        component = lesson.components[VERDICT_CHOICES[verdict]]
        return text.recovers_more.format(component=component, **fields)
    if verdict == "tie":
        return text.neither_more.format(**fields)
    return text.seeds_disagree.format(**fields)


def sweep_sentences(sweep: Runs, lesson: Lesson) -> list[str]:
    text = lesson.sweep
    sentences = []
    grouped = _by_init(verdicts(sweep))
    for init, found in grouped.items():
        order: dict[str, list[int]] = {}
        for verdict in found:
            order.setdefault(verdict.verdict, []).append(verdict.depth)
        sentences += [_verdict_sentence(lesson, init, v, depths) for v, depths in order.items()]
        changes = [
            (before.depth, after.depth)
            for before, after in itertools.pairwise(found)
            if before.verdict != after.verdict
        ]
        label = init_label(lesson, init)
        sentences += [text.changes.format(init=label, before=b, after=a) for b, a in changes]
        if not changes and len(found) > 1:
            sentences.append(text.same_everywhere.format(init=label))
    if len(grouped) > 1:
        answers: dict[int, set[str]] = {}
        for found in grouped.values():
            for verdict in found:
                answers.setdefault(verdict.depth, set()).add(verdict.verdict)
        differ = [depth for depth, seen in sorted(answers.items()) if len(seen) > 1]
        sentences.append(
            text.init_changes.format(depths=depth_words(differ)) if differ else text.init_same
        )
    depths = sweep.plan_as(SweepPlan).depths
    widest = max(len(entry.seeds) for entry in depths)
    for entry in depths:
        if len(entry.seeds) < widest:
            sentences.append(text.trimmed.format(depth=entry.depth, seeds=seed_words(entry.seeds)))
    return sentences


def compare_line(
    sweep: Runs,
    lesson: Lesson,
    prediction: str | None,
    *,
    depth: int,
    init: str,
    agrees: bool,
) -> str | None:
    """The compare section's line about other depths, or None: when the learner's opening
    prediction agrees with the recording, or the sweep never bears it out elsewhere."""
    if agrees or prediction not in COMPONENT_ROWS:
        return None
    wanted = COMPONENT_ROWS[prediction]
    depths = [
        v.depth
        for v in verdicts(sweep)
        if v.init == init and v.verdict == wanted and v.depth != depth
    ]
    if not depths:
        return None
    return lesson.sweep.compare_line.format(
        predicted=lesson.components[prediction],
        init=init_label(lesson, init),
        depths=depth_words(depths),
    )
