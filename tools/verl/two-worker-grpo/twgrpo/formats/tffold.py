"""Records that repeat one layout, folded a tag at a time (tfevents.load_views).

A long run's event records mostly repeat one layout, the same tags in the same order step
after step (tfproto.known_row), so their values come as rows under one tuple of tags. Once
every tag of the layout is held by every view that keeps it (its route, series and envelope
made), what a view keeps of one tag no longer depends on any other tag: a batch of rows is then
folded a column at a time, each in record order, with each lookup made once a column rather
than once a value. The views come out the same, value for value, as folding record by record
(tests/py/unit/test_tffold.py folds random streams both ways).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

BATCH = 1 << 16  # values folded together (rows x tags): memory is the rows and their columns


def steady(tags: Tuple[str, ...], routes: Dict[str, List[tuple]], nonfinite: Any, max_tags: int,
           envelope_tags: int) -> bool:
    """Whether rows of these tags may be folded a tag at a time: each tag routed, held by every
    view on its route and given its envelope (or the envelopes are full), no tag twice, and room
    for every tag's first NaN (no tag's first NaN can keep another's out)."""
    if len(set(tags)) != len(tags) or len(nonfinite) + len(tags) > max_tags:
        return False
    for tag in tags:
        route = routes.get(tag)
        if route is None:
            return False
        for _, _, values, _, _, envelope, _ in route:
            if tag not in values or (envelope is not None and tag not in envelope
                                     and len(envelope) < envelope_tags):
                return False
    return True


def fold_rows(tags: Tuple[str, ...], steps: List[int], rows: List[tuple], routes: Dict[str, List[tuple]],
              nonfinite: Any, latest: Dict[str, Tuple[int, float]],
              envelop: Callable, thin: Callable, share_of: Callable[[int], int]) -> None:
    """Fold rows (a tuple of values each, in tags' order) of steady tags into every view.
    nonfinite: load_views's tfnonfinite.NonFinite."""
    ascending = steps == sorted(steps)
    rising = ascending and len(set(steps)) == len(steps)  # no step twice in the batch
    columns = list(zip(*rows))
    finite = []
    for column in columns:
        total = sum(column)
        finite.append(total - total == 0)  # every value finite (an overflow: the long way)
    held = nonfinite.held  # the columns to walk: a NaN to note, or a finite write to take one back
    watched = [index for index, tag in enumerate(tags) if not finite[index] or tag in held]
    for step, row in zip(steps, rows):  # in record order, as one by one
        if not watched:
            break
        for index in watched:
            value = row[index]
            if value - value:  # NaN for NaN and inf
                nonfinite.note(tags[index], step, value)
            elif tags[index] in held:
                nonfinite.finite(tags[index], step)
    for tag, column, whole in zip(tags, columns, finite):
        route = routes[tag]
        for view in route:
            if rising and view[5] is None and steps[0] > view[4][tag]:
                _fold_new(tag, steps, column, view, thin, share_of)
            else:
                _fold_column(tag, steps, column, view, whole, envelop, thin, share_of)
        if route:  # the tag's last step and the last value written at it
            current = latest.get(tag)
            if ascending and (current is None or steps[0] >= current[0]):
                latest[tag] = (steps[-1], column[-1])
                continue
            for step, value in zip(steps, column):
                if current is None or step >= current[0]:
                    current = (step, value)
            latest[tag] = current


def _fold_column(tag: str, steps: Sequence[int], column: Sequence[float], view: tuple, finite: bool,
                 envelop: Callable, thin: Callable, share_of: Callable[[int], int]) -> None:
    """One tag's values into one view: what load_views does for each, in the same order."""
    scalars, keep_step, values, strides, lasts, envelope, widths = view
    series = values[tag]
    share = share_of(len(values))
    buckets = envelope.get(tag) if envelope is not None else None
    width, last, stride = widths.get(tag, 1), lasts[tag], strides.get(tag, 1)
    held = thinned = 0
    for step, value in zip(steps, column):
        if buckets is not None and (finite or not value - value):
            cell = buckets.get(step // width)
            if cell is None:  # a new bucket: widths may double and buckets merge
                envelop(scalars, envelope, tag, step, value)
                buckets, width = envelope[tag], widths.get(tag, 1)
            else:
                if value < cell[1]:
                    cell[0], cell[1] = step, value
                if value > cell[3]:
                    cell[2], cell[3] = step, value
        if step > last:
            last = step
        if step in series:  # a step written again: the last write wins
            series[step] = value
            continue
        if step % stride and step != keep_step:
            thinned += 1
            continue
        series[step] = value
        held += 1
        if len(series) > share:
            thin(scalars, tag, series, stride * 2, keep_step)
            stride = strides[tag]
    lasts[tag] = last
    scalars.held += held
    scalars.thinned += thinned


def _fold_new(tag: str, steps: List[int], column: Sequence[float], view: tuple, thin: Callable,
              share_of: Callable[[int], int]) -> None:
    """_fold_column for a view without envelopes and steps that rise past the tag's last (so
    none is written again): the values its stride keeps go in by slices, each slice up to the
    value that makes the series too long, which thins it (a longer stride) as one by one."""
    scalars, keep_step, values, strides, lasts, _, _ = view
    series = values[tag]
    share = share_of(len(values))
    stride = strides.get(tag, 1)
    kept = [(step, value) for step, value in zip(steps, column) if not step % stride or step == keep_step]
    held = 0
    while kept:
        take = kept[:max(share - len(series) + 1, 1)]  # the last of them, if any, makes it too long
        series.update(take)
        held += len(take)
        if len(series) <= share:
            break
        thin(scalars, tag, series, stride * 2, keep_step)
        stride = strides[tag]
        kept = [(step, value) for step, value in kept[len(take):] if not step % stride or step == keep_step]
    lasts[tag] = steps[-1]
    scalars.held += held
    scalars.thinned += len(steps) - held
