"""The values an arch key may take: wide enough for any chip worth modelling, narrow enough
to refuse nonsense (``nan``, ``inf``, zero, negative, 1e-30 bytes per cycle).

A key's range follows from the unit in its name (house rule: units in names), so a new key
is covered by its suffix; the few counts and exponents without a unit suffix are named.

>>> range_of("ddr.peak_bw_gb_s")
Range(lo=0.01, hi=10000, unit='GB/s')
>>> range_of("l1.reserved_bytes").lo
0
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """``lo`` to ``hi`` inclusive, in ``unit``."""

    lo: float
    hi: float
    unit: str

    def text(self, integer: bool) -> str:
        """``an integer 1-65536 (bytes per cycle)`` / ``a number 0.01-10000 (GB/s)``."""
        kind = "an integer" if integer else "a number"
        return f"{kind} {_num(self.lo)}-{_num(self.hi)} ({self.unit})"


def _num(value: float) -> str:
    if float(value).is_integer() and abs(value) >= 1e6:
        exp = len(str(int(value))) - 1
        if int(value) == 10**exp:
            return f"1e{exp}"
        if int(value) & (int(value) - 1) == 0:
            return f"2^{int(value).bit_length() - 1}"
    return f"{value:g}" if not float(value).is_integer() else str(int(value))


#: (pattern on the key's last name, range); the first match wins.
_BY_NAME: tuple[tuple[str, Range], ...] = (
    (r"cores", Range(1, 8, "cores; core masks are 8 bits")),
    (r".*_hz", Range(1_000_000, 10**10, "Hz")),
    (r".*voltage_v", Range(0.3, 2.0, "V")),
    (r".*_gb_s", Range(0.01, 10_000, "GB/s")),
    (r".*_bytes_per_cycle", Range(1, 65_536, "bytes per cycle")),
    (r".*_address", Range(0, 2**64 - 1, "byte address")),
    (r".*_bytes(_per_core)?", Range(1, 2**48, "bytes")),
    (r".*_cycles(_per_task)?", Range(1, 10**6, "cycles")),
    (r".*_ns", Range(0, 10**6, "ns")),
    (r".*_us", Range(0, 10**6, "µs")),
    (r".*_pj(_per_byte)?", Range(1e-4, 1e6, "pJ")),
    (r".*_tops_per_w", Range(0.1, 10_000, "TOPS/W")),
    (r".*_fraction", Range(1e-3, 1, "fraction")),
    (r".*_share", Range(0, 1, "share of a core's gateable clock power")),
    (r".*_w(_per_mib|_per_channel)?", Range(1e-6, 1000, "W")),
    (r"encoding_.*_bits", Range(1, 1024, "bits per line-code block")),
    (r".*_bits", Range(1, 64, "bits")),
    (r"gt_s", Range(0.1, 256, "GT/s per lane")),
    (r"utilization_step", Range(1 / 64, 1, "fraction of the array")),
    (r"leakage_voltage_exponent", Range(0.5, 10, "exponent")),
    (r".*", Range(1, 2**20, "count")),
)

#: Keys that may be zero (a latency or a setup cost that a variant leaves out).
MAY_BE_ZERO = frozenset(
    {
        "reserved_bytes",
        "setup_cycles",
        "setup_us",
        "pre_frame_us",
        "post_frame_us",
        "latency_cycles",
        "latency_ns",
        "pipeline_latency_cycles",
        "token_signal_latency_cycles",
        "l1_virtual_address",
        "l1_core0_physical_address",
        "trace_line_cycles",
        "dispatch_cycles_per_task",
    }
)


def range_of(dotted: str) -> Range:
    """The valid range of the arch key ``dotted`` (``ddr.peak_bw_gb_s``)."""
    name = re.sub(r"\[\d+\]$", "", dotted.rsplit(".", 1)[-1])
    for pattern, found in _BY_NAME:
        if re.fullmatch(pattern, name):
            if name in MAY_BE_ZERO and found.lo > 0:
                return Range(0, found.hi, found.unit)
            return found
    raise AssertionError("the last pattern matches every name")


__all__ = ["MAY_BE_ZERO", "Range", "range_of"]
