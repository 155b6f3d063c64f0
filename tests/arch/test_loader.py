"""The arch loader: defaults, overrides, and every kind of bad description."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from aipusim.arch import DEFAULT_ARCH_PATH, load_arch
from aipusim.arch.loader import _numbers, arch_value
from aipusim.arch.ranges import range_of
from aipusim.base.errors import ArchError


@pytest.fixture
def raw_text() -> str:
    return DEFAULT_ARCH_PATH.read_text()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "chip.toml"
    path.write_text(text)
    return path


def test_default_chip_matches_published_figures() -> None:
    arch = load_arch()
    assert arch.chip.cores == 4
    assert arch.mvm.macs_per_cycle == 32_768
    assert arch.mvm.weight_bytes == 1 << 20
    assert arch.peak_tops == pytest.approx(209.7152)
    assert arch.l1.budget_bytes == 4 * 2**20 - 512 * 2**10


def test_every_number_of_the_toml_reaches_the_dataclasses(raw_text: str) -> None:
    raw = tomllib.loads(raw_text)
    arch = load_arch()
    ranges = raw.pop("ranges")
    assert {r.key: [r.low, r.high] for r in arch.ranges} == ranges
    for table, values in raw.items():
        part = getattr(arch, table)
        for key, value in values.items():
            if isinstance(value, list):
                assert len(getattr(part, key)) == len(value)
            else:
                assert getattr(part, key) == value, f"{table}.{key}"


def test_overrides_change_one_field_only() -> None:
    base = load_arch()
    arch = load_arch(overrides={"ddr.data_rate_mt_s": 3200, "mvm.weight_sets": 2})
    assert arch.ddr.data_rate_mt_s == 3200
    assert arch.mvm.weight_sets == 2
    assert arch.l2 == base.l2
    # an item of an array of tables by its index
    low = load_arch(overrides={"clock.vf_points[3].voltage_v": 0.64})
    assert low.clock.vf_points[3].voltage_v == 0.64
    assert low.clock.vf_points[1] == base.clock.vf_points[1]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"ddr.data_rate": 1.0},
            r"unknown key 'data_rate'; did you mean 'data_rate_mt_s'",
        ),
        ({"clock.vf_points[9].voltage_v": 0.7}, r"vf_points has no item 9"),
        ({"ranges.l1.latency_cycles": [1, 2]}, r"there is no table 'ranges'"),
        (
            {"clock.vf_points[3].voltage_v": 0.7},
            r"vf_points must not need more voltage for a lower clock, not 0.7 V up to 200 MHz "
            r"and 0.68 V up to 400 MHz",
        ),
        ({"dram.latency_ns": 1}, r"there is no table 'dram'"),
        (
            {"l1.size_bytes": "big"},
            r"l1.size_bytes must be an integer 1-2\^48 \(bytes\), not 'big'",
        ),
        ({"l1.reserved_bytes": 5 * 2**20}, r"l1.reserved_bytes must be smaller than l1.size_bytes"),
        ({"mvm.banks": 8}, r"mvm.banks x mvm.bank_cols must equal mvm.cols \(512\), not 8 x 32"),
        ({"dpu.lanes": 0}, r"dpu.lanes must be an integer 1-2\^20 \(count\), not 0"),
        ({"dma.channels_per_core": 3}, r"dma.channels_per_core must be 1 or 2, not 3"),
        ({"clock.default_hz": 900_000_000}, r"clock.default_hz must lie in"),
        ({"l2.size_bytes": 4 * 2**20}, r"l2.size_bytes must exceed l2.reserved_bytes"),
        ({"ddr.t_rcd_ns": True}, r"ddr.t_rcd_ns must be a number 0-1e6 .*not True"),
        ({"host_link.gt_s": True}, r"host_link.gt_s must be a number 0.1-256 .*not True"),
    ],
)
def test_bad_values_are_named(override: dict[str, object], message: str) -> None:
    with pytest.raises(ArchError, match=message):
        load_arch(overrides=override)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ArchError, match=r"must be an existing TOML file, not '.*nope.toml'"):
        load_arch(tmp_path / "nope.toml")


def test_malformed_toml_gives_file_and_line(tmp_path: Path, raw_text: str) -> None:
    path = write(tmp_path, raw_text.replace("cores = 4", "cores = = 4"))
    line = (
        raw_text.splitlines().index(
            "cores = 4                       # (C) four identical AIPU cores"
        )
        + 1
    )
    with pytest.raises(ArchError, match=rf"chip.toml: invalid TOML: .*line {line}"):
        load_arch(path)


def test_unknown_and_missing_keys(tmp_path: Path, raw_text: str) -> None:
    path = write(tmp_path, raw_text.replace("cores = 4", "cores = 4\ncorez = 5"))
    with pytest.raises(ArchError, match=r"chip: unknown key 'corez'; did you mean 'cores'"):
        load_arch(path)
    path = write(tmp_path, re.sub(r"(?m)^lanes = \d+", "", raw_text, count=1))
    with pytest.raises(ArchError, match=r"dpu.lanes is missing"):
        load_arch(path)


def test_vf_points_pick_the_lowest_reaching_voltage() -> None:
    clock = load_arch().clock
    assert clock.voltage_at(800_000_000) == 0.85
    assert clock.voltage_at(700_000_000) == 0.85
    assert clock.voltage_at(500_000_000) == clock.vf_points[1].voltage_v  # 600 MHz point
    assert clock.voltage_at(500_000_000) < 0.85
    assert clock.voltage_at(20_000_000) == 0.68


def _inferred_keys(text: str) -> set[str]:
    """Dotted keys of the lines of the arch file tagged (I), read from the text."""
    keys: set[str] = set()
    table, counts = "", {}
    for line in text.splitlines():
        head = re.match(r"^\[\[(.+)\]\]", line) or re.match(r"^\[(.+)\]", line)
        if head:
            name = head.group(1)
            if line.startswith("[["):
                counts[name] = counts.get(name, -1) + 1
                name = f"{name}[{counts[name]}]"
            table = name
            continue
        m = re.match(r"^(\w+)\s*=\s*[^#]+#\s*\(I\)", line)
        if m and table != "ranges":
            keys.add(f"{table}.{m.group(1)}")
    return keys


def test_every_inferred_number_has_a_plausible_range_holding_it(raw_text: str) -> None:
    arch = load_arch()
    ranges = {r.key: r for r in arch.ranges}
    inferred = _inferred_keys(raw_text)
    assert len(inferred) > 50
    assert inferred == set(ranges), "an (I) number without a range, or a range of no (I) number"
    for key, r in ranges.items():
        assert r.low <= arch_value(arch, key) <= r.high, key
        # A study moves the number to both ends: each must be a value the loader accepts.
        valid = range_of(key)
        assert valid.lo <= r.low and r.high <= valid.hi, key


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('"l1.latency_cycles" = [4, 1]', r"ranges.l1.latency_cycles must be \[low, high\]"),
        ('"l1.latency_cycles" = [1.5, 4]', r"must be whole numbers"),
        ('"chip.name" = [1, 2]', r"'chip.name' must name a number of the arch"),
        ('"l1.nope" = [1, 2]', r"unknown key 'nope'"),
    ],
)
def test_bad_ranges_are_named(tmp_path: Path, raw_text: str, table: str, message: str) -> None:
    path = write(tmp_path, raw_text.replace("[ranges]\n", f"[ranges]\n{table}\n", 1))
    path.write_text(re.sub(r'\n"l1.latency_cycles" = \[1, 8\]', "", path.read_text()))
    with pytest.raises(ArchError, match=message):
        load_arch(path)


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("host_link.gt_s", float("nan"), "nan"),
        ("host_link.gt_s", float("inf"), "inf"),
        ("host_link.gt_s", 0.0, "0"),
        ("host_link.gt_s", -24.0, "-24"),
        ("host_link.gt_s", 1e-30, "1e-30"),
        ("host_link.gt_s", 1e30, "1e+30"),
        ("mvm.weight_load_bw_bytes_per_cycle", 1e-30, "1e-30"),
        ("l2.port_bytes_per_cycle", 0, "0"),
        ("clock.nominal_voltage_v", 50.0, "50"),
        ("energy.ddr_seq_pj_per_byte", -1.0, "-1"),
        ("chip.cores", 9, "9"),
        ("l1.size_bytes", 10**30, str(10**30)),
    ],
)
def test_nonsense_values_are_refused_naming_the_valid_range(
    key: str, value: object, shown: str
) -> None:
    valid = range_of(key)
    with pytest.raises(ArchError) as err:
        load_arch(overrides={key: value})
    message = str(err.value)
    assert message.startswith(f"{key} must be ") and message.endswith(f", not {shown}")
    assert f"({valid.unit})" in message


def test_every_bundled_value_lies_in_its_range() -> None:
    for _name, dotted, value in _numbers(load_arch(), ""):
        valid = range_of(dotted)
        assert valid.lo <= value <= valid.hi, dotted
