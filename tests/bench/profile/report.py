#!/usr/bin/env python3
"""`make bench-profile`'s table (tests/bench/profile/run.sh): guest
instructions per registration, per function, for each client and the bare
provider of the same API, from the plugin's block counts of each step minus
those of the base step.

Usage: report.py --out DIR --ksyms FILE --count N [--what TEXT] CLIENT:BARE...
"""

import argparse
import bisect
import collections
import sys
from pathlib import Path


def read_symbols(*files):
    """(sorted addresses, names) of the "KSYM ADDR TYPE NAME [MODULE]" lines."""
    syms = {}
    for f in files:
        for line in Path(f).read_text(errors="replace").splitlines():
            p = line.split()
            if len(p) >= 4 and p[0] == "KSYM":
                name = p[3] + (" " + p[4] if len(p) > 4 else "")
                syms[int(p[1], 16)] = name
    addrs = sorted(syms)
    return addrs, [syms[a] for a in addrs]


def per_symbol(step_dir, ksyms):
    """Instructions per symbol of one step (its own module symbols)."""
    addrs, names = read_symbols(ksyms, step_dir / "results.log.txt")
    total = collections.Counter()
    for line in (step_dir / "blocks.txt").read_text().splitlines():
        vaddr, insns, execs = line.split()
        i = bisect.bisect_right(addrs, int(vaddr, 16)) - 1
        total[names[i] if i >= 0 else "?"] += int(insns) * int(execs)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--ksyms", required=True)
    ap.add_argument("--count", required=True, type=int)
    ap.add_argument("--what", default="")
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("pairs", nargs="+")
    a = ap.parse_args()
    base = per_symbol(a.out / "base", a.ksyms)
    steps = {}

    def per_reg(step):
        if step not in steps:
            c = per_symbol(a.out / step, a.ksyms)
            steps[step] = {k: (c[k] - base[k]) / a.count for k in set(c) | set(base)}
        return steps[step]

    print(f"where a registration's guest instructions go ({a.what}; "
          f"{a.count} registrations + deregistrations, minus the base boot)")
    print("client = the client's loop, bare = the bare provider's loop; diff = client - bare; "
          "boot-to-boot noise (interrupts, timers) shows as small +/- rows\n")
    for pair in a.pairs:
        client, bare = pair.split(":")
        c, b = per_reg(client), per_reg(bare)
        tc, tb = sum(c.values()), sum(b.values())
        print(f"== {client} against {bare}: {tc:,.0f} against {tb:,.0f} instructions per "
              f"registration, {tc - tb:+,.0f} ({tc / tb:.3f}x)")
        print(f"{'client':>10} {'bare':>10} {'diff':>10}  function")
        keys = sorted(set(c) | set(b), key=lambda k: -abs(c.get(k, 0) - b.get(k, 0)))
        shown = 0
        for k in keys:
            d = c.get(k, 0) - b.get(k, 0)
            if shown >= a.rows or abs(d) < 1:
                break
            print(f"{c.get(k, 0):10,.1f} {b.get(k, 0):10,.1f} {d:+10,.1f}  {k}")
            shown += 1
        mods = collections.Counter()
        for k in set(c) | set(b):
            mod = k.split()[1] if " " in k else "[kernel]"
            mods[mod] += c.get(k, 0) - b.get(k, 0)
        print("by module (diff): " + ", ".join(f"{m} {v:+,.0f}" for m, v in mods.most_common()))
        print()


if __name__ == "__main__":
    sys.exit(main())
