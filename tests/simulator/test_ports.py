"""A core's L1 port group: hand-computed bookings (`aipusim.simulator.ports`)."""

from __future__ import annotations

from aipusim.simulator.ports import PortGroup


def test_up_to_one_requester_per_port_is_never_squeezed() -> None:
    g = PortGroup(2, 64.0, requesters=4)
    assert g.book(0, 0, 100, 6400) == 100  # 64 B/cycle
    assert g.book(1, 10, 100, 6400) == 110  # a second 64: both ports full, still fits


def test_a_third_requester_gets_what_the_two_leave() -> None:
    g = PortGroup(2, 64.0, requesters=4)
    g.book(0, 0, 100, 4000)  # 40 B/cycle until 100
    g.book(1, 0, 200, 8000)  # 40 B/cycle until 200
    # 48 B/cycle wanted for 50 cycles (2400 bytes): 128 - 80 = 48 are left: not squeezed
    assert g.book(2, 0, 50, 2400) == 50
    # the same requester again from 50, now wanting 64 B/cycle for 50 cycles (3200 bytes):
    # 48 B/cycle until 100 (2400 bytes), then 64 B/cycle for the last 800 bytes: 12.5 more
    assert g.book(2, 50, 50, 3200) == 113


def test_full_ports_hold_a_booking_until_one_ends() -> None:
    g = PortGroup(2, 64.0, requesters=3)
    g.book(0, 0, 100, 6400)
    g.book(1, 0, 100, 6400)
    # nothing left until 100, then its own 64 B/cycle: 3200 bytes in 50 cycles
    assert g.book(2, 0, 50, 3200) == 150


def test_bookings_that_ended_do_not_count() -> None:
    g = PortGroup(1, 64.0, requesters=3)
    g.book(0, 0, 10, 640)
    assert g.book(1, 10, 10, 640) == 20  # requester 0 ended at 10
    assert g.book(2, 15, 10, 640) == 30  # requester 1 runs until 20, then the port is free
