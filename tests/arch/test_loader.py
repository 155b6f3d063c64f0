"""The arch loader: defaults, overrides, and every kind of bad description."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from aipusim.arch import DEFAULT_ARCH_PATH, load_arch
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
    for table, values in raw.items():
        part = getattr(arch, table)
        for key, value in values.items():
            if isinstance(value, list):
                assert len(getattr(part, key)) == len(value)
            else:
                assert getattr(part, key) == value, f"{table}.{key}"


def test_overrides_change_one_field_only() -> None:
    base = load_arch()
    arch = load_arch(overrides={"ddr.effective_bw_gb_s": 12, "mvm.weight_sets": 2})
    assert arch.ddr.effective_bw_gb_s == 12.0
    assert arch.mvm.weight_sets == 2
    assert arch.l2 == base.l2


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"ddr.effective_bw": 1.0},
            r"unknown key 'effective_bw'; did you mean 'effective_bw_gb_s'",
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
        ({"ddr.peak_bw_gb_s": True}, r"ddr.peak_bw_gb_s must be a number 0.01-10000 .*not True"),
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
    with pytest.raises(ArchError, match=r"chip.toml: invalid TOML: .*line 14"):
        load_arch(path)


def test_unknown_and_missing_keys(tmp_path: Path, raw_text: str) -> None:
    path = write(tmp_path, raw_text.replace("cores = 4", "cores = 4\ncorez = 5"))
    with pytest.raises(ArchError, match=r"chip: unknown key 'corez'; did you mean 'cores'"):
        load_arch(path)
    path = write(tmp_path, raw_text.replace("lanes = 64", ""))
    with pytest.raises(ArchError, match=r"dpu.lanes is missing"):
        load_arch(path)


def test_vf_points_pick_the_lowest_reaching_voltage() -> None:
    clock = load_arch().clock
    assert clock.voltage_at(800_000_000) == 0.80
    assert clock.voltage_at(500_000_000) == 0.72
    assert clock.voltage_at(20_000_000) == 0.68


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("ddr.effective_bw_gb_s", float("nan"), "nan"),
        ("ddr.effective_bw_gb_s", float("inf"), "inf"),
        ("ddr.effective_bw_gb_s", 0.0, "0"),
        ("ddr.effective_bw_gb_s", -24.0, "-24"),
        ("ddr.effective_bw_gb_s", 1e-30, "1e-30"),
        ("ddr.effective_bw_gb_s", 1e30, "1e+30"),
        ("mvm.weight_load_bw_bytes_per_cycle", 1e-30, "1e-30"),
        ("l2.bw_bytes_per_cycle", 0, "0"),
        ("clock.nominal_voltage_v", 50.0, "50"),
        ("energy.ddr_seq_pj_per_byte", -1.0, "-1"),
        ("chip.cores", 9, "9"),
        ("l1.size_bytes", 10**30, str(10**30)),
    ],
)
def test_nonsense_values_are_refused_naming_the_valid_range(
    key: str, value: object, shown: str
) -> None:
    from aipusim.arch.ranges import range_of

    valid = range_of(key)
    with pytest.raises(ArchError) as err:
        load_arch(overrides={key: value})
    message = str(err.value)
    assert message.startswith(f"{key} must be ") and message.endswith(f", not {shown}")
    assert f"({valid.unit})" in message


def test_every_bundled_value_lies_in_its_range() -> None:
    from aipusim.arch.loader import _numbers
    from aipusim.arch.ranges import range_of

    for _name, dotted, value in _numbers(load_arch(), ""):
        valid = range_of(dotted)
        assert valid.lo <= value <= valid.hi, dotted
