#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The registration benchmark's report (`make bench`, tests/bench/README.md).

Reads the NVPM-BENCH lines that tests/bench/10-registration.sh printed in the
guest's serial log, prints a table per cost setting with the issues'
targets (PASS/MISS), and writes the JSON rows.

Up to four stacks are measured in the same guest, one after the other: this
module ("ours"), the same module built in carried mode ("carried", the
kernel's Rust crates built into it: ratio_vs_kernel_mode is its time per
registration over ours), NVIDIA's nvidia-peermem ("anchor") and
peer_test_client as the ideal client ("ideal"); each client row is compared with the bare
provider loops of its own stack, and this module's rows with the anchor's
(speedup_vs_anchor: the anchor's time per registration over ours) and the
ideal's (ratio_vs_ideal: ours over the ideal's) of the same cell. SGEs per
registration are what the core received (its nmap) for the anchor and the
ideal, this module's statistics for this module.

Timing: one loop = N register/deregister cycles in the core simulator, timed
in the kernel, plus the wait for unpins still running after the loop (drain,
0 when every unpin is done when deregistration returns). Time per registration = (elapsed + drain) / N; a cell's value is the
median over the repetitions; a client's ratio is the median of the ratios to
the bare provider loop of the same API and repetition (adjacent in time).

Client memory is derived, not measured (the module has no counter for it):
per registration one kmalloc of the context (ArcInner<GpuPin<RegState>>,
its size read from the module's DWARF) and the scatterlist the module
allocates for the SGE count (up to 16 entries one slab object of 1 or 16
slots; beyond, slab chunks of 126 entries and a link, or of 510 for
registrations of more than 126 pages), both rounded as the kernel's
allocators round them.
"""

import argparse
import functools
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

GIB = 1 << 30
PAGE_SIZE = 4096
KMALLOC_SIZES = [8, 16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192]
API_CALLS = ["get_pages", "get_pages_persistent", "dma_map_pages", "dma_unmap_pages",
             "put_pages", "put_pages_persistent", "free_page_table", "free_dma_mapping"]
CLIENTS = {
    # row name: (JSON client, API, bare baseline row)
    "bare_p": ("bare", "persistent", None),
    "nv_mem_nc": ("nv_mem_nc", "persistent", "bare_p"),
    "anchor_nc": ("anchor", "persistent", "bare_p"),
    "ideal_nc": ("ideal", "persistent", "bare_p"),
    "bare_r": ("bare", "revocable", None),
    "nv_mem": ("nv_mem", "revocable", "bare_r"),
    "anchor": ("anchor", "revocable", "bare_r"),
    "ideal": ("ideal", "revocable", "bare_r"),
}
ORDER = ["bare_p", "nv_mem_nc", "anchor_nc", "ideal_nc", "bare_r", "nv_mem", "anchor", "ideal"]
OURS = {"nv_mem_nc", "nv_mem"}
# this module's row -> the anchor's and the ideal's of the same API
PEERS = {"nv_mem_nc": ("anchor_nc", "ideal_nc"), "nv_mem": ("anchor", "ideal")}
CONTEXT_TYPE = "ArcInner<nvidia_peermem::nvidia_p2p::GpuPin<nvidia_peermem::client::RegState>>"
# What llvm-dwarfdump read from the module, if it cannot be read now.
CONTEXT_FALLBACK = 240
SCATTERLIST_FALLBACK = 32


def kmalloc_size(n):
    for s in KMALLOC_SIZES:
        if n <= s:
            return s
    pages = -(-n // PAGE_SIZE)
    return PAGE_SIZE << (pages - 1).bit_length()


SG_EXACT_MAX = 16  # scatterlist.rs: tables up to this size are one object of 1 or 16 slots
SHIM_H = Path(__file__).resolve().parents[2] / "src" / "ffi" / "shim.h"
GPU_PAGE = 64 << 10


@functools.lru_cache(maxsize=None)
def sg_chunk_slots(name):
    """A chunk size from src/ffi/shim.h (slots per chunk: entries and a link),
    the one definition the module is built with."""
    m = re.search(rf"^#define {name} (\d+)$", SHIM_H.read_text(), re.M)
    if not m:
        sys.exit(f"report: no {name} in {SHIM_H}")
    return int(m.group(1))


def sg_table_bytes(nents, size_bytes, sg_size):
    """What the module's SgTable allocates for nents entries of a size_bytes
    registration, all from the module's slab caches: up to SG_EXACT_MAX one
    object of 1 slot (one entry) or 16 (more); beyond, chained
    chunks, each chunk's last slot linking to the next. Small chunks
    (NVPM_SG_CHUNK_SLOTS, 4 KiB of slab) when the table cannot outgrow one,
    else large ones (NVPM_SG_LARGE_CHUNK_SLOTS, 16 KiB). A cache with a
    constructor keeps the free pointer outside the object: a class object
    takes 8 bytes more, and chunks are a slot short of a power of two."""
    if nents <= SG_EXACT_MAX:
        return (1 if nents == 1 else SG_EXACT_MAX) * sg_size + 8
    small = sg_chunk_slots("NVPM_SG_CHUNK_SLOTS")
    large = sg_chunk_slots("NVPM_SG_LARGE_CHUNK_SLOTS")
    max_entries = -(-size_bytes // GPU_PAGE)  # a segment takes at least a page
    slots, chunk_bytes = ((small, PAGE_SIZE) if max_entries <= small - 1
                          else (large, 4 * PAGE_SIZE))
    return -(-nents // (slots - 1)) * chunk_bytes


def dwarf_size(ko, name):
    try:
        out = subprocess.run(["llvm-dwarfdump-19", f"--name={name}", ko], capture_output=True,
                             text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"DW_TAG_structure_type\s+DW_AT_name\s+\(\"" + re.escape(name) +
                  r"\"\)\s+DW_AT_byte_size\s+\((0x[0-9a-f]+)\)", out)
    return int(m.group(1), 16) if m else None


def fmt_size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def fmt_bytes(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            return f"{b / (1 << shift):.1f} {unit}"
    return f"{b:.0f} B"


PHASES = ["owner", "get_pages", "dma_map", "dma_unmap", "put_pages", "release", "core"]


def parse(log):
    env, sgs, loops, profiles, done = {}, {}, [], {}, False
    for line in log:
        m = re.match(r"^NVPM-BENCH (\w+)(.*)$", line.rstrip("\r\n"))
        if not m:
            continue
        kind = m.group(1)
        kv = dict(re.findall(r"(\w+)=(\S+)", m.group(2)))
        kv.setdefault("stack", "ours")
        text = ("client", "layout", "stack")
        if kind == "env":
            env = kv
        elif kind == "sg":
            sgs[(kv["stack"], kv["client"], kv["layout"], int(kv["size"]))] = int(kv["nmap"])
        elif kind == "loop":
            try:
                loop = {k: (v if k in text else int(v)) for k, v in kv.items()}
            except ValueError:
                continue  # a line garbled by a kernel message
            loops.append(loop)
        elif kind == "profile":
            try:
                prof = {k: (v if k in text else int(v)) for k, v in kv.items()}
            except ValueError:
                continue
            # bare rows of the other stacks are baselines only; the carried
            # stack's rows share ours' names and are compared in its own table
            if prof["stack"] == "ours" or (prof["stack"] != "carried"
                                           and not prof["client"].startswith("bare")):
                profiles[(prof["cost"], prof["client"], prof["layout"], prof["size"])] = prof
        elif kind == "done":
            done = True
    return env, sgs, loops, profiles, done


# Issue #28: carried mode over kernel mode, at every size.
CARRIED_TARGET = 1.02


def ratio_target(size):
    return 1.15 if size < (2 << 20) else 1.05


def ideal_target(size):
    """Issue #21: this module over the ideal client."""
    return 1.10 if size < (2 << 20) else 1.03


def anchor_target(size):
    """Issue #21, with the per-call cost: the anchor's time over ours."""
    return 1.9 if size >= (64 << 20) else 1.45


def analyse(sgs, loops, ctx_bytes, sg_size):
    cells = {}
    for lp in loops:
        key = (lp["cost"], lp["stack"], lp["client"], lp["layout"], lp["size"])
        cells.setdefault(key, []).append(lp)
    rows = []
    for (cost, stack, client, layout, size), lps in sorted(cells.items()):
        if client.startswith("bare") and stack != "ours":
            continue  # the other stacks' bare loops are their clients' baselines
        per = {lp["rep"]: (lp["elapsed_ns"] + lp["drain_ns"]) / lp["count"] for lp in lps}
        count = sum(lp["count"] for lp in lps)
        calls = {c: sum(lp.get(c, 0) for lp in lps) / count for c in API_CALLS}
        med = statistics.median(per.values())
        json_client, api, bare = CLIENTS[client]
        row = {
            "cost_us": cost, "stack": stack, "row": client, "client": json_client, "api": api,
            "layout": layout, "size_bytes": size, "reps": len(per), "count_per_rep":
            lps[0]["count"], "ns_per_reg": med, "ns_min": min(per.values()),
            "ns_max": max(per.values()), "regs_per_sec": 1e9 / med,
            "drain_ns_per_reg": statistics.median(lp["drain_ns"] / lp["count"] for lp in lps),
            "provider_calls_per_reg": sum(calls.values()),
            "pins_per_reg": calls["get_pages"] + calls["get_pages_persistent"],
            "maps_per_reg": calls["dma_map_pages"], "unmaps_per_reg": calls["dma_unmap_pages"],
            "unpins_per_reg": calls["put_pages"] + calls["put_pages_persistent"],
            "violations": sum(lp.get("violations", 0) for lp in lps),
        }
        if bare is None:
            row["sges_per_reg"] = sgs.get((stack, client, layout, size), 0)
            row["client_bytes_per_reg"] = 0
            row["ratios"] = [1.0]
        else:
            if client in OURS:
                row["sges_per_reg"] = sum(lp.get("sges", 0) for lp in lps) / count
                nents = round(row["sges_per_reg"])
                row["sg_bytes_per_reg"] = sg_table_bytes(nents, size, sg_size)
                row["client_bytes_per_reg"] = kmalloc_size(ctx_bytes) + row["sg_bytes_per_reg"]
            else:
                # what the core received: its nmap of the verified registration
                row["sges_per_reg"] = sgs.get((stack, client, layout, size), 0)
                row["client_bytes_per_reg"] = None
            bare_lps = cells.get((cost, stack, bare, layout, size), [])
            bare_per = {lp["rep"]: (lp["elapsed_ns"] + lp["drain_ns"]) / lp["count"]
                        for lp in bare_lps}
            row["ratios"] = [per[r] / bare_per[r] for r in per if r in bare_per]
            row["sges_verified"] = sgs.get((stack, client, layout, size))
        row["ratio_vs_bare"] = statistics.median(row["ratios"]) if row["ratios"] else None
        row["client_bytes_per_gib"] = (None if row["client_bytes_per_reg"] is None else
                                       row["client_bytes_per_reg"] * GIB / size)
        rows.append(row)
    # This module against the anchor and the ideal client of the same cell;
    # in carried mode against itself in kernel mode.
    by = {(r["cost_us"], r["row"], r["layout"], r["size_bytes"]): r
          for r in rows if r["stack"] != "carried"}
    for r in rows:
        if r["stack"] == "carried":
            own = by.get((r["cost_us"], r["row"], r["layout"], r["size_bytes"]))
            r["ratio_vs_kernel_mode"] = r["ns_per_reg"] / own["ns_per_reg"] if own else None
            continue
        if r["row"] not in PEERS:
            continue
        anchor, ideal = (by.get((r["cost_us"], p, r["layout"], r["size_bytes"]))
                         for p in PEERS[r["row"]])
        r["speedup_vs_anchor"] = anchor["ns_per_reg"] / r["ns_per_reg"] if anchor else None
        r["ratio_vs_ideal"] = r["ns_per_reg"] / ideal["ns_per_reg"] if ideal else None
    return rows


def judge(rows):
    """Targets per cost setting: list of (cost, name, verdict, detail)."""
    out = []
    for cost in sorted({r["cost_us"] for r in rows}):
        rs = [r for r in rows if r["cost_us"] == cost and r["row"] in OURS and r["stack"] == "ours"]
        carried = carried_rows(rows, cost)
        if carried:
            miss = [r for r in carried if r["ratio_vs_kernel_mode"] is None
                    or r["ratio_vs_kernel_mode"] > CARRIED_TARGET]
            detail = "; ".join(f"{r['client']} {r['layout']} {fmt_size(r['size_bytes'])} "
                               f"{r['ratio_vs_kernel_mode']:.3f}" for r in miss
                               if r["ratio_vs_kernel_mode"])
            out.append((cost, f"carried mode's time/reg <= {CARRIED_TARGET}x kernel mode's",
                        "MISS" if miss else "PASS",
                        f"{len(carried) - len(miss)}/{len(carried)} cells"
                        + (f"; over: {detail}" if miss else "")))
        for lo, name in ((0, "time/reg <= 1.15x bare at 64 KiB"),
                         (2 << 20, "time/reg <= 1.05x bare at 2 MiB and above")):
            sel = [r for r in rs if (r["size_bytes"] >= lo if lo else r["size_bytes"] < 2 << 20)]
            miss = [r for r in sel if r["ratio_vs_bare"] is None
                    or r["ratio_vs_bare"] > ratio_target(r["size_bytes"])]
            detail = "; ".join(f"{r['client']} {r['layout']} {fmt_size(r['size_bytes'])} "
                               f"{r['ratio_vs_bare']:.3f}" for r in miss if r["ratio_vs_bare"])
            out.append((cost, name, "N/A" if not sel else "MISS" if miss else "PASS",
                        f"{len(sel) - len(miss)}/{len(sel)} cells" + (f"; over: {detail}" if miss else "")))
        bad = [r for r in rs if (r["pins_per_reg"], r["maps_per_reg"], r["unmaps_per_reg"],
                                  r["unpins_per_reg"], r["provider_calls_per_reg"]) != (1, 1, 1, 1, 4)]
        out.append((cost, "exactly 1 pin, 1 map, 1 unmap, 1 unpin per registration",
                    "PASS" if rs and not bad else "MISS",
                    f"{len(rs) - len(bad)}/{len(rs)} cells" +
                    "".join(f"; {r['client']} {r['layout']} {fmt_size(r['size_bytes'])}: "
                            f"{r['pins_per_reg']:g}/{r['maps_per_reg']:g}/{r['unmaps_per_reg']:g}/"
                            f"{r['unpins_per_reg']:g}" for r in bad)))
        g = [r for r in rs if r["layout"] == "contiguous" and r["size_bytes"] == GIB]
        out.append((cost, "contiguous 1 GiB registration = 1 SGE",
                    "PASS" if g and all(r["sges_per_reg"] == 1 for r in g) else "MISS",
                    ", ".join(f"{r['client']} {r['sges_per_reg']:g}" for r in g) or "not measured"))
        out.append((cost, "client memory <= 4 KiB per GiB (contiguous, 1 GiB MRs)",
                    "PASS" if g and all(r["client_bytes_per_gib"] <= 4096 for r in g) else "MISS",
                    ", ".join(f"{r['client']} {r['client_bytes_per_gib']:.0f} B" for r in g)
                    or "not measured"))
        # Issue #21: against the ideal client, and (with the cost) the anchor.
        for lo, name in ((0, "time/reg <= 1.10x ideal at 64 KiB"),
                         (2 << 20, "time/reg <= 1.03x ideal at 2 MiB and above")):
            sel = [r for r in rs if r.get("ratio_vs_ideal") is not None and
                   (r["size_bytes"] >= lo if lo else r["size_bytes"] < 2 << 20)]
            miss = [r for r in sel if r["ratio_vs_ideal"] > ideal_target(r["size_bytes"])]
            detail = "; ".join(f"{r['client']} {r['layout']} {fmt_size(r['size_bytes'])} "
                               f"{r['ratio_vs_ideal']:.3f}" for r in miss)
            out.append((cost, name, "N/A" if not sel else "MISS" if miss else "PASS",
                        f"{len(sel) - len(miss)}/{len(sel)} cells" + (f"; over: {detail}" if miss else "")))
        if cost:
            sel = [r for r in rs if r.get("speedup_vs_anchor") is not None]
            miss = [r for r in sel if r["speedup_vs_anchor"] < anchor_target(r["size_bytes"])]
            detail = "; ".join(f"{r['client']} {r['layout']} {fmt_size(r['size_bytes'])} "
                               f"{r['speedup_vs_anchor']:.2f}" for r in miss)
            out.append((cost, "anchor's time/reg >= 1.45x ours, >= 1.9x at 64 MiB and above",
                        "N/A" if not sel else "MISS" if miss else "PASS",
                        f"{len(sel) - len(miss)}/{len(sel)} cells" + (f"; under: {detail}" if miss else "")))
        viol = sum(r["violations"] for r in rows if r["cost_us"] == cost)
        if viol:
            out.append((cost, "no contract violation in the loops", "MISS", f"{viol} violations"))
    return out


def print_tables(env, rows, verdicts, ctx_bytes, ctx_src, sg_size, icount):
    print(f"Registration benchmark: MOFED core simulator mode {env.get('mode', '?')}, "
          f"HCA max_seg_size {env.get('max_seg_size', '?')}, guest {env.get('cpus', '?')} CPUs "
          f"(QEMU TCG), {env.get('reps', '?')} repetitions of ~{env.get('loop_ms', '?')} ms loops, "
          + ("WITH the core simulator's own O(SGE) checks in the loops (BENCH_CHECKS=1)"
             if env.get("checks") == "1" else "loops without the core simulator's own checks (nocheck)"))
    if icount != "off":
        print(f"guest time: QEMU -icount {icount}: a guest ns is a guest instruction (shift=0), "
              "idle time is skipped; the work of both vCPUs counts, the host's load does not")
    else:
        print("guest time: real time (no -icount): the host's load shows in the timings")
    print("time/reg = (loop + drain of deferred unpins) / N, median over repetitions; "
          "spread = min..max; ratio = median of paired ratios to bare of the same API (min..max)")
    print("anchor = NVIDIA's nvidia-peermem, ideal = peer_test_client (one pin, coalesced SGEs); "
          "vs anchor = the anchor's time/reg over ours (speedup_vs_anchor), vs ideal = ours over "
          "the ideal's (ratio_vs_ideal); the target column judges ours against bare")
    print(f"client memory derived: context {ctx_bytes} B ({ctx_src}) -> kmalloc "
          f"{kmalloc_size(ctx_bytes)} B, + scatterlist (SGEs x {sg_size} B in slab objects), "
          "per registration\n")
    for cost in sorted({r["cost_us"] for r in rows}):
        print(f"== cost_us={cost}: " + ("no artificial cost (simulator work only)" if cost == 0 else
              f"every nvidia_p2p_* call sleeps {cost} us (fsleep) before its work"))
        hdr = (f"{'layout':<11} {'size':>7} {'client':<10} {'api':<10} {'regs/s':>9} {'us/reg':>9} "
               f"{'spread':>15} {'ratio':>6} {'ratio range':>13} {'target':>7} {'calls':>5} "
               f"{'pin/map/unmap/unpin':>19} {'SGEs/reg':>9} {'client mem/GiB':>14} "
               f"{'vs anchor':>9} {'vs ideal':>8}")
        print(hdr)
        print("-" * len(hdr))
        for layout in ("contiguous", "fragmented"):
            for size in sorted({r["size_bytes"] for r in rows}):
                for name in ORDER:
                    r = next((x for x in rows if (x["cost_us"], x["row"], x["layout"],
                                                  x["size_bytes"]) == (cost, name, layout, size)
                              and x["stack"] != "carried"), None)
                    if not r:
                        continue
                    if r["client"] == "bare":
                        ratio, rng, tgt = "1", "", ""
                    else:
                        lim = ratio_target(size)
                        ok = r["ratio_vs_bare"] is not None and r["ratio_vs_bare"] <= lim
                        ratio = f"{r['ratio_vs_bare']:.3f}" if r["ratio_vs_bare"] else "-"
                        rng = (f"{min(r['ratios']):.2f}..{max(r['ratios']):.2f}" if r["ratios"] else "")
                        tgt = f"{'PASS' if ok else 'MISS'}"
                    counts = (f"{r['pins_per_reg']:g}/{r['maps_per_reg']:g}/"
                              f"{r['unmaps_per_reg']:g}/{r['unpins_per_reg']:g}")
                    spread = f"{r['ns_min'] / 1e3:.1f}..{r['ns_max'] / 1e3:.1f}"
                    mem = ("-" if r["client_bytes_per_gib"] is None or r["client"] == "bare"
                           else fmt_bytes(r["client_bytes_per_gib"]))
                    if name in OURS and r["ratio_vs_bare"] is not None:
                        tgt = f"{'PASS' if r['ratio_vs_bare'] <= ratio_target(size) else 'MISS'}"
                    elif name not in OURS:
                        tgt = ""
                    va = (f"{r['speedup_vs_anchor']:.2f}x" if r.get("speedup_vs_anchor") else "")
                    vi = (f"{r['ratio_vs_ideal']:.3f}" if r.get("ratio_vs_ideal") else "")
                    print(f"{layout:<11} {fmt_size(size):>7} {r['client']:<10} {r['api']:<10} "
                          f"{r['regs_per_sec']:>9.0f} {r['ns_per_reg'] / 1e3:>9.1f} {spread:>15} "
                          f"{ratio:>6} {rng:>13} {tgt:>7} {r['provider_calls_per_reg']:>5g} "
                          f"{counts:>19} {r['sges_per_reg']:>9g} {mem:>14} {va:>9} {vi:>8}")
        print_carried(rows, cost)
        print()
        print(f"targets (cost_us={cost}):")
        for c, name, verdict, detail in verdicts:
            if c == cost:
                print(f"  {verdict:<4}  {name}: {detail}")
        print()


def carried_rows(rows, cost):
    """This module's client rows in carried mode at one cost setting."""
    return [r for r in rows if r["cost_us"] == cost and r["stack"] == "carried" and r["row"] in OURS]


def print_carried(rows, cost):
    """This module in carried mode against itself in kernel mode, per cell."""
    carried = carried_rows(rows, cost)
    if not carried:
        return
    print()
    print(f"carried mode (the kernel's Rust crates built into the module) over kernel mode, "
          f"target <= {CARRIED_TARGET}:")
    hdr = (f"{'layout':<11} {'size':>7} {'client':<10} {'kernel us/reg':>13} "
           f"{'carried us/reg':>14} {'ratio':>6} {'target':>7}")
    print(hdr)
    print("-" * len(hdr))
    for r in sorted(carried, key=lambda x: (x["layout"], x["size_bytes"], ORDER.index(x["row"]))):
        ratio = r["ratio_vs_kernel_mode"]
        own = r["ns_per_reg"] / ratio if ratio else None
        print(f"{r['layout']:<11} {fmt_size(r['size_bytes']):>7} {r['client']:<10} "
              f"{own / 1e3 if own else 0:>13.1f} {r['ns_per_reg'] / 1e3:>14.1f} "
              f"{ratio if ratio else 0:>6.3f} "
              f"{'PASS' if ratio and ratio <= CARRIED_TARGET else 'MISS':>7}")


def print_profiles(profiles):
    """Where the time goes: one profiled loop per cell, µs per registration."""
    if not profiles:
        return
    print("where the time goes (one extra loop per cell with time stamps, us per registration):")
    print("  owner = the core's ownership search incl. the client's acquire (which pins); get_pages,")
    print("  dma_map, dma_unmap, put_pages, release = the client's callbacks (bare: the nvidia_p2p_*")
    print("  calls); core = the core's own steps; other = the rest of the loop (MR allocation, ...);")
    print("  drain = waiting for deferred unpins after the loop; client-own = the persistent client's")
    print("  callbacks minus the bare provider calls of the same size (its own work)")
    for cost in sorted({k[0] for k in profiles}):
        print(f"== cost_us={cost}")
        hdr = (f"{'layout':<11} {'size':>7} {'client':<10} {'total':>9} " +
               " ".join(f"{p:>9}" for p in PHASES) + f" {'other':>9} {'drain':>9} {'client-own':>10}")
        print(hdr)
        print("-" * len(hdr))
        for (c, name, layout, size), pr in sorted(profiles.items(), key=lambda kv: (
                kv[0][0], kv[0][2], kv[0][3], ORDER.index(kv[0][1]))):
            if c != cost:
                continue
            n = pr["count"]
            total = pr["elapsed_ns"] / n
            phases = [pr.get(p, 0) for p in PHASES]
            other = total - sum(phases)
            own = ""
            if name not in ORDER:
                continue
            bare = profiles.get((c, "bare_p", layout, size))
            if name == "nv_mem_nc" and bare:
                mine = sum(pr.get(p, 0) for p in PHASES if p != "core")
                theirs = sum(bare.get(p, 0) for p in ("get_pages", "dma_map", "dma_unmap", "put_pages"))
                own = f"{(mine - theirs) / 1e3:.1f}"
            label = CLIENTS[name][0]
            if label in ("bare", "anchor", "ideal"):
                label += "(p)" if CLIENTS[name][1] == "persistent" else "(r)"
            print(f"{layout:<11} {fmt_size(size):>7} {label:<10} "
                  f"{total / 1e3:>9.1f} " + " ".join(f"{v / 1e3:>9.1f}" for v in phases) +
                  f" {other / 1e3:>9.1f} {pr['drain_ns'] / n / 1e3:>9.1f} {own:>10}")
        print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", help="the guest's serial log (build/bench/serial.log.txt)")
    ap.add_argument("--json", required=True, help="where to write the JSON rows")
    ap.add_argument("--module", help="nvidia_peermem.ko, for the context size (DWARF)")
    ap.add_argument("--icount", default="off", help="QEMU's -icount setting of the run")
    args = ap.parse_args()
    with open(args.log, encoding="utf-8", errors="replace") as f:
        env, sgs, loops, profiles, done = parse(f)
    if not loops:
        print("bench: no measurement in the guest's log", file=sys.stderr)
        return 1
    ctx = dwarf_size(args.module, CONTEXT_TYPE) if args.module else None
    ctx_src = "sizeof from the module's DWARF" if ctx else "fallback constant, DWARF unreadable"
    ctx = ctx or CONTEXT_FALLBACK
    sg_size = (dwarf_size(args.module, "scatterlist") if args.module else None) or SCATTERLIST_FALLBACK
    rows = analyse(sgs, loops, ctx, sg_size)
    for r in rows:
        pr = profiles.get((r["cost_us"], r["row"], r["layout"], r["size_bytes"]))
        if pr:
            r["profile_ns_per_reg"] = dict({p: pr.get(p, 0) for p in PHASES},
                                           total=pr["elapsed_ns"] / pr["count"],
                                           drain=pr["drain_ns"] / pr["count"])
    verdicts = judge(rows)
    print_tables(env, rows, verdicts, ctx, ctx_src, sg_size, args.icount)
    print_profiles(profiles)
    if not done:
        print("bench: the guest did not finish every measurement", file=sys.stderr)
    keys = ["stack", "client", "layout", "size_bytes", "regs_per_sec", "ratio_vs_bare",
            "provider_calls_per_reg", "sges_per_reg", "client_bytes_per_gib",
            "speedup_vs_anchor", "ratio_vs_ideal",
            # beyond the keys: which run and API the row is, and its spread
            "cost_us", "api", "ns_per_reg", "ns_min", "ns_max", "reps", "count_per_rep",
            "drain_ns_per_reg", "pins_per_reg", "maps_per_reg", "unmaps_per_reg", "unpins_per_reg",
            "client_bytes_per_reg", "profile_ns_per_reg", "ratio_vs_kernel_mode"]
    out = []
    for r in rows:
        o = {k: r.get(k) for k in keys}
        o["guest_clock"] = f"icount {args.icount}" if args.icount != "off" else "real"
        o["ratio_min"] = min(r["ratios"]) if r["ratios"] else None
        o["ratio_max"] = max(r["ratios"]) if r["ratios"] else None
        o["ratio_target_met"] = None if r["row"] not in OURS or r["stack"] == "carried" else bool(
            r["ratio_vs_bare"] is not None and r["ratio_vs_bare"] <= ratio_target(r["size_bytes"]))
        out.append(o)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"bench: {len(out)} rows written to {args.json}")
    misses = sum(v[2] == "MISS" for v in verdicts)
    met = sum(v[2] == "PASS" for v in verdicts)
    print(f"bench: {met} targets met, {misses} missed")
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
