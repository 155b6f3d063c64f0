"""Pass 10, emit: the ``compiled_model/`` folder (reference ``compiler-cli.txt``).

- ``core<N>.tasklist``: each logical core's tasks (`aipusim.isa.tasklist.write_tasklist`);
- ``model.json``: the `aipusim.isa.program.Program` (mode, cores, runtime knobs, I/O bytes);
  its ``extra`` carries ``model_id`` (a UUID unless given), the CRC32 of every other file
  (``crc32``, checked by `verify_crcs` when a compiled model is loaded), memory high-water
  marks and the INIT-before-FRAME rule of the tasklists;
- ``manifest.json``: quantization of the inputs and outputs (scale, zero point, dtype) and the
  sizes of the quantized constants;
- ``pool_l2_const.bin``: the constant blobs kept in L2, at their L2 addresses;
- ``constants.bin``: the constants image (`memory_map.constants_image`): every weight
  block, parameter record and table the tasks read, loaded into DDR at the address
  ``model.json`` ``memory.constants`` gives; the memory map beside it names the I/O
  buffers, the layer outputs and every buffer;
- ``reference/``: the integer program the tasklists compute (the ``quantized_model/``
  format), which the functional check runs the int8 reference executor on;
- ``report.json``: per layer the unit, tiles, weight sets, ICR factor, what its tasks
  cost by the one cost model (busy cycles per unit, energy, bytes per link) and where its
  tensors lie (``placement``: bytes per pool, spills with their reason, refills); the model's
  bytes per frame over DDR, L2 and PCIe (``bytes_per_frame``, the keys of ``simulate``'s);
  high-water marks per pool; task and token counts; for a decode graph ``kv_cache``: its
  KV cache's pool and tensors and the bytes per token of weights, KV read, KV write and
  activations (`_kv_cache`).

`emit_files` returns the files as bytes, or writes each into a folder as soon as it is made
(the driver's folder, swapped into place atomically with the rest of the output); `emit`
writes them into a folder directly.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from aipusim.base.errors import ConfigError
from aipusim.compiler.backend.common.layout import Split
from aipusim.compiler.backend.emit.memory_map import constant_blob, constants_image, memory_map
from aipusim.compiler.backend.estimate.costs import frame_bytes
from aipusim.compiler.backend.lower.layer import ConstKind, LayerPlan, LayerUnit, activation_bytes
from aipusim.compiler.backend.memplan.buffers import CONSTANT_KINDS
from aipusim.compiler.backend.memplan.placement import layer_placement, placement_summary
from aipusim.compiler.backend.tile.regions import part_range
from aipusim.compiler.decoder import append_in_place, cache_state
from aipusim.compiler.quant.artifacts import quantized_model_files
from aipusim.isa.image import CONSTANTS_FILE, MemoryMap
from aipusim.isa.program import (
    PROGRAM_FILE,
    Instance,
    Program,
    read_program,
    tasklist_file_name,
)
from aipusim.isa.program import verify_crcs as check_file_crcs
from aipusim.isa.tasklist import Tasklist, encode_tasklist
from aipusim.isa.tasks import (
    Barrier,
    DmaCopy,
    DpuKind,
    DpuOp,
    HostTransfer,
    Phase,
    Pool,
    WeightLoad,
)

#: Folder of the compiled model inside the output directory.
COMPILED_DIR = "compiled_model"
REPORT_FILE = "report.json"
MANIFEST_FILE = "manifest.json"
L2_CONST_FILE = "pool_l2_const.bin"
#: Folder (inside ``compiled_model/``) of the integer program the tasklists compute.
REFERENCE_DIR = "reference"
#: Version of the report.json layout.
REPORT_VERSION = 1


def _mapping_choice(layer: LayerPlan) -> dict[str, Any]:
    """An activation x activation MatMul's costed mappings (`attention.choose`), if any."""
    choice = layer.matmul_choice
    return {"matmul_choice": choice.as_dict()} if choice is not None else {}


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=False) + "\n").encode("utf-8")


def crc32(data: bytes) -> int:
    """CRC-32 (zlib polynomial) of ``data``."""
    return zlib.crc32(data) & 0xFFFFFFFF


def _layer_traffic(state: Any) -> dict[str, dict[str, int]]:
    """Bytes each layer moves per frame, by pool and direction (from its tasks)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for core_tasks in state.schedule.tasks.values():
        for t in core_tasks:
            if t.phase is not Phase.FRAME:
                continue
            row = out[t.layer]
            if isinstance(t, DmaCopy):
                row[f"{t.src_pool.value}_read"] += t.bytes
                row[f"{t.dst_pool.value}_write"] += t.bytes
            elif isinstance(t, WeightLoad):
                row["l1_read"] += t.bytes
                row["imc_write"] += t.bytes
            elif isinstance(t, HostTransfer):
                row[f"{t.pool.value}_{'write' if t.direction.value == 'h2d' else 'read'}"] += (
                    t.bytes
                )
    return out


def _frame_bytes(state: Any) -> dict[str, float]:
    """The estimated bytes per frame (`estimate.frame_bytes`), host transfers included."""
    cost, per_start = state.target.cost, state.target.frames_per_start
    inst = _instance(state)
    host = [
        cost.host_transfer("h2d", inst.input_pool, inst.input_bytes * per_start),
        cost.host_transfer("d2h", inst.output_pool, inst.output_bytes * per_start),
    ]
    return frame_bytes(state.estimates, state.other_estimates, host, per_start)


def _cooperative(state: Any, li: int, layer: Any) -> dict[str, Any]:
    """Cooperative mode: how the layer is split over the cores (and the cost model's
    cycles per core of each split it weighed), and where each output lives: ``l1`` (a
    copy per core, exchanged core to core) or the shared pool it fell back to."""
    lay = state.layout
    if not lay.cooperative:
        return {}
    outputs = {}
    for out in layer.outputs:
        buf = state.memory.buffer_of(out, -1)
        if buf is None or buf.pool is None:
            continue  # a fused intermediate: tiles only
        fell_back = out in lay.l1_exchange and buf.pool is not Pool.L1
        outputs[out] = buf.pool.value + (" (l1 full)" if fell_back else "")
    return {
        "split": {"choice": lay.splits.get(li, Split.NONE).value,
                  "estimated_cycles_per_core": lay.split_cycles.get(li, {})},
        "output_pool": outputs,
    }  # fmt: skip


def _kv_cache(state: Any) -> dict[str, Any]:
    """The ``kv_cache`` section of a decode graph's report (none for other graphs): where
    its cache lies and the bytes one step (one token per sequence) moves per kind.

    ``bytes_per_token``: ``weights``, the weight bytes the MVM layers read (streamed from
    DDR unless ``weights_resident``); ``kv_read``, the past the step reads; ``kv_write``,
    the rows it appends (present minus past); ``activations``, every other tensor the
    layers write and the non-cache inputs. ``present_written_bytes`` is what the program
    writes into the present buffers: ``kv_write`` when every pair grows in place (its
    ``in_place``: one buffer, the new rows stored after the past,
    `aipusim.compiler.decoder.append_in_place`), else the whole grown cache of the pairs
    that do not (the past copied with the new rows: several sequences in one graph)."""
    g = state.graph
    cache = cache_state(g)
    if not cache:
        return {}
    kv = set(cache) | set(cache.values())
    grown = append_in_place(g)
    tensors = []
    for past, present in sorted(cache.items()):
        buf_past = state.memory.buffer_of(past)
        buf_present = state.memory.buffer_of(present)
        tensors.append({
            "past": past, "present": present,
            "past_bytes": activation_bytes(g, past), "present_bytes": activation_bytes(g, present),
            "past_pool": buf_past.pool.value if buf_past is not None else None,
            "present_pool": buf_present.pool.value if buf_present is not None else None,
            "in_place": past in grown,
        })  # fmt: skip
    weights = sum(layer.weight_bytes for layer in state.layers if layer.unit is LayerUnit.MVM)
    written = {
        o
        for layer in state.layers
        if layer.unit is not LayerUnit.ALIAS
        for o in layer.outputs
        if o not in kv
    }
    activations = sum(activation_bytes(g, o) for o in written) + sum(
        activation_bytes(g, i) for i in g.inputs if i not in kv
    )
    kv_read = sum(t["past_bytes"] for t in tensors)
    present_bytes = sum(t["present_bytes"] for t in tensors)
    present_written = sum(t["present_bytes"] - t["past_bytes"] * t["in_place"] for t in tensors)
    return {
        "pool": "ddr",
        "past_tokens": int(g.shape(next(iter(cache)))[2]),
        "weights_resident": bool(state.schedule.resident_weights),
        "bytes_per_token": {
            "weights": weights, "kv_read": kv_read, "kv_write": present_bytes - kv_read,
            "activations": activations,
        },
        "present_written_bytes": present_written,
        "tensors": tensors,
        "cores": _decode_cores(state),
    }  # fmt: skip


def _decode_cores(state: Any) -> dict[str, Any]:
    """How a decode step's work is shared by the instance's cores, read from the emitted
    frame tasks and the core layout (lists: one entry per core).

    ``weight_bytes``: the weights each core writes into its IMC per token (its share of
    the streamed weights); ``mvm_columns``: per MVM layer with constant weights, the output
    columns (attention projections' heads x head size, FFN gate/up columns) each core
    computes (a split by input channels: all of them); ``mvm_input_channels``: per MVM
    layer split by input channels (tensor parallel, `Split.INPUTS`), the input channels
    (rows of the weights) each core sums over; ``product_heads``: per product of two
    activations (attention's Q.Kt and P.V), the heads each core computes;
    ``layout_copy_bytes``: the bytes each core moves for layout layers (the KV cache's
    expansions and transposes: `CoreLayout.shared_copies`); ``exchange_bytes``: per layer
    split over the cores, the bytes of its output its cores pass on to one another
    (multicast into the others' L1, or stored into L2/DDR where the others read it): the
    cooperative exchange of the layer's parts (a split by input channels: its int32
    partial sums, into the first core); ``bytes_per_token_by_split``: per split kind, the
    bytes its layers' tasks move per token, by pool and direction.
    """
    lay, cores = state.layout, state.layout.cores
    weight_bytes = [0] * cores
    copy_bytes = [0] * cores
    heads: dict[str, list[int]] = {}
    exchange: dict[str, int] = defaultdict(int)
    unit_of = {layer.name: layer.unit for layer in state.layers}
    split = {
        state.layers[li].name
        for li, how in lay.splits.items()
        if lay.cooperative and how is not Split.NONE
    }
    for core, tasks in sorted(state.schedule.tasks.items()):
        for t in tasks:
            if t.phase is not Phase.FRAME:
                continue
            if isinstance(t, WeightLoad) and unit_of.get(t.layer) is LayerUnit.MVM:
                weight_bytes[core] += t.bytes
            elif (
                isinstance(t, DmaCopy)
                and t.layer in split
                and (t.dst_core_mask or (t.src_pool is Pool.L1 and t.dst_pool is not Pool.L1))
            ):
                exchange[t.layer] += t.bytes
            elif isinstance(t, DmaCopy) and unit_of.get(t.layer) is LayerUnit.DMA:
                copy_bytes[core] += t.bytes
            elif isinstance(t, DpuOp) and t.kind is DpuKind.MATMUL:
                heads.setdefault(t.layer, [0] * cores)[core] += t.outer
    columns: dict[str, list[int]] = {}
    inputs: dict[str, list[int]] = {}
    by_split: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    traffic = _layer_traffic(state)
    for li, layer in enumerate(state.layers):
        how = lay.splits.get(li, Split.NONE) if lay.cooperative else Split.NONE
        for pool, nbytes in traffic.get(layer.name, {}).items():
            by_split[how.value][pool] += nbytes
    for li, layer in enumerate(state.layers):
        geo = layer.geometry
        if layer.unit is not LayerUnit.MVM or geo is None:
            continue
        split = lay.splits.get(li, Split.NONE) if lay.cooperative else Split.NONE
        # rows, or a batch: every core whole heads / all columns (of its rows, its frame);
        # not split: core 0 alone, or a pipeline's stage core
        tiling = state.tilings[li]
        owner = lay.core_of_group.get(tiling.group, 0) if tiling is not None else 0
        every = lay.replicate or split is Split.ROWS
        alone = [1 if every or c == owner else 0 for c in range(cores)]
        if layer.runtime is not None:
            heads[layer.name] = [layer.runtime.heads * a for a in alone]
        elif split is Split.CHANNELS:
            spans = [part_range(geo.cout, cores, c) for c in range(cores)]
            columns[layer.name] = [hi - lo for lo, hi in spans]
        elif split is Split.INPUTS:  # every column, summed over the core's input channels
            columns[layer.name] = [geo.cout] * cores
            spans = [part_range(geo.cin, cores, c) for c in range(cores)]
            inputs[layer.name] = [hi - lo for lo, hi in spans]
        else:
            columns[layer.name] = [geo.cout * a for a in alone]
    return {
        "count": cores,
        "weight_bytes": weight_bytes,
        "mvm_columns": columns,
        "mvm_input_channels": inputs,
        "bytes_per_token_by_split": {
            k: dict(sorted(v.items())) for k, v in sorted(by_split.items())
        },
        "product_heads": dict(sorted(heads.items())),
        "layout_copy_bytes": copy_bytes,
        "exchange_bytes": dict(exchange),
    }


def build_report(state: Any, pass_seconds: dict[str, float] | None = None) -> dict[str, Any]:
    """The content of ``compiled_model/report.json`` (``state``: an `ir.Estimated`)."""
    traffic = _layer_traffic(state)
    layers = []
    total_cycles = 0
    for li, (layer, est, plan, t, mapping) in enumerate(
        zip(state.layers, state.estimates, state.planned, state.tilings, state.mappings,
            strict=True)
    ):  # fmt: skip
        imc = mapping.whole if mapping is not None else None
        total_cycles += plan.cycles
        layers.append(
            {
                "name": layer.name,
                "op": layer.op,
                "unit": layer.unit.value,
                "fused": list(layer.fused),
                "group": t.group if t else None,
                "tiles": {"h": t.h_tiles, "oc": t.oc_tiles} if t else None,
                "weight_sets": imc.weight_sets if imc else 0,
                "row_blocks": imc.row_blocks if imc else 0,
                "col_blocks": imc.col_blocks if imc else 0,
                "icr": imc.icr if imc else 1,
                "swicr": bool(imc.swicr) if imc else False,
                "cols_used": imc.cols_used_max if imc else 0,
                "macs": layer.macs,
                "array_macs": est.macs,
                "weight_bytes": imc.weight_bytes if imc else layer.weight_bytes,
                # "resident: ..." (loaded once in INIT) or "streamed: ..." (every frame), why
                "weights": str(state.schedule.weight_residency.get(layer.name, "")),
                # planned on one core: its unit's work and the weight traffic not hidden
                "estimated_cycles": plan.cycles,
                "estimated_compute_cycles": plan.compute_cycles,
                "estimated_weight_load_cycles": plan.weight_load_cycles,
                "estimated_energy_pj": round(est.energy_pj, 1),
                "bytes": dict(sorted(traffic.get(layer.name, {}).items())),
                "traffic": est.traffic.as_dict(),
                "scheduled_cycles_by_unit": est.by_unit(),
                # the tensors it writes by pool, those left below L1 and why, and those it
                # reads back from L2/DDR (`placement.layer_placement`)
                "placement": layer_placement(state.memory, layer, state.target.knobs),
                **_mapping_choice(layer),
                **_cooperative(state, li, layer),
            }
        )
    sched = state.schedule
    target = state.target
    freq = target.knobs.frequency
    return {
        "format": "aipusim-compile-report",
        "version": REPORT_VERSION,
        "model": state.graph.name,
        "multicore_mode": str(target.mode),
        "effective_mode": str(target.effective_mode),
        "aipu_cores_used": target.cores,
        "resources_used": target.knobs.resources_used,
        "frequency_hz": freq,
        # the layers' planned cycles added up: one core's frame when layers do not overlap
        "estimated_cycles_per_frame_one_core": total_cycles,
        "estimated_latency_us_one_core": round(total_cycles / freq * 1e6, 3),
        "init_cycles_by_unit": state.init.by_unit(),
        "macs": sum(layer.macs for layer in state.layers),
        "resident_weights": sched.resident_weights,
        "tasks_per_core": {str(c): len(t) for c, t in sched.tasks.items()},
        "local_tokens_used": {str(c): n for c, n in sched.local_tokens_used.items()},
        "global_tokens_used": sched.global_tokens_used,
        # the barriers every core meets in a frame (cooperative: after the input transfer
        # and where tokens cannot order the cores, `barriers.choose_barriers`)
        "barriers_per_frame": sum(
            isinstance(t, Barrier) and t.phase is Phase.FRAME for t in sched.tasks.get(0, [])
        ),
        "bytes_per_frame": _frame_bytes(state),
        "memory": state.memory.high_water(),
        "placement": placement_summary(state.memory, state.target.knobs),
        "memplan_attempts": state.memory.attempts,
        "pass_seconds": {k: round(v, 4) for k, v in (pass_seconds or {}).items()},
        "layers": layers,
        # a decode graph's KV cache (no key for other graphs, whose reports stay as they were)
        **({"kv_cache": kv} if (kv := _kv_cache(state)) else {}),
    }


def build_manifest(state: Any) -> dict[str, Any]:
    """Quantization of the model's inputs/outputs and the quantized constant sizes."""
    g = state.graph

    def tensor(name: str) -> dict[str, Any]:
        t = g.tensor(name)
        q = t.quant
        entry: dict[str, Any] = {"name": name, "shape": list(t.shape), "dtype": "int8"}
        if q is not None:
            entry["dtype"] = q.dtype.value
            entry["scale"] = [float(x) for x in q.scale.reshape(-1)]
            entry["zero_point"] = [int(x) for x in q.zero_point.reshape(-1)]
            entry["axis"] = q.axis
        return entry

    consts = {}
    for layer in state.layers:
        for c in layer.consts:
            consts[c.name] = {
                "layer": layer.name,
                "kind": c.kind.value,
                "bytes": c.size_bytes,
                "dtype": "int8" if c.kind is ConstKind.WEIGHT else "int32",
            }
    return {
        "format": "aipusim-manifest",
        "version": 1,
        "inputs": [tensor(n) for n in g.inputs],
        "outputs": [tensor(n) for n in g.outputs],
        "constants": consts,
    }


def _instance(state: Any) -> Instance:
    """The compiled instance: its cores and tasklists, I/O bytes and I/O buffer pools."""
    cores = tuple(sorted(state.schedule.tasks))
    g = state.graph
    plan = state.memory
    # a decoder's KV cache stays in DDR between steps: it does not cross the host link
    cache = cache_state(g)
    inputs = [n for n in g.inputs if n not in cache]
    outputs = [n for n in g.outputs if n not in set(cache.values())]
    in_buf = plan.buffer_of(inputs[0], 0) if inputs else None
    out_buf = plan.buffer_of(outputs[0], 0) if outputs else None
    return Instance(
        cores=cores,
        tasklists=tuple(tasklist_file_name(c) for c in cores),
        input_bytes=sum(g.tensor(n).size for n in inputs),
        output_bytes=sum(g.tensor(n).size for n in outputs),
        input_pool=in_buf.pool if in_buf is not None else Pool.DDR,
        output_pool=out_buf.pool if out_buf is not None else Pool.DDR,
    )


def build_program(
    state: Any,
    model_name: str,
    model_id: str,
    crcs: dict[str, int],
    memory: MemoryMap | None = None,
) -> Program:
    target = state.target
    cfg = target.knobs
    instance = _instance(state)
    mvm_units = sum(1 for layer in state.layers if layer.unit is LayerUnit.MVM)
    return Program(
        model=model_name,
        multicore_mode=target.mode,
        aipu_cores_used=target.cores,
        resources_used=float(cfg.resources_used),
        instance=instance,
        # the clock and utilization limit the one cost model was built at
        frequency_hz=target.cost.freq_hz,
        use_hw_tokens=bool(cfg.use_hw_tokens),
        double_buffer=bool(cfg.double_buffer),
        stream_tasklist=bool(cfg.stream_tasklist),
        mvm_utilization_limit=target.cost.mvm_utilization_limit,
        profiling_levels=tuple(str(p) for p in cfg.profiling_levels),
        chip_cores=target.arch.chip.cores,
        memory=memory,
        extra={
            "model_id": model_id,
            # the mode the instance runs in (`Target.effective_mode`), for readers of the
            # file; the simulator derives it again from multicore_mode and the cores
            "effective_mode": str(target.effective_mode),
            "crc32": crcs,
            "crc_check": True,
            "init_before_frame": True,
            "frame_slots": 2 if cfg.double_buffer else 1,
            "mvm_layers": mvm_units,
            # ONNX operator of each layer, for the op= field of [PB] trace lines.
            "layer_ops": {layer.name: layer.op for layer in state.layers},
            # The network's MACs of each layer in one frame, for the macs= of [PB] lines.
            "layer_macs": {layer.name: layer.macs for layer in state.layers},
            "memory": state.memory.high_water(),
            "placement": placement_summary(state.memory, state.target.knobs),
            # layers whose tasks are timed but not yet complete programs (layer: why)
            "functional_gaps": dict(getattr(state.schedule, "incomplete", {})),
            "reference": REFERENCE_DIR if state.program is not None else None,
            # host-side knobs the runtime applies (the card's tasks do not change)
            "host": {
                "host_processes_used": int(cfg.host_processes_used),
                "input_dmabuf": bool(cfg.input_dmabuf),
                "output_dmabuf": bool(cfg.output_dmabuf),
            },
        },
    )


def l2_constant_image(state: Any) -> bytes | None:
    """``pool_l2_const.bin``: the constant blobs the memory plan keeps in L2 (weight
    images as the `WeightLoad` tasks read them, parameter records, operands), each at its
    L2 address; None when the plan keeps none there. INIT copies them from the constants
    image; this file shows the L2 contents those copies produce."""
    placed = []
    for buf in state.memory.buffers.values():
        if buf.pool is Pool.L2 and buf.kind in CONSTANT_KINDS:
            placed.append((buf.addr, constant_blob(state, buf.name).tobytes()))
    if not placed:
        return None
    image = bytearray(max(addr + len(data) for addr, data in placed))
    for addr, data in placed:
        image[addr : addr + len(data)] = data
    return bytes(image)


def emit_files(
    state: Any,
    *,
    model_name: str | None = None,
    model_id: str | None = None,
    pass_seconds: dict[str, float] | None = None,
    write_dir: Path | None = None,
) -> dict[str, bytes | Path]:
    """Every file of ``compiled_model/``, keyed by path relative to the output folder
    (``compiled_model/model.json``, ...); ``state`` is an `ir.Estimated`. The values are
    the files' bytes; with ``write_dir``, each file is written under it as soon as it is
    made and its value is the written path: a large model's constants image and reference
    arrays (a GB each for llama_1b) are then never held in memory at once."""
    name = model_name or state.target.knobs.model_name or state.graph.name
    files: dict[str, bytes | Path] = {}
    crcs: dict[str, int] = {}

    def put(rel: str, data: bytes) -> None:
        crcs[rel] = crc32(data)
        if write_dir is None:
            files[rel] = data
            return
        path = Path(write_dir) / COMPILED_DIR / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files[rel] = path

    for core, tasks in sorted(state.schedule.tasks.items()):
        put(tasklist_file_name(core), encode_tasklist(Tasklist(core, tuple(tasks))))
    image = l2_constant_image(state)
    if image is not None:
        put(L2_CONST_FILE, image)
    del image
    blob, where = constants_image(state)
    put(CONSTANTS_FILE, blob)
    del blob
    if state.program is not None:
        # the integer program these tasklists compute, for the bit-exact check
        report = {"evaluated": False, "reason": "the program the compiled tasklists compute"}
        for rel, data in quantized_model_files(state.program, report).items():
            put(f"{REFERENCE_DIR}/{rel}", data)
    put(MANIFEST_FILE, _json_bytes(build_manifest(state)))
    put(REPORT_FILE, _json_bytes(build_report(state, pass_seconds)))
    memory = memory_map(state, where)
    program = build_program(
        state, name, model_id or str(uuid.uuid4()), dict(sorted(crcs.items())), memory
    )
    put(PROGRAM_FILE, program.to_json().encode("utf-8"))
    return {f"{COMPILED_DIR}/{k}": v for k, v in files.items()}


def emit(
    state: Any, out_dir: Path, *, model_name: str | None = None, model_id: str | None = None
) -> dict[str, Path]:
    """Write ``compiled_model/`` under ``out_dir``; returns the written paths."""
    files = emit_files(state, model_name=model_name, model_id=model_id, write_dir=Path(out_dir))
    return {rel: Path(path) for rel, path in files.items()}


def verify_crcs(compiled_dir: str | Path) -> Program:
    """Load ``model.json`` and check the CRC32 it records for every file of the folder.

    Raises `TasklistError` naming the first file whose content changed (or is missing).
    """
    folder = Path(compiled_dir)
    path = folder / PROGRAM_FILE
    if not path.is_file():
        raise ConfigError(f"compiled_dir must contain {PROGRAM_FILE}, not be without it: {folder}")
    program = read_program(path)
    check_file_crcs(folder, program)
    return program


__all__ = [
    "COMPILED_DIR",
    "MANIFEST_FILE",
    "REFERENCE_DIR",
    "REPORT_FILE",
    "build_manifest",
    "build_program",
    "build_report",
    "crc32",
    "emit",
    "emit_files",
    "verify_crcs",
]
