#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""check-ko.py: does a built x86-64 or arm64 module obey what its kernel's
.config asks of module code? Reads the object. x86-64 (QEMU's TCG enforces
none of it):

  ibt        CONFIG_X86_KERNEL_IBT: every function whose address is taken (a
             relocation from data, e.g. a vtable, a callback table, the
             module's init/exit) starts with endbr64
  padding    CONFIG_CALL_PADDING: every function has FUNCTION_PADDING_BYTES
             of nops before it (call-depth tracking patches calls into them)
  rethunk    CONFIG_(MITIGATION_)RETHUNK: no bare ret; returns jump to
             __x86_return_thunk
  retpoline  CONFIG_(MITIGATION_)RETPOLINE: no indirect call or jump; they go
             through __x86_indirect_thunk_* (paravirt and alternative sites,
             which the kernel patches at load, excepted)

arm64 (QEMU's -cpu max enforces both at run time, on the paths a test takes):

  bti        CONFIG_ARM64_BTI_KERNEL: every address-taken function starts
             with a landing pad, `bti c`/`bti jc`, or `paciasp`/`pacibsp`
             (an implicit one), after the nops of a patchable entry
  pac        CONFIG_ARM64_PTR_AUTH_KERNEL: every function that stores its
             return address (x30) signs it first (`paciasp`/`pacibsp`)

Usage: check-ko.py [--name NAME] KCONFIG OBJECT
Prints "PASS NAME/check" or "FAIL NAME/check: ..." per check that the
config asks for, "SKIP" for the others; exit 1 on any FAIL.
Needs binutils that know the object's architecture (readelf, objcopy,
objdump; for arm64 on another host aarch64-linux-gnu-*, as the root has).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

TEXT_RE = re.compile(r"^\.(text|init\.text|exit\.text)(\..*)?$")
# Sections whose relocations take a function's address for an indirect call.
DATA_RE = re.compile(r"^\.(data|rodata|data\.rel\.ro|gnu\.linkonce\.this_module|init\.data|exit\.data)(\..*)?$")
ENDBR64 = bytes.fromhex("f30f1efa")


# The binutils to read the object with: the native ones, or for an arm64
# object the cross ones where the native ones are another architecture's.
TOOLS = {"readelf": "readelf", "objcopy": "objcopy", "objdump": "objdump"}


def run(*args):
    args = (TOOLS.get(args[0], args[0]),) + args[1:]
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def pick_tools(obj):
    """Cross binutils for an aarch64 object on a host of another architecture."""
    with open(obj, "rb") as f:
        head = f.read(20)
    if head[18:20] == (183).to_bytes(2, "little") and os.uname().machine != "aarch64":
        for tool in TOOLS:
            if shutil.which("aarch64-linux-gnu-" + tool):
                TOOLS[tool] = "aarch64-linux-gnu-" + tool
        return "arm64"
    return "arm64" if head[18:20] == (183).to_bytes(2, "little") else "x86"


def kconfig(path):
    conf = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$", line.strip())
        if m:
            conf[m.group(1)] = m.group(2).strip('"')
    return conf


def sections(obj):
    """name -> (index, size) of the object's sections."""
    out = {}
    for line in run("readelf", "-SW", obj).splitlines():
        m = re.match(r"^\s*\[\s*(\d+)\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m:
            out[m.group(2)] = (int(m.group(1)), int(m.group(3), 16))
    return out


def functions(obj, secs):
    """(section name, offset, size, name) of every defined function."""
    by_index = {idx: name for name, (idx, _) in secs.items()}
    funcs = []
    for line in run("readelf", "-sW", obj).splitlines():
        f = line.split()
        # gcc's __pfx_/__cfi_ symbols name the padding itself, and its .cold
        # parts of a function are jumped to, never called.
        if len(f) >= 8 and f[3] == "FUNC" and f[6].isdigit() and not (
                f[7].startswith(("__pfx_", "__cfi_")) or ".cold" in f[7]):
            sec = by_index.get(int(f[6]))
            if sec and TEXT_RE.match(sec):
                size = int(f[2], 16) if f[2].startswith("0x") else int(f[2])
                funcs.append((sec, int(f[1], 16), size, f[7]))
    return funcs


def section_bytes(obj, name):
    with tempfile.NamedTemporaryFile() as tmp:
        subprocess.run([TOOLS["objcopy"], "-O", "binary", "--only-section=" + name, obj, tmp.name],
                       check=True, capture_output=True)
        return open(tmp.name, "rb").read()


def relocations(obj):
    """(relocated section, symbol, addend) of every relocation in obj."""
    current = None
    for line in run("readelf", "-rW", obj).splitlines():
        m = re.match(r"^Relocation section '\.rela(\S+)'", line)
        if m:
            current = m.group(1)
            continue
        f = line.split()
        if current and len(f) >= 5 and re.match(r"^[0-9a-f]+$", f[0]):
            addend = 0
            if len(f) >= 7 and f[5] in "+-":
                addend = int(f[6], 16) * (1 if f[5] == "+" else -1)
            yield current, f[4], addend


def address_taken(relocs, secs, funcs):
    """Functions referenced by a relocation from a data section."""
    start = {(s, off): name for s, off, _, name in funcs}
    names = {name for _, _, _, name in funcs}
    taken = set()
    for section, sym, addend in relocs:
        if not DATA_RE.match(section):
            continue
        if sym in secs:
            name = start.get((sym, addend))
        else:
            name = sym if sym in names and addend == 0 else None
        if name:
            taken.add(name)
    return taken


def patch_sites(relocs, secs):
    """(section, offset) of the paravirt and alternative patch sites: the
    kernel rewrites those instructions at load (objtool accepts them too)."""
    return {(sym, addend) for section, sym, addend in relocs
            if section in (".parainstructions", ".altinstructions") and sym in secs}


def disasm_lines(obj):
    """(section, offset, text) of every instruction in the text sections."""
    sec = None
    for line in run("objdump", "-d", "-w", "-r", obj).splitlines():
        m = re.match(r"^Disassembly of section (\S+):", line)
        if m:
            sec = m.group(1)
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(.*)$", line)
        if m and sec and TEXT_RE.match(sec):
            yield sec, int(m.group(1), 16), m.group(2)


def disasm_words(obj):
    """(section, offset, instruction word, text) of every arm64 instruction
    in the text sections."""
    sec = None
    for line in run("objdump", "-d", "-w", obj).splitlines():
        m = re.match(r"^Disassembly of section (\S+):", line)
        if m:
            sec = m.group(1)
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+([0-9a-f]{8})\s+(.*)$", line)
        if m and sec and TEXT_RE.match(sec):
            yield sec, int(m.group(1), 16), int(m.group(2), 16), m.group(3)


NOP = 0xd503201f
PAC_SP = {0xd503233f, 0xd503237f}  # paciasp, pacibsp
BTI_C = {0xd503245f, 0xd50324df}   # bti c, bti jc
# A store of x30 (the return address) to memory: stp/str/stur naming x30.
STORE_LR_RE = re.compile(r"^(stp|str|stur)\s+(.*\bx30\b.*)\[")


def check_arm64(name, conf, obj, funcs, secs, report, on):
    relocs = list(relocations(obj))
    # The function each instruction belongs to.
    spans = sorted((s, off, off + size, n) for s, off, size, n in funcs if size)
    words = {}
    for sec, off, word, text in disasm_words(obj):
        words[(sec, off)] = (word, text)

    bti = on("CONFIG_ARM64_BTI_KERNEL")
    taken = address_taken(relocs, secs, funcs) if bti else set()
    no_pad = []
    for s, off, size, n in funcs:
        if n not in taken:
            continue
        at = off
        while words.get((s, at), (None,))[0] == NOP and at < off + size:
            at += 4
        if words.get((s, at), (None,))[0] not in BTI_C | PAC_SP:
            no_pad.append(n)
    report("bti", bti, no_pad, f"of {len(taken)} address-taken functions start with no landing pad")

    unsigned = []
    for s, start, end, n in spans:
        signed = False
        for at in range(start, end, 4):
            word, text = words.get((s, at), (None, ""))
            if word in PAC_SP:
                signed = True
            elif STORE_LR_RE.match(text) and not signed:
                unsigned.append(n)
                break
    report("pac", on("CONFIG_ARM64_PTR_AUTH_KERNEL"), unsigned,
           f"of {len(spans)} functions store the return address unsigned")


def main(argv):
    name = "kocheck"
    if len(argv) > 2 and argv[0] == "--name":
        name, argv = argv[1], argv[2:]
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-4], file=sys.stderr)
        return 2
    conf = kconfig(argv[0])
    obj = argv[1]
    arch = pick_tools(obj)
    secs = sections(obj)
    funcs = functions(obj, secs)
    if not funcs:
        print(f"FAIL {name}/object: {obj} has no functions in its text sections")
        return 1
    on = lambda *opts: any(conf.get(o) == "y" for o in opts)
    failed = False

    def report(check, wanted, bad, what):
        nonlocal failed
        if not wanted:
            print(f"SKIP {name}/{check}: not configured")
        elif bad:
            failed = True
            print(f"FAIL {name}/{check}: {len(bad)} {what}, e.g. {', '.join(bad[:3])}")
        else:
            print(f"PASS {name}/{check}")

    if arch == "arm64":
        check_arm64(name, conf, obj, funcs, secs, report, on)
        return 1 if failed else 0

    data = {s: section_bytes(obj, s) for s in {f[0] for f in funcs}}
    relocs = list(relocations(obj))

    taken = address_taken(relocs, secs, funcs) if on("CONFIG_X86_KERNEL_IBT") else set()
    no_endbr = [n for s, off, _, n in funcs if n in taken and data[s][off:off + 4] != ENDBR64]
    report("ibt", on("CONFIG_X86_KERNEL_IBT"), no_endbr,
           f"of {len(taken)} address-taken functions do not start with endbr64")

    pad = int(conf.get("CONFIG_FUNCTION_PADDING_BYTES", "0") or 0)
    unpadded = [n for s, off, size, n in funcs
                if size and not (off >= pad and set(data[s][off - pad:off]) <= {0x90, 0xcc})]
    report("padding", on("CONFIG_CALL_PADDING") and pad > 0, unpadded,
           f"of {len(funcs)} functions lack {pad} bytes of padding")

    rets, indirect = [], []
    sites = patch_sites(relocs, secs)
    for sec, off, text in disasm_lines(obj):
        if (sec, off) in sites:
            continue
        if re.match(r"^(ret|retq|retl)\b", text):
            rets.append(f"{sec}+{off:#x}")
        elif re.match(r"^(call|jmp)q?\s+\*", text) or re.match(r"^notrack\s+(call|jmp)", text):
            indirect.append(f"{sec}+{off:#x}")
    report("rethunk", on("CONFIG_MITIGATION_RETHUNK", "CONFIG_RETHUNK"), rets, "bare ret instructions")
    report("retpoline", on("CONFIG_MITIGATION_RETPOLINE", "CONFIG_RETPOLINE"), indirect,
           "indirect calls or jumps")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
