"""The engines' parking counters become each step's change (``parking/*``), summed over the serving cells."""

from __future__ import annotations

import pytest

from gyre.trainer.parking_metrics import ParkingMeter


def engine(parks=0.0, restores=0.0, transfer_s=0.0, transfer_bytes=0.0, parked=0.0, **more):
    return {"parks": parks, "restores": restores, "restore_transfer_s": transfer_s,
            "restore_bytes_from_host": transfer_bytes, "parked_sessions": parked, **more}


def test_a_step_logs_the_change_since_the_last_summed_over_cells():
    meter = ParkingMeter()
    first = meter.step({"cell1": engine(parks=3, restores=1, transfer_s=0.5, transfer_bytes=1e6, parked=2),
                        "cell2": engine(parks=1, parked=1)})
    assert first["parking/parks"] == 4 and first["parking/restores"] == 1 and first["parking/parked_sessions"] == 3
    assert first["parking/transfer_s"] == pytest.approx(0.5) and first["parking/transfer_bytes"] == 1e6
    second = meter.step({"cell1": engine(parks=5, restores=4, transfer_s=1.25, transfer_bytes=4e6, parked=0),
                         "cell2": engine(parks=1, parked=1)})
    assert second["parking/parks"] == 2 and second["parking/restores"] == 3
    assert second["parking/transfer_s"] == pytest.approx(0.75) and second["parking/transfer_bytes"] == 3e6
    assert second["parking/parked_sessions"] == 1  # a gauge: as it is now, not a change


def test_a_replaced_engine_counts_from_zero_and_a_silent_cell_adds_nothing():
    meter = ParkingMeter()
    meter.step({"cell1": engine(parks=10, restores=8)})
    assert meter.step({})["parking/parks"] == 0  # cell1 did not answer (training, or busy)
    replaced = meter.step({"cell1": engine(parks=2, restores=1)})  # a new process under the id
    assert replaced["parking/parks"] == 2 and replaced["parking/restores"] == 1


def test_engines_that_do_not_park_log_zeros():
    assert set(ParkingMeter().step({"cell0": {"running": 1.0}}).values()) == {0.0}


def test_the_routers_parked_seconds_are_logged_per_step_with_its_slot_share():
    from gyre.proxy.router import Occupancy

    meter = ParkingMeter()
    first = meter.routed(Occupancy(parked_s=4.0, held_s=1.0, lived_s=5.0))
    assert first == {"parking/parked_slot_s": 4.0, "parking/slot_share": pytest.approx(0.2)}
    assert meter.routed(Occupancy(parked_s=10.0))["parking/parked_slot_s"] == 6.0  # the step's change
    assert meter.routed(Occupancy(parked_s=1.5))["parking/parked_slot_s"] == 1.5  # a new router counts from zero
    assert meter.routed(Occupancy())["parking/slot_share"] == 1.0  # nothing measured: every session holds its slot
