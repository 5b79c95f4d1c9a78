#!/usr/bin/env python3
"""Every BPF program of the object, with any bpf_loop callback and global
function it may call, fits the 512 bytes of stack that older verifiers (Debian 12's 6.1) allow for a
program and its callees together. Newer kernels accept some objects 6.1
refuses ("combined stack size of 2 calls is 544. Too large"), so the bpf tier
on this machine's kernel does not catch it.

Like the verifier, each frame's depth is rounded up to 32 bytes. Which
callbacks and functions (.text) a program calls is not worked out: a chain of
the two deepest is assumed (a callback that calls a global function, such as
read_step calling emit_rec), so the check is conservative. Exit 0 when all fit, 1 otherwise, 77 without
llvm-objdump."""
import re
import shutil
import subprocess
import sys

LIMIT = 512


def frames(obj):
    tool = shutil.which("llvm-objdump")
    if not tool:
        print("SKIPPED: llvm-objdump not found")
        sys.exit(77)
    out = subprocess.run([tool, "-d", "--no-show-raw-insn", obj], check=True, capture_output=True, text=True).stdout
    depth, section, name = {}, None, None
    for line in out.splitlines():
        m = re.match(r"^Disassembly of section (\S+):", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^[0-9a-f]+ <(.*)>:", line)
        if m and not m.group(1).startswith("LBB"):
            name = (section, m.group(1))
            depth.setdefault(name, 0)
            continue
        for off in re.findall(r"r10 - (0x[0-9a-f]+|\d+)", line):
            depth[name] = max(depth[name], int(off, 0))
    return depth


def main():
    depth = frames(sys.argv[1])
    rounded = lambda d: (max(d, 1) + 31) // 32 * 32
    callbacks = {n: d for (s, n), d in depth.items() if s == ".text"}
    programs = {n: d for (s, n), d in depth.items() if s != ".text"}
    if not programs:
        print("no BPF programs found in", sys.argv[1])
        return 1
    deepest = sorted(callbacks.items(), key=lambda kv: -kv[1])[:2]
    extra = sum(rounded(d) for _, d in deepest)
    chain = " + ".join(f"{n} {d}" for n, d in deepest) or "none"
    bad = 0
    for name, d in sorted(programs.items(), key=lambda kv: -kv[1]):
        total = rounded(d) + extra
        ok = total <= LIMIT
        bad += not ok
        print(f"{'ok ' if ok else 'TOO LARGE'} {name}: {d} bytes (+ {chain}) = {total} of {LIMIT}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
