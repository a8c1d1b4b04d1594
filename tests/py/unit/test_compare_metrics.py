"""compare_metrics' rules on series whose answer is known: the tolerance, the noise of long
runs, the too-short runs, and runs thinned onto different steps."""
import math
import random

from twgrpo.report.compare_metrics import aligned, judge, tolerance_of


def noisy(steps, offset=0.0, sigma=0.05, seed=1, stride=1):
    rng = random.Random(seed)
    return [(s, math.tanh(s / 300) + offset + rng.gauss(0, sigma)) for s in range(1, steps + 1, stride)]


def test_two_seeds_of_one_noisy_curve_agree():
    verdict = judge("critic/score/mean", noisy(1000, seed=1), noisy(1000, seed=2), 0.05)
    assert verdict["verdict"] == "same" and verdict["window"] == 100


def test_an_offset_beyond_three_times_the_noise_differs_and_within_it_is_noise():
    far = judge("critic/score/mean", noisy(1000, 0.5, seed=1), noisy(1000, seed=2), 0.01)
    near = judge("critic/score/mean", noisy(1000, 0.1, seed=1), noisy(1000, seed=2), 0.01)
    assert far["verdict"] == "differs" and near["verdict"] == "noise"
    assert far["difference"] > 3 * far["noise"] > near["difference"]


def test_two_steps_that_move_are_too_few_to_judge_and_two_that_stand_still_differ():
    moving = judge("response_length/mean", [(1, 58.25), (2, 42.125)], [(1, 62.0), (2, 58.25)], 0.05)
    still = judge("critic/score/mean", [(1, 0.5), (2, 0.5)], [(1, 0.0), (2, 0.0)], 0.05)
    lone = judge("critic/score/mean", [(1, 0.5)], [(1, 0.0)], 0.05)
    assert (moving["verdict"], still["verdict"], lone["verdict"]) == ("few", "differs", "few")


def test_timing_scalars_are_set_side_by_side_not_judged():
    assert judge("timing_s/step", [(1, 1.0), (2, 1.0)], [(1, 9.0), (2, 9.0)], 0.05)["verdict"] == "not judged"


def test_runs_thinned_onto_different_steps_are_compared_on_the_line_between_points():
    a = [(s, float(s)) for s in range(0, 1000, 7)]
    b = [(s, float(s)) for s in range(0, 1000, 11)]
    pairs = aligned(a, b)
    assert len(pairs) > 100 and all(abs(x - y) < 1e-9 for _, x, y in pairs)
    assert judge("actor/lr", a, b, 0.0)["verdict"] == "same"


def test_non_finite_points_are_left_out_of_the_comparison():
    a = [(1, 1.0), (2, float("nan")), (3, 1.0)]
    verdict = judge("actor/pg_loss", a, [(1, 1.0), (2, 1.0), (3, 1.0)], 0.05)
    assert verdict["verdict"] == "same" and verdict["common_steps"] == 2


def test_the_tolerance_knob_takes_a_fraction_or_a_percentage():
    assert tolerance_of("") == 0.05 and tolerance_of("0.1") == 0.1 and tolerance_of("12.5%") == 0.125
    for bad in ("abc", "nan", "inf", "-1", "10", "5%%"):
        try:
            tolerance_of(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
