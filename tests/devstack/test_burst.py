"""A burst: a provider's backlog queued while process is down, then drained, every guarantee
held, and the drain judged against the capacity model's prediction for this stack."""

from __future__ import annotations

import io
import re

import pytest

from costmodel.measurement import MIX, Measurement, embedded_drain_seconds, load_measurement
from devstack.drain import Drained, InFlight
from firedrill.delivery import DeliveryLog
from firedrill.run import BURST_PREDICTION_FACTOR, DrillOptions, burst_check, run_embedded


def test_a_burst_is_all_queued_before_process_takes_any_then_drained_with_every_guarantee() -> None:
    # Given the embedded stack, its process down while providers deliver 150 deliveries
    out, err = io.StringIO(), io.StringIO()

    # When the burst drill queues them all, then lets process drain them
    exit_code = run_embedded(DrillOptions(deliveries=150, burst=True), out, err)

    # Then every guarantee held, and the whole backlog was in the queue at once: process took
    # nothing while it was down
    report = out.getvalue()
    assert exit_code == 0, report
    assert "FAIL" not in report, report
    line = re.search(r"PASS  a burst drains.*?(\d+) queued at once by (\d+) stories", report)
    assert line is not None, report
    accepted = re.search(r"(\d+) accepted, all processed", report)
    assert accepted is not None, report
    assert int(line.group(1)) >= int(accepted.group(1))


def drained(seconds: float, ok: bool = True) -> Drained:
    return Drained(ok, seconds, 600.0, 100, InFlight())


@pytest.mark.parametrize(
    ("seconds", "passes"),
    [
        (100.0, True),
        (100.0 * BURST_PREDICTION_FACTOR * 0.99, True),
        (100.0 * BURST_PREDICTION_FACTOR * 1.01, False),
        (100.0 / BURST_PREDICTION_FACTOR / 1.01, False),
    ],
)
def test_a_burst_passes_only_within_the_stated_factor_of_the_prediction(
    seconds: float, passes: bool
) -> None:
    # Given a model predicting 100 s for the burst
    options = DrillOptions(deliveries=10, burst=True, predict_drain=lambda n, pollers: 100.0)

    # When the drain took `seconds`
    check = burst_check(options, [], DeliveryLog(), 1000, drained(seconds), 4)

    # Then the check passes only within the factor, either way, and says both times
    assert check is not None
    assert check.ok is passes
    assert f"drained in {seconds:.0f} s" in check.detail
    assert "predicts 100 s" in check.detail


def test_a_burst_that_did_not_drain_fails_whatever_the_model_says() -> None:
    options = DrillOptions(deliveries=10, burst=True, predict_drain=lambda n, pollers: 100.0)
    check = burst_check(options, [], DeliveryLog(), 1000, drained(100.0, ok=False), 4)
    assert check is not None
    assert check.ok is False


def test_the_prediction_is_the_measured_process_time_per_delivery_over_the_pollers() -> None:
    # Given the committed measurement of the drill mix
    measurement = load_measurement()
    sample = measurement.scenarios()[MIX]
    per_delivery = sample.functions["process"]["billed_ms"] / 1000 / sample.events

    # When the drain of 1,000 deliveries is predicted for 4 pollers, then 8
    four = embedded_drain_seconds(1000, 4, measurement)
    eight = embedded_drain_seconds(1000, 8, measurement)

    # Then it is that time for each delivery, spread over the pollers
    assert four == pytest.approx(1000 * per_delivery / 4)
    assert eight == pytest.approx(four / 2)
    # And a process measured a second slower in all makes the drain longer by its share
    slower = Measurement.from_json(measurement.to_json())
    assert slower.mix is not None
    slower.mix.functions["process"]["billed_ms"] += 1000
    assert embedded_drain_seconds(1000, 4, slower) == pytest.approx(
        four + 1000 * 1.0 / sample.events / 4
    )
