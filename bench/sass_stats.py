#!/usr/bin/env python3
"""sass_stats.py - what the compiler made of frost's cached kernels, without running them.

For every entry of a frost kernel cache (<dir>/<2 hex>/<64 hex>.cubin: a header, then the
cubin) it cuts out the cubin (from its ELF magic on), runs `cuobjdump --dump-resource-usage`
(registers, stack, shared and local memory per function) and `cuobjdump --dump-sass`, and
counts the instructions that say whether a kernel is built the way it should be:
  HGMMA (Hopper warpgroup MMA), HMMA (mma.sync), LDSM (ldmatrix), LDGSTS (cp.async),
  UTMALDG (TMA loads), MUFU.EX2 (exp2), LDL/STL (local memory: spills or stack arrays), BAR.
A frost-bench or test log made with FROST_LOG=debug names each cache entry ("kernel cache
hit: KEY for ARCH (HEX)"); with --log the table shows the key instead of the hash, and
--keys-out writes those keys (one per line) for `frost-precompile --report --list FILE`.

  python3 bench/sass_stats.py [--log FILE]... [--keys-out FILE] CACHE_DIR...
Exit: 0 (also when there is nothing to look at), 2 usage.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

OPS = ("HGMMA", "HMMA", "LDSM", "LDGSTS", "UTMALDG", "MUFU.EX2", "LDL", "STL", "BAR")
LOG_RE = re.compile(r"kernel cache (?:hit|miss): (.*) for (sm_\w+) \(([0-9a-f]{64})\)")


def keys_from_logs(paths):
    names = {}
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    m = LOG_RE.search(line)
                    if m:
                        names[m.group(3)] = (m.group(1).strip(), m.group(2))
        except OSError as e:
            print(f"sass_stats: {e}", file=sys.stderr)
    return names


def count_sass(text):
    counts = {op: 0 for op in OPS}
    total = 0
    for line in text.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if not m:
            continue
        total += 1
        ins = m.group(1)
        for op in OPS:
            if ins == op or ins.startswith(op + "."):
                counts[op] += 1
    return counts, total


def resource_usage(text):
    """{function: 'REG:.. STACK:.. SHARED:.. LOCAL:..'} from cuobjdump --dump-resource-usage."""
    out, fn = {}, None
    for line in text.splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            fn = m.group(1)
        elif fn and "REG:" in line:
            out[fn] = " ".join(f for f in line.split() if f.split(":")[0] in ("REG", "STACK", "SHARED", "LOCAL"))
    return out


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"# {' '.join(cmd)}: {e}"


def main():
    p = argparse.ArgumentParser(description="SASS and resource counts of cached frost kernels.")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--log", action="append", default=[], help="FROST_LOG=debug output naming the keys")
    p.add_argument("--keys-out", default=None, help="write the keys seen in the logs here")
    a = p.parse_args()
    names = keys_from_logs(a.log)
    if a.keys_out:
        with open(a.keys_out, "w") as f:
            for key in sorted({k for k, _ in names.values()}):
                f.write(key + "\n")
    entries = sorted({e for d in a.dirs for e in glob.glob(os.path.join(d, "??", "*.cubin"))})
    if not shutil.which("cuobjdump"):
        print("sass_stats: cuobjdump is not on PATH; nothing to count")
        return 0
    if not entries:
        print(f"sass_stats: no cached kernels under {' '.join(a.dirs)}")
        return 0
    print(f"{len(entries)} cached kernel(s); counts are static SASS instructions")
    print(" ".join(f"{op:>8}" for op in OPS) + f" {'total':>7}  function  [resources]  key")
    with tempfile.TemporaryDirectory() as tmp:
        for path in entries:
            with open(path, "rb") as f:
                data = f.read()
            at = data.find(b"\x7fELF")
            if at < 0:
                print(f"{os.path.basename(path)}: no ELF payload")
                continue
            cubin = os.path.join(tmp, "k.cubin")
            with open(cubin, "wb") as f:
                f.write(data[at:])
            sass = run(["cuobjdump", "--dump-sass", cubin])
            res = resource_usage(run(["cuobjdump", "--dump-resource-usage", cubin]))
            # one row per function (split the dump at each "Function :" header)
            parts = re.split(r"\n\s*Function : (\S+)", "\n" + sass)
            hexname = os.path.basename(path)[:-6]
            key, arch = names.get(hexname, (hexname[:16] + "...", "?"))
            for fn, body in zip(parts[1::2], parts[2::2]):
                counts, total = count_sass(body)
                print(" ".join(f"{counts[op]:>8}" for op in OPS) + f" {total:>7}  {fn}  [{res.get(fn, '?')}]"
                      f"  {arch} {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
