"""Compare the cycle-level LPDDR4 model (`aipusim.simulator.detail.lpddr4`) with DRAMsim3.

Regenerate `reports/ddr/README.md` (run from the repository root):

    # DRAMsim3's side (needs a build of it, outside the repository):
    .venv/bin/python reports/ddr/ddr_compare.py dramsim3 --root /tmp/dramsim3 \
        --commit 29817593b3389f1337235d63cac515024ab8fd6e
    # our side and the tables (needs only the stored DRAMsim3 figures):
    .venv/bin/python reports/ddr/ddr_compare.py report

The same traces (written by this script) go to both; our model runs with the device timing
and the controller's structure (transaction queues, per-bank command queues, write drain)
read from DRAMsim3's `configs/LPDDR4_8Gb_x16_2400.ini` (stored in `ddr_dramsim3.json`, so
`report` does not need DRAMsim3).
"""

from __future__ import annotations

import argparse
import configparser
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from aipusim.arch import load_arch
from aipusim.isa.cost import cost_model
from aipusim.simulator.detail.lpddr4 import Lpddr4Config, simulate_requests

HERE = Path(__file__).resolve().parent
DATA = HERE / "ddr_dramsim3.json"
REPORT = HERE / "README.md"
INI = "configs/LPDDR4_8Gb_x16_2400.ini"

#: Saturating runs: every request arrives at clock 0; bandwidth over the first WINDOW clocks.
SATURATED_REQUESTS = 30_000
WINDOW_TCK = 120_000
#: Paced runs: one request every PACE clocks (about 40 % of the peak), latency of every read.
PACED_REQUESTS = 6_000
PACE_TCK = 20
PATTERNS = ("sequential", "strided", "random")
MIXES = {"reads": 0, "writes": 1, "2:1 mix": 3}  # 0: no writes, 1: all, 3: every third


def traces(request_bytes: int, size_bytes: int, stride_bytes: int) -> dict[str, list]:
    """name -> (addresses, writes) of every pattern and mix, the same for both simulators."""
    rng = np.random.default_rng(28)
    n = SATURATED_REQUESTS
    base = {
        "sequential": [i * request_bytes for i in range(n)],
        "strided": [(i * stride_bytes) % size_bytes for i in range(n)],
        "random": (rng.integers(0, size_bytes // request_bytes, n) * request_bytes).tolist(),
    }
    out = {}
    for pattern in PATTERNS:
        for mix, every in MIXES.items():
            writes = [every == 1 or (every > 1 and i % every == every - 1) for i in range(n)]
            out[f"{pattern}, {mix}"] = [base[pattern], writes]
    return out


def config_from_ini(ini: Path) -> tuple[Lpddr4Config, dict]:
    """Our model with DRAMsim3's device and queues: (config, the ini's numbers used)."""
    p = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    p.read(ini)
    t = {k: float(v) for k, v in p["timing"].items()}
    s, st = p["system"], p["dram_structure"]
    bus_bits, width = int(s["bus_width"]), int(st["device_width"])
    devices = bus_bits // width
    page = int(st["columns"]) * width // 8 * devices
    banks = int(st["bankgroups"]) * int(st["banks_per_group"])
    rows = int(st["rows"])
    rank_mb = page * rows * banks // 2**20
    ranks = max(1, int(s["channel_size"]) // rank_mb)
    bl = int(st["BL"])
    ck = {k: int(v) for k, v in t.items() if k != "tck"}
    cfg = Lpddr4Config(
        tck_ns=t["tck"],
        channels=int(s["channels"]),
        ranks=ranks,
        banks=banks,
        rows=rows,
        page_bytes=page,
        bus_bytes=bus_bits // 8,
        burst_length=bl,
        interleave_bytes=page,  # one channel: no channel interleaving
        cl=ck["cl"],
        cwl=ck["cwl"],
        t_ccd=max(bl // 2, ck["tccd_l"]),
        t_rcd=ck["trcd"],
        t_rp=ck["trp"],
        t_rp_ab=ck["trp"],
        t_ras=ck["tras"],
        t_rc=ck["tras"] + ck["trp"],
        t_rrd=ck["trrd_l"],
        t_faw=ck["tfaw"],
        t_wr=ck["twr"],
        t_rtp=ck["trtp"],
        t_wtr=ck["twtr_l"],  # LPDDR4 has no bank groups; DRAMsim3's ini gives two values
        t_rtw=ck["cl"] + bl // 2 - ck["cwl"] + ck["trtrs"],
        t_rtrs=ck["trtrs"],
        t_rfc_ab=ck["trfc"],
        t_rfc_pb=ck["trfc"],
        t_refi=ck["trefi"],
        act_tck=1,  # DRAMsim3 issues any command in one clock
        cas_tck=1,
        pre_tck=1,
        refresh_mode="all_bank",  # its RANK_LEVEL_STAGGERED
        # its controller: a read queue and a write buffer of `trans_queue_size`
        # transactions each, feeding command queues of `cmd_queue_size` per bank (or per
        # rank), reads and writes together; a write drain starts with a full write buffer,
        # or with more than 8 writes and every command queue empty
        # (`write_buffer_.size() > 8`), and moves the writes buffered when it started
        read_queue_depth=int(s["trans_queue_size"]),
        write_queue_depth=int(s["trans_queue_size"]),
        drain_high=int(s["trans_queue_size"]),
        drain_low=8,
        command_queues=s["queue_structure"].lower(),
        command_queue_depth=int(s["cmd_queue_size"]),
        write_drain="batch",
        row_hit_limit=4,  # its ArbitratePrecharge closes a row after 4 hits
    )
    used = {sec: dict(p[sec]) for sec in ("dram_structure", "timing", "system")}
    return cfg, used


def _write_trace(path: Path, addresses: list, writes: list, pace: int) -> None:
    with path.open("w") as fh:
        for i, (a, w) in enumerate(zip(addresses, writes, strict=True)):
            fh.write(f"{a:#x} {'WRITE' if w else 'READ'} {i * pace}\n")


def run_dramsim3(root: Path, commit: str) -> None:
    """Run DRAMsim3 on every trace; store its figures with the exact commands."""
    cfg, used = config_from_ini(root / INI)
    exe = root / "dramsim3main.out"
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (addresses, writes) in traces(
            cfg.burst_bytes, cfg.size_bytes, cfg.page_bytes
        ).items():
            for load, n, pace, cycles in (
                ("saturated", SATURATED_REQUESTS, 0, WINDOW_TCK),
                ("paced", PACED_REQUESTS, PACE_TCK, PACED_REQUESTS * PACE_TCK + 2000),
            ):
                trace = Path(tmp) / "t.trace"
                _write_trace(trace, addresses[:n], writes[:n], pace)
                cmd = [str(exe), INI, "-t", str(trace), "-c", str(cycles), "-o", tmp]
                subprocess.run(cmd, cwd=root, check=True, capture_output=True)
                stats = json.loads((Path(tmp) / "dramsim3.json").read_text())["0"]
                done = stats["num_reads_done"] + stats["num_writes_done"]
                runs[f"{name} / {load}"] = {
                    "bandwidth_gb_s": stats["average_bandwidth"],
                    "avg_read_latency_tck": stats["average_read_latency"],
                    "requests_done": done,
                    "cycles": cycles,
                    "row_hits": stats["num_read_row_hits"] + stats["num_write_row_hits"],
                    "acts": stats["num_act_cmds"],
                    "command": " ".join(
                        ["./dramsim3main.out", INI, "-t", "TRACE", "-c", str(cycles)]
                    ),
                }
    DATA.write_text(
        json.dumps(
            {
                "source": "github.com/umd-memsys/DRAMsim3",
                "commit": commit,
                "build": "make (the repository's Makefile, g++ -O3), outside this repository",
                "ini": INI,
                "ini_values": used,
                "trace": "written by reports/ddr/ddr_compare.py (addr OP arrival_clock)",
                "runs": runs,
            },
            indent=1,
        )
        + "\n"
    )


def ours(cfg: Lpddr4Config, addresses: list, writes: list, load: str) -> dict:
    """Our model on the same trace, measured as DRAMsim3 measures."""
    if load == "saturated":
        n, pace, window = SATURATED_REQUESTS, 0, WINDOW_TCK
    else:
        n, pace, window = PACED_REQUESTS, PACE_TCK, PACED_REQUESTS * PACE_TCK + 2000
    arrivals = [i * pace for i in range(n)]
    if load == "saturated":  # only what can finish in the window matters: cut the tail
        n = min(n, 2 * window // (cfg.burst_length // 2))
    res = simulate_requests(cfg, addresses[:n], [cfg.burst_bytes] * n, writes[:n], arrivals[:n])
    in_window = res.done_tck <= window
    w = np.asarray(writes[:n])
    reads = in_window & ~w
    # DRAMsim3 times a read from its entry into the controller's queue to its last data
    latency = (res.done_tck - res.accept_tck)[reads]
    return {
        "bandwidth_gb_s": int(in_window.sum()) * cfg.burst_bytes / (window * cfg.tck_ns),
        "avg_read_latency_tck": float(latency.mean()) if len(latency) else math.nan,
        "acts": res.commands["ACT"],
    }


def _num(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f}"


def _pct(a: float, b: float) -> str:
    if math.isnan(a) or math.isnan(b) or b == 0:
        return "n/a"
    return f"{100 * (a - b) / b:+.1f} %"


def fast_vs_detailed() -> list[str]:
    """What the detailed model says of the fast model's closed form, on the arch's LPDDR4x."""
    arch = load_arch()
    cost = cost_model(arch)
    burst = arch.dma.burst_bytes
    rows = [
        "| stream (arch LPDDR4x-4266, 4 x16 channels, 16 KiB DMA bursts) | refresh | "
        "fast model GB/s | detailed GB/s | detailed % of peak | fast vs detailed |",
        "|---|---|---|---|---|---|",
    ]
    total = 2 * 2**20
    n = total // burst
    cases = {
        "sequential read": ([i * burst for i in range(n)], [False] * n),
        "sequential write": ([i * burst for i in range(n)], [True] * n),
        "2:1 read/write, two streams": (
            [(i * burst) if i % 3 != 2 else (2**30 + i * burst) for i in range(n)],
            [i % 3 == 2 for i in range(n)],
        ),
    }
    for mode in ("per_bank", "all_bank"):
        cfg = Lpddr4Config.from_arch(load_arch(overrides={"ddr.refresh_mode": mode}))
        for name, (addresses, writes) in cases.items():
            res = simulate_requests(cfg, addresses, [burst] * n, writes, [0] * n)
            # the fast model: back-to-back bursts; a change of stream (here of direction,
            # reads and writes being two streams) opens a row and turns the bus around
            ns = sum(
                cost.ddr_burst_ns(
                    burst,
                    fresh=i == 0 or w != writes[i - 1],
                    turnaround=i > 0 and w != writes[i - 1],
                    write=w,
                )
                for i, w in enumerate(writes)
            )
            fast = total / ns
            rows.append(
                f"| {name} | {mode} | {fast:.2f} | {res.bandwidth_gb_s:.2f} | "
                f"{100 * res.bandwidth_gb_s / cfg.peak_gb_s:.1f} % | "
                f"{_pct(fast, res.bandwidth_gb_s)} |"
            )
    rows += [
        "",
        "| 64-byte random reads, one every 8 clocks (half the peak) | refresh | "
        "avg latency (ns) | p99 (ns) | max (ns) |",
        "|---|---|---|---|---|",
    ]
    rng = np.random.default_rng(28)
    m = 20_000
    addresses = (rng.integers(0, arch.ddr.size_bytes // 64, m) * 64).tolist()
    for mode in ("none", "per_bank", "all_bank"):
        cfg = Lpddr4Config.from_arch(arch)
        cfg = Lpddr4Config(**{**cfg.__dict__, "refresh_mode": mode})
        res = simulate_requests(cfg, addresses, [64] * m, [False] * m, [8 * i for i in range(m)])
        worst = float(res.latency_tck.max()) * cfg.tck_ns
        rows.append(
            f"| | {mode} | {res.avg_latency_ns:.0f} | {res.p99_latency_ns:.0f} | {worst:.0f} |"
        )
    return rows


def in_the_simulator() -> list[str]:
    """The simulator with ``detail="fast"`` and ``"cycle"`` on a DDR stream (one core: a
    1 MiB read from DDR on one DMA channel while the other writes 512 KiB back) and on
    `tiny_cnn` compiled for four cores."""
    import aipusim
    from aipusim.isa.program import Instance, MulticoreMode, Program
    from aipusim.isa.tasks import DmaCopy, Pool, Unit
    from aipusim.simulator import simulate

    prog = Program(
        model="ddr_stream",
        multicore_mode=MulticoreMode.COOPERATIVE,
        aipu_cores_used=1,
        resources_used=1.0,
        instance=Instance((0,), ("core0.tasklist",), 0, 0),
    )
    tasks = [
        DmaCopy(unit=Unit.DMA0, src_pool=Pool.DDR, src_addr=0, dst_pool=Pool.L1, dst_addr=0,
                bytes=2**20),
        DmaCopy(unit=Unit.DMA1, src_pool=Pool.L1, src_addr=0, dst_pool=Pool.DDR, dst_addr=0,
                bytes=2**19),
    ]  # fmt: skip
    rows = [
        "| run | fast | cycle (detailed DDR) | cycle vs fast |",
        "|---|---|---|---|",
    ]
    got = [
        int(simulate(prog, {0: tasks}, frames=1, detail=d).device_latency_cycles[0])
        for d in ("fast", "cycle")
    ]
    rows.append(
        f"| DDR stream, 1 MiB read + 512 KiB write (device cycles) | {got[0]} | {got[1]} | "
        f"{_pct(got[1], got[0])} |"
    )
    four = {"aipu_cores": 4, "resources_used": 1.0}
    for name, config, frames in (
        ("tiny_cnn, 4 cores", four, 8),
        ("resnet50 224 px, 4 cores batch", {**four, "multicore_mode": "batch"}, 4),
    ):
        compiled = aipusim.compile(name.split(",")[0].split()[0], config)
        fps, wall = [], 0.0
        for d in ("fast", "cycle"):
            start = time.perf_counter()
            fps.append(aipusim.simulate(compiled, frames=frames, detail=d).fps)
            wall = time.perf_counter() - start
        rows.append(
            f"| {name}, {frames} frames (FPS; detailed run {wall:.0f} s) | {fps[0]:.0f} | "
            f"{fps[1]:.0f} | {_pct(fps[1], fps[0])} |"
        )
    return rows


def report() -> None:
    data = json.loads(DATA.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        ini = Path(tmp) / "lpddr4.ini"
        p = configparser.ConfigParser()
        p.read_dict(data["ini_values"])
        with ini.open("w") as fh:
            p.write(fh)
        cfg, _ = config_from_ini(ini)
    lines = [
        "| pattern | load | DRAMsim3 GB/s | ours GB/s | diff | DRAMsim3 read latency (tCK) "
        "| ours (tCK) | diff |",
        "|---|---|---|---|---|---|---|---|",
    ]
    worst = worst_latency = 0.0
    for name, (addresses, writes) in traces(
        cfg.burst_bytes, cfg.size_bytes, cfg.page_bytes
    ).items():
        for load in ("saturated", "paced"):
            theirs = data["runs"][f"{name} / {load}"]
            mine = ours(cfg, addresses, writes, load)
            bw_d = _pct(mine["bandwidth_gb_s"], theirs["bandwidth_gb_s"])
            reads = "writes" not in name  # DRAMsim3 reports the latency of reads only
            lat_t = theirs["avg_read_latency_tck"] if reads else math.nan
            lat_m = mine["avg_read_latency_tck"] if reads else math.nan
            lat_d = _pct(lat_m, lat_t)
            lines.append(
                f"| {name} | {load} | {theirs['bandwidth_gb_s']:.2f} | "
                f"{mine['bandwidth_gb_s']:.2f} | {bw_d} | {_num(lat_t)} | "
                f"{_num(lat_m)} | {lat_d} |"
            )
            worst = max(worst, abs(mine["bandwidth_gb_s"] / theirs["bandwidth_gb_s"] - 1))
            if reads:
                worst_latency = max(worst_latency, abs(lat_m / lat_t - 1))
            print(lines[-1], flush=True)
    fast = fast_vs_detailed()
    print("\n".join(fast))
    sim = in_the_simulator()
    print("\n".join(sim))
    text = REPORT.read_text()
    start, end = "<!-- table:dramsim3 -->", "<!-- /table:dramsim3 -->"
    text = text.split(start)[0] + start + "\n" + "\n".join(lines) + "\n" + end + text.split(end)[1]
    start, end = "<!-- table:fast -->", "<!-- /table:fast -->"
    text = text.split(start)[0] + start + "\n" + "\n".join(fast) + "\n" + end + text.split(end)[1]
    start, end = "<!-- table:simulator -->", "<!-- /table:simulator -->"
    text = text.split(start)[0] + start + "\n" + "\n".join(sim) + "\n" + end + text.split(end)[1]
    REPORT.write_text(text)
    print(
        f"largest bandwidth difference {100 * worst:.1f} %, "
        f"largest read latency difference {100 * worst_latency:.1f} %"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    d = sub.add_parser("dramsim3", help="run DRAMsim3 and store its figures")
    d.add_argument("--root", type=Path, required=True, help="a DRAMsim3 checkout, built")
    d.add_argument("--commit", required=True, help="the commit it was built from")
    sub.add_parser("report", help="run our model and rewrite the tables of README.md")
    args = ap.parse_args(argv)
    if args.what == "dramsim3":
        run_dramsim3(args.root, args.commit)
    else:
        report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
