#!/usr/bin/env python3
"""The daemon's layers, checked: no file of src/ includes a header of a layer above its own.

Each folder of src/ is a layer, with its headers in include/netlatd/<layer>/
(src/CMakeLists.txt builds one library per layer). A file may include headers
of its own layer and of the layers below it, never of one above: model code
that included a service header would tie the histograms to the daemon loop.
The same order is checked against the DEPENDS of each netlatd_layer() in
src/CMakeLists.txt, so that the link graph says what the includes say.

Usage: layer_check.py SOURCE_DIR       exit 0 when every include goes down, 1 (and one line each) when not
       layer_check.py --self-test      the check run on a small tree with a wrong-way include: it must fail
"""
import pathlib
import re
import sys
import tempfile

# Lowest first. A layer may include its own headers and those of the layers before it.
LAYERS = [
    "base",     # errors, Fd, clocks, the version; netlatd/abi.h and stage_math.h (shared with bpf/) count as base
    "model",    # histograms, stages, breakdown, the interval aggregate, losses, the metrics snapshot
    "decode",   # ring records into packets
    "kernel",   # hook choice, loading and attaching, ksyms, the ring, privileges
    "net",      # interfaces, IRQ lines, what is watched, following them, cgroups
    "output",   # JSON and text lines, labels, Prometheus, the HTTP endpoint, the sink
    "service",  # the daemon loop, options, reload, sd_notify, logging
    "page",     # `netlatd report`'s HTML page (built beside the daemon, called from main)
    "app",      # main, --demo, --check
]
RANK = {name: i for i, name in enumerate(LAYERS)}
# Headers outside the layer folders, and the layer they count as.
LOOSE_HEADERS = {"netlatd/abi.h": "base", "netlatd/stage_math.h": "base", "netlatd/version.hpp": "base"}
# Only the kernel layer includes the BPF skeleton.
SKELETON = "netlatd.skel.h"

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)


def layer_of_header(header):
    """The layer of an included header, None when it is not one of netlatd's."""
    if header in LOOSE_HEADERS:
        return LOOSE_HEADERS[header]
    if header == SKELETON:
        return "kernel"
    parts = header.split("/")
    if parts[0] != "netlatd":
        return None
    if len(parts) == 3:
        return parts[1]
    return "?"  # a header of include/netlatd/ in no layer folder


def files_by_layer(root):
    """(path, layer) of every C++ file of src/ and include/netlatd/; layer "?" outside the folders."""
    out = []
    for base in (root / "src", root / "include" / "netlatd"):
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".cpp", ".hpp", ".h", ".in") or not path.is_file():
                continue
            rel = path.relative_to(base)
            if path.name in ("abi.h", "stage_math.h") and len(rel.parts) == 1:
                continue  # headers the kernel side shares, no layer's code
            out.append((path, rel.parts[0] if len(rel.parts) > 1 else "?"))
    return out


def check_includes(root):
    problems = []
    for path, layer in files_by_layer(root):
        shown = path.relative_to(root)
        if layer not in RANK:
            problems.append(f"{shown}: not in a layer folder (layers: {', '.join(LAYERS)}; a new one goes in "
                            f"tests/unit/scripts/layer_check.py and src/CMakeLists.txt)")
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = m.group(1)
            target = layer_of_header(header)
            if target is None:
                continue
            if target not in RANK:
                problems.append(f"{shown}:{n}: includes {header}, which is in no layer")
            elif header == SKELETON and layer != "kernel":
                problems.append(f"{shown}:{n}: includes the BPF skeleton; only the kernel layer loads programs")
            elif RANK[target] > RANK[layer]:
                problems.append(f"{shown}:{n}: {layer} includes {header}, of the {target} layer above it "
                                f"(order: {' < '.join(LAYERS)})")
    return problems


def check_cmake(root):
    cmake = root / "src" / "CMakeLists.txt"
    if not cmake.is_file():
        return []
    problems = []
    text = cmake.read_text()
    for m in re.finditer(r"netlatd_layer\(\s*(\w+)(.*?)\)", text, re.S):
        name, body = m.group(1), m.group(2)
        if name not in RANK:
            problems.append(f"src/CMakeLists.txt: layer {name} is not in the layer table")
            continue
        deps = re.search(r"DEPENDS(.*)", body, re.S)
        for dep in re.findall(r"\bnetlatd_(\w+)", deps.group(1) if deps else ""):
            if dep in RANK and RANK[dep] >= RANK[name]:
                problems.append(f"src/CMakeLists.txt: netlatd_{name} depends on netlatd_{dep}, "
                                f"not a layer below it")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "src" / "model").mkdir(parents=True)
        (root / "src" / "service").mkdir(parents=True)
        (root / "src" / "model" / "ok.cpp").write_text('#include "netlatd/base/errors.hpp"\n')
        (root / "src" / "service" / "ok.cpp").write_text('#include "netlatd/model/histogram.hpp"\n')
        (root / "src" / "model" / "bad.cpp").write_text('#include <vector>\n#include "netlatd/service/options.hpp"\n')
        (root / "src" / "CMakeLists.txt").write_text("netlatd_layer(model\n  SOURCES a.cpp\n  DEPENDS netlatd_output)\n")
        problems = check_includes(root) + check_cmake(root)
        expected = ["src/model/bad.cpp:2: model includes netlatd/service/options.hpp",
                    "netlatd_model depends on netlatd_output"]
        missing = [e for e in expected if not any(e in p for p in problems)]
        if missing or len(problems) != 2:
            print("self-test: the check did not report what it should:", problems, file=sys.stderr)
            return 1
    print("self-test: a wrong-way include and a wrong-way link are both reported")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    problems = check_includes(root) + check_cmake(root)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"every include of src/ goes down the layers: {' < '.join(LAYERS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
