#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Places each bug of BUGS in the shared client code (or the module's FFI
calls as the loom models write them), runs the loom models and the core's
own tests, reports which fail and how fast, and puts the code back.
tests/loom/README.md has the table this prints.

    tests/loom/placed-bugs.py [NAME...]     # all bugs, or those named

Run from the repository root; the tree must be clean in the files it
changes (they are restored from memory afterwards, even on ^C).
"""

import os
import re
import signal
import subprocess
import sys
import time

CORE = "src/core/src/"
LOOM = "tests/loom/tests/protocol.rs"

# name -> (what the bug is, [(file, old, new)])
BUGS = {
    "check-undo-unmarked": (
        "the failed mapping check unmaps without marking `unmapping` (protocol.rs `map`)",
        [(CORE + "protocol.rs", "                st.unmapping = true;\n                drop(st);", "                drop(st);")],
    ),
    "sg-undo-unmarked": (
        "the scatterlist failure's undo does not mark `unmapping` (protocol.rs `take_mapping`)",
        [(CORE + "protocol.rs", "        self.unmapping = true;\n        Some(Unmap", "        Some(Unmap")],
    ),
    "release-skips-forwarder": (
        "release does not wait for the forwarding thread (protocol.rs `lock_after_forward`)",
        [(CORE + "protocol.rs", "Some(id) if id != me =>", "Some(id) if id != me && false =>")],
    ),
    "failed-put-drops-reference": (
        "a failed put gives the driver's reference back all the same (protocol.rs `Teardown::unpin`)",
        [(CORE + "protocol.rs", "&& (ret == 0 || {", "&& (ret == 0 || ret != 0 || {")],
    ),
    "late-put-error-keeps-reference": (
        "an error from the put is read as 'the driver kept the pin' even after its callback ran (protocol.rs `Teardown::unpin`)",
        [(CORE + "protocol.rs", "&& (ret == 0 || {", "&& (ret == 0 || false && {")],
    ),
    "client-lock-across-pin": (
        "a client-wide lock held across the driver's pin in acquire and taken by the callback (the FFI glue, as the loom glue mirrors it)",
        [
            (LOOM, "            gpu.pin(data, buffer, &core.nic_may_use)\n",
             "            let held = gpu.client_lock.lock().unwrap();\n            let table = gpu.pin(data, buffer, &core.nic_may_use);\n            drop(held);\n            table\n"),
            (LOOM, "fn free_callback(pin: &Pin) {\n", "fn free_callback(pin: &Pin) {\n    drop(pin.gpu.client_lock.lock().unwrap());\n"),
        ],
    ),
    "accept-revoked-pages": (
        "a pin revoked right after get_pages is accepted (protocol.rs `accept_pages`)",
        [(CORE + "protocol.rs", "    if st.revoked {\n        return None;\n    }\n    st.pages = Some(table);", "    st.pages = Some(table);")],
    ),
    "callback-skips-unmap-wait": (
        "the callback does not wait for an unmap of its table in flight (protocol.rs `free_callback`)",
        [(CORE + "protocol.rs", "    while st.unmapping {", "    while st.unmapping && false {")],
    ),
    "callback-unmaps-before-forward": (
        "the callback unmaps its mapping itself before forwarding the invalidation (protocol.rs `free_callback`)",
        [(CORE + "protocol.rs",
          "        let owns = !st.putting;\n        // The driver frees both after we return.\n        st.mapping = None;",
          "        let owns = !st.putting;\n        if let (Some(table), Some(mapping)) = (st.pages, st.mapping.take()) {\n            pin.driver().dma_unmap(table, mapping);\n        }\n        // The driver frees both after we return.\n        st.mapping = None;")],
    ),
    "persistent-drops-reference": (
        "a persistent pin's unpin drops a driver reference it never handed out (protocol.rs `Teardown::unpin`)",
        [(CORE + "protocol.rs", "        let drop_reference = kind == PinKind::Revocable\n            &&", "        let drop_reference = true\n            &&")],
    ),
    "exit-skips-callbacks": (
        "the module's exit does not wait for the callbacks in flight (protocol.rs `wait_for_callbacks`)",
        [(CORE + "protocol.rs", "    if !dropped {\n        return;\n    }", "    if !dropped || true {\n        return;\n    }")],
    ),
    "acquire-before-handle": (
        "the revocable client accepts registrations before its handle is stored (client.rs `Registration::new`)",
        [(CORE + "client.rs", "is_some_and(|i| !i.ready())", "is_some_and(|i| !i.ready() && false)")],
    ),
    "slot-ready-unregistered": (
        "the invalidator slot says it is ready before its handle is stored (client.rs `Invalidator::ready`)",
        [(CORE + "client.rs", "    fn ready(&self) -> bool {\n        self.handle().is_some()\n    }",
          "    fn ready(&self) -> bool {\n        true\n    }")],
    ),
    "map-waits-in-callback": (
        "the callback waits for a map in flight (the deadlock of 51's map-waits-lock)",
        [(CORE + "protocol.rs", "    while st.unmapping {", "    while st.unmapping || st.mapping_in_flight {")],
    ),
    "reserve-under-lock": (
        "the scatterlist's reserve is allocated with the pin's lock held (client.rs `dma_map`)",
        [(CORE + "client.rs", "                drop(st);\n                let reserved = reserve(scratch);\n                st = pin.lock();",
          "                let reserved = reserve(scratch);")],
    ),
    "build-reclaims-under-lock": (
        "the scatterlist is allocated with reclaim under the pin's lock (GFP_KERNEL in SgTable::new, as the loom glue mirrors it)",
        [(LOOM, "        // The SG list is built from the driver's addresses, lock held.\n",
          "        // The SG list is built from the driver's addresses, lock held.\n        drop(pin.gpu.api.lock().unwrap());\n")],
    ),
    "map-revoked": (
        "the module maps a table it knows is revoked: the callback keeps the table, and neither the phase nor the revoked flag is checked before the driver's map (protocol.rs `free_callback`, `map`; client.rs `dma_map`): expected to pass, loom has no time to tell it from the driver's own race",
        [
            (CORE + "protocol.rs", "        st.mapping = None;\n        st.pages = None;\n", "        st.mapping = None;\n"),
            (CORE + "protocol.rs", "            _ if st.revoked => Err(MapFailure::Revoked),\n", ""),
            (CORE + "client.rs", "let begin = |reg: &mut Registration<E>| reg.apply(Event::MapBegin).map(|_| ());",
             "let begin = |reg: &mut Registration<E>| {\n        match reg.apply(Event::MapBegin) {\n            Err(Refusal::Revoked) => Ok(()),\n            r => r.map(|_| ()),\n        }\n    };"),
        ],
    ),
    "teardown-ends-before-unpin": (
        "a teardown ends (the registration Done) before its unpin (protocol.rs `Teardown::run`)",
        [(CORE + "protocol.rs", "        let unpinned = self.unpin(pin);\n        pin.lock().owner.teardown_end();",
          "        pin.lock().owner.teardown_end();\n        let unpinned = self.unpin(pin);")],
    ),
    "release-mapped-refused": (
        "a Release step while Mapped is refused instead of tearing down (state.rs `step`)",
        [(CORE + "state.rs", "(P::Pinned | P::Bound | P::Mapped | P::Unmapped, E::Release) => {",
          "(P::Pinned | P::Bound | P::Unmapped, E::Release) => {")],
    ),
    "unmap-steps-release": (
        "dma_unmap takes a Release step, while Mapped (client.rs `dma_unmap`)",
        [(CORE + "client.rs", "pin.lock().owner.apply(Event::Unmap).map(|_| ())",
          "pin.lock().owner.apply(Event::Release).map(|_| ())")],
    ),
    "forward-unmapped": (
        "an invalidation is forwarded while Unmapped (state.rs `step`)",
        [(CORE + "state.rs",
          "        (P::Mapped, E::CallbackBegin) => (P::Revoking, A::ForwardInvalidation),\n        (P::Pinned | P::Bound | P::Mapping | P::Unmapped, E::CallbackBegin) => {",
          "        (P::Mapped | P::Unmapped, E::CallbackBegin) => (P::Revoking, A::ForwardInvalidation),\n        (P::Pinned | P::Bound | P::Mapping, E::CallbackBegin) => {")],
    ),
    "refused-pin-keeps-reference": (
        "a revocable pin the driver refused keeps the reference it handed the driver (protocol.rs `pin`)",
        [(CORE + "protocol.rs", "            if pin.kind() == PinKind::Revocable {\n                // The driver refused,",
          "            if false {\n                // The driver refused,")],
    ),
    "bad-table-kept": (
        "a page table that fails the check is not unpinned (protocol.rs `pin`)",
        [(CORE + "protocol.rs", "            finish_unpin(pin, teardown.unpin(pin));\n            Err(PinFailure::Check(e))",
          "            drop(teardown);\n            Err(PinFailure::Check(e))")],
    ),
    "put-unparked": (
        "put_pages unpins at once instead of parking the unpin until release (client.rs `end_of_use`): expected to pass, item 5",
        [(CORE + "client.rs", "if pin.kind() == PinKind::Revocable && event == Event::PutPages {", "if false {")],
    ),
}


# The executions of a finding of the core's tests (not a loom model).
UNIT = -2


def run_models():
    """Builds the loom models and runs each in its own process (a deadlock
    aborts loom's process); returns {model: (executions, seconds, failed)},
    the first report and whether loom saw a deadlock."""
    build = subprocess.run(
        ["cargo", "test", "--release", "--color", "never", "--no-run", "--message-format", "json",
         "--manifest-path", "tests/loom/Cargo.toml", "--target-dir", "target"],
        capture_output=True, text=True, timeout=1800,
    )
    exe = None
    for line in build.stdout.splitlines():
        # The models' test target, not the crate's (empty) library tests.
        if '"executable":"' in line and '"kind":["test"]' in line and '"name":"protocol"' in line:
            exe = re.search(r'"executable":"([^"]+)"', line).group(1)
    if not exe:
        raise SystemExit("placed-bugs: the loom models do not build:\n" + build.stderr[-3000:])
    tests = subprocess.run([exe, "--list"], capture_output=True, text=True).stdout
    tests = [t.split(":")[0] for t in tests.splitlines() if t.endswith(": test")]
    models, first, deadlock, rc = {}, "", False, 0
    line = r"((?:modern|mid|legacy) [^:\n]+): (\d+) executions, ([\d.]+) s( \(failed\))?"
    for test in tests:
        t0 = time.time()
        try:
            p = subprocess.run([exe, "--exact", test, "--nocapture", "--test-threads", "1"],
                               capture_output=True, text=True, timeout=600)
            out, code = p.stdout + p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            out, code = (e.stdout or b"").decode() + " timed out", 124
        m = re.search(line, out)
        if code != 0:
            rc = code
            # A deadlock aborts before the model's line: its time is the process's.
            name = m.group(1) if m else test
            ex = int(m.group(2)) if m else -1
            models[name] = (ex, float(m.group(3)) if m else time.time() - t0, True)
            panic = re.search(r"panicked at [^\n]*\n([^\n]*)", out)
            if panic and not first:
                first = panic.group(1)
            deadlock = deadlock or "deadlock" in out.lower()
        elif m:
            models[m.group(1)] = (int(m.group(2)), float(m.group(3)), False)
    # The core's own tests, the state machine's table among them: a bug no
    # interleaving shows may break a rule they state.
    t0 = time.time()
    # In a session of its own: a test that waits for itself (a placed
    # deadlock) never returns, and its binary goes with cargo's group.
    p = subprocess.Popen(["cargo", "test", "--color", "never", "-p", "peermem-core"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=300)
        unit = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        unit = None
        rc = 124
        models["core tests (hung: a deadlock)"] = (UNIT, time.time() - t0, True)
    if unit is not None and unit.returncode != 0:
        rc = unit.returncode
        failed = re.findall(r"^test (\S+) \.\.\. FAILED$", unit.stdout, re.M)
        for test in failed or ["(does not build)"]:
            models[f"core test {test}"] = (UNIT, time.time() - t0, True)
        panic = re.search(r"panicked at [^\n]*\n([^\n]*)", unit.stdout + unit.stderr)
        if panic and not first:
            first = panic.group(1)
    return rc, models, first, deadlock, ""


def main():
    names = sys.argv[1:] or list(BUGS)
    for name in names:
        what, edits = BUGS[name]
        saved = {}
        try:
            for path, old, new in edits:
                text = saved.get(path) or open(path).read()
                saved.setdefault(path, text)
                cur = open(path).read()
                if cur.count(old) != 1:
                    raise SystemExit(f"{name}: {path}: the text to change is not there once")
                open(path, "w").write(cur.replace(old, new))
            t0 = time.time()
            rc, models, panic, deadlock, out = run_models()
            if not models:
                sys.stdout.write(out[-3000:])
            failed = sorted((n, r) for n, r in models.items() if r[2])
            print(f"## {name}: {what}")
            print(f"   rc={rc}, {time.time() - t0:.0f} s for all models; first report: {panic.strip()[:200]}{' (loom: deadlock)' if deadlock else ''}")
            for n, (ex, sec, _) in failed:
                done = ("after {ex} executions, " if ex >= 0 else
                        "(a test of the core) " if ex == UNIT else
                        "(process aborted on the deadlock) ").format(ex=ex)
                print(f"   caught by {n}: {done}{sec:.2f} s")
            if not failed:
                print("   caught by no model")
        finally:
            for path, text in saved.items():
                open(path, "w").write(text)


if __name__ == "__main__":
    main()
