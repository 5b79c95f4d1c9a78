#!/usr/bin/env python3
"""Every BPF program of the object, with the bpf_loop callbacks and global
functions it may call, fits the 512 bytes of stack that older verifiers
(Debian 12's 6.1) allow for a program and its callees together. Newer kernels
accept some objects 6.1 refuses ("combined stack size of 2 calls is 544. Too
large"), so the bpf tier on this machine's kernel does not catch it.

Like 6.1's verifier, each frame's depth is rounded up to 32 bytes, and a frame
without stack counts 32. The call graph comes from the object's relocations:
a call to a global function (R_BPF_64_32 naming it) and a callback's address
loaded for bpf_loop (R_BPF_64_64 against .text, at the offset the instruction
holds). The deepest chain from each program is checked, whichever of its
branches the verifier walks. Exit 0 when all fit, 1 otherwise, 77 without
llvm-objdump."""
import re
import shutil
import subprocess
import sys

LIMIT = 512
INSN = 8


def parse(obj):
    tool = shutil.which("llvm-objdump")
    if not tool:
        print("SKIPPED: llvm-objdump not found")
        sys.exit(77)
    out = subprocess.run([tool, "-dr", "--no-show-raw-insn", obj], check=True, capture_output=True,
                         text=True).stdout
    depth, calls, text_at = {}, {}, {}
    section, name, last_imm = None, None, None
    for line in out.splitlines():
        m = re.match(r"^Disassembly of section (\S+):", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^([0-9a-f]+) <(.*)>:", line)
        if m and not m.group(2).startswith("LBB"):
            name = (section, m.group(2))
            depth.setdefault(name, 0)
            calls.setdefault(name, set())
            if section == ".text":
                text_at[int(m.group(1), 16)] = m.group(2)
            continue
        if name is None:
            continue
        m = re.search(r"R_BPF_64_32\s+(\S+)", line)
        if m:
            calls[name].add(("call", m.group(1)))
            continue
        m = re.search(r"R_BPF_64_64\s+\.text$", line)
        if m and last_imm is not None:
            calls[name].add(("at", last_imm))
            continue
        m = re.search(r"=\s+(-?\d+) ll$", line)
        last_imm = int(m.group(1)) if m else None
        for off in re.findall(r"r10 - (0x[0-9a-f]+|\d+)", line):
            depth[name] = max(depth[name], int(off, 0))
    return depth, calls, text_at


def main():
    depth, calls, text_at = parse(sys.argv[1])
    rounded = lambda d: (max(d, 1) + 31) // 32 * 32
    text = {n for (s, n) in depth if s == ".text"}

    def callees(key):
        for kind, what in calls.get(key, ()):
            if kind == "call" and what in text:
                yield what
            elif kind == "at" and what in text_at:
                yield text_at[what]

    memo = {}

    def deepest(key, seen=()):
        """(bytes, chain) of the deepest path from this function."""
        if key in memo:
            return memo[key]
        best = (0, [])
        for callee in callees(key):
            if callee in seen:
                continue
            d, chain = deepest((".text", callee), seen + (callee,))
            if d > best[0]:
                best = (d, chain)
        here = (rounded(depth[key]) + best[0], [f"{key[1]} {depth[key]}"] + best[1])
        memo[key] = here
        return here

    programs = [k for k in depth if k[0] != ".text"]
    if not programs:
        print("no BPF programs found in", sys.argv[1])
        return 1
    bad = 0
    for key in sorted(programs, key=lambda k: -deepest(k)[0]):
        total, chain = deepest(key)
        ok = total <= LIMIT
        bad += not ok
        print(f"{'ok ' if ok else 'TOO LARGE'} {key[1]}: {' -> '.join(chain)} = {total} of {LIMIT}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
