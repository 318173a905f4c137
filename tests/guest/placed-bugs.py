#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Places a bug of BUGS in the module's code, runs the guest scenarios that
must catch it (make check-guest, GUEST_OUT=build/guest-placed), prints the
checks that failed, and puts the code back. tests/guest/README.md ("Placed
bugs in the guest") has the table this prints.

    flock /tmp/nvpm-heavy.lock tests/guest/placed-bugs.py [NAME...]

Run from the repository root; the tree must be clean in the files it
changes (they are restored from memory afterwards, even on ^C). A bug is
caught when at least one check fails; the script exits 1 if one is not.
"""

import os
import subprocess
import sys
import time

CORE = "src/core/src/"

# name -> (what the bug is, scenarios, [(file, old, new)])
BUGS = {
    "map-revoked": (
        "the module maps a table it knows is revoked: the callback keeps the "
        "table, and neither the registration's phase nor the pin's revoked "
        "flag is checked before dma_map_pages (protocol.rs `free_callback`, "
        "`map`; client.rs `dma_map`)",
        "43-* 51-*",
        [
            (CORE + "protocol.rs", "        st.mapping = None;\n        st.pages = None;\n",
             "        st.mapping = None;\n"),
            (CORE + "protocol.rs", "            _ if st.revoked => Err(MapFailure::Revoked),\n", ""),
            (CORE + "client.rs",
             "let begin = |reg: &mut Registration<E>| reg.apply(Event::MapBegin).map(|_| ());",
             "let begin = |reg: &mut Registration<E>| {\n"
             "        match reg.apply(Event::MapBegin) {\n"
             "            Err(Refusal::Revoked) => Ok(()),\n"
             "            r => r.map(|_| ()),\n"
             "        }\n"
             "    };"),
        ],
    ),
}


def place(edits):
    saved = {}
    for path, old, new in edits:
        text = saved.get(path)
        if text is None:
            with open(path) as f:
                text = f.read()
            saved[path] = text
        with open(path) as f:
            cur = f.read()
        if cur.count(old) != 1:
            raise SystemExit(f"{path}: the text to replace is not there once: {old!r}")
        with open(path, "w") as f:
            f.write(cur.replace(old, new))
    return saved


def restore(saved):
    for path, text in saved.items():
        with open(path, "w") as f:
            f.write(text)


def run(name):
    what, scenarios, edits = BUGS[name]
    out = "build/guest-placed"
    saved = place(edits)
    t0 = time.time()
    try:
        env = dict(os.environ, GUEST_SCENARIOS=scenarios, GUEST_OUT=out)
        subprocess.run(["make", "check-guest"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        restore(saved)
    secs = time.time() - t0
    fails = []
    try:
        with open(os.path.join(out, "results.log.txt"), errors="replace") as f:
            fails = [l.strip() for l in f if l.startswith("NVPM-RESULT FAIL")]
    except OSError as e:
        fails = []
        print(f"{name}: no results: {e}")
    print(f"== {name}: {what}")
    print(f"   scenarios {scenarios}, {secs:.0f} s (build and guest): {len(fails)} failed check(s)")
    for l in fails:
        print("   " + l)
    return bool(fails)


def main():
    names = sys.argv[1:] or list(BUGS)
    for n in names:
        if n not in BUGS:
            raise SystemExit(f"unknown bug {n}; known: {', '.join(BUGS)}")
    missed = [n for n in names if not run(n)]
    if missed:
        print("not caught: " + ", ".join(missed))
        sys.exit(1)


if __name__ == "__main__":
    main()
