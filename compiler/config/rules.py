"""Checks that involve more than one `CompilerConfig` property.

Single properties are checked by their `Prop`; the rules here reject combinations that
cannot work. Each rule's message names the property to change and what would be valid.

Rules:
- ``resources_used >= 0.25 * aipu_cores_used``: every core of an instance needs its quarter
  of the on-chip memory, so 4 cores need the whole chip (1.0)
  (`aipusim.isa.program.check_resources_used`, which ``model.json`` is checked with too).
- ``icrx_force`` (when not -1) is at most ``icrx_max_factor``.
- ``graph_cleaner_condition`` and ``graph_cleaner_node`` are set together or not at all:
  a condition is always evaluated on one node type.
- The memory sizes leave room after their reservations: ``l1_size_used > l1_size_reserved``,
  ``l2_size_used > l2_size_reserved + aipu_cores_used * l2_size_reserved_tasklist``,
  ``ddr_size_reserved < ddr_size_used <= ddr_size_max``.

Deliberately allowed:
- ``batch``/``cooperative``/``pipeline`` with ``aipu_cores_used = 1``: they degenerate to a
  single-core instance. Rejecting them would break sweeps over the core count.
- ``multiprocess``/``multithread`` with ``aipu_cores_used > 1``: the reference's Batch-4
  example (4 cores, resources 1.0, default mode) is exactly that; the compiler runs such an
  instance as a batch across its cores.
- Switches that are merely ineffective (``split_buffer_promotion`` without promotion,
  ``icrx_force`` with ``enable_icr = false``, a constraint above the size used).
"""

from __future__ import annotations

from collections.abc import Mapping

from aipusim.base.errors import ConfigError
from aipusim.isa.program import check_resources_used


def check_consistency(values: Mapping[str, object]) -> None:
    """Raise `ConfigError` for the first rule ``values`` (all properties) break."""
    check_resources_used(values["resources_used"], values["aipu_cores_used"])
    force, max_factor = values["icrx_force"], values["icrx_max_factor"]
    if force != -1 and force > max_factor:
        raise ConfigError(
            f"icrx_force must be -1 or at most icrx_max_factor ({max_factor}), not {force}"
        )
    condition, node = values["graph_cleaner_condition"], values["graph_cleaner_node"]
    if (condition is None) != (node is None):
        missing = "graph_cleaner_node" if node is None else "graph_cleaner_condition"
        raise ConfigError(
            f"{missing} must be set when the other of graph_cleaner_condition/"
            f"graph_cleaner_node is set, not null"
        )
    _check_sizes(values)


def _check_sizes(values: Mapping[str, object]) -> None:
    l1_reserved = values["l1_size_reserved"]
    if values["l1_size_used"] <= l1_reserved:
        raise ConfigError(
            f"l1_size_used must be larger than l1_size_reserved ({l1_reserved}), "
            f"not {values['l1_size_used']}"
        )
    l2_reserved = (
        values["l2_size_reserved"] + values["aipu_cores_used"] * values["l2_size_reserved_tasklist"]
    )
    if values["l2_size_used"] <= l2_reserved:
        raise ConfigError(
            f"l2_size_used must be larger than l2_size_reserved + aipu_cores_used * "
            f"l2_size_reserved_tasklist ({l2_reserved}), not {values['l2_size_used']}"
        )
    ddr_used, ddr_max = values["ddr_size_used"], values["ddr_size_max"]
    if ddr_used > ddr_max:
        raise ConfigError(f"ddr_size_used must be at most ddr_size_max ({ddr_max}), not {ddr_used}")
    if ddr_used <= values["ddr_size_reserved"]:
        raise ConfigError(
            f"ddr_size_used must be larger than ddr_size_reserved "
            f"({values['ddr_size_reserved']}), not {ddr_used}"
        )


__all__ = ["check_consistency"]
