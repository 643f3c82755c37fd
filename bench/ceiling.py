#!/usr/bin/env python3
"""ceiling.py - the streaming ceiling of each norm target's bytes: a device-to-device copy
(read N bytes, write N: a forward's traffic) and an elementwise add (read 2N, write N: a
backward's traffic) of bf16 tensors of the target's size, timed with peers.py's protocol
(CUDA events, warm-up, median, input sets rotated past twice the L2).  A norm that moves the
same bytes once cannot run faster than these by more than the copy kernel's own losses, so
they say which targets the hardware allows at each size.

Usage: python3 bench/ceiling.py [--json FILE]     (needs torch and a CUDA device; exit 77 without)
"""
import argparse
import json
import sys

SHAPES = (  # (label, elements): the norm suite's rows x hidden and the cnorm targets' N*C*H*W
    ("16384x4096", 16384 * 4096), ("32768x4096", 32768 * 4096), ("8192x8192", 8192 * 8192),
    ("65536x1024", 65536 * 1024), ("1024x12288", 1024 * 12288), ("4096x16384", 4096 * 16384),
    ("32x512x64x64", 32 * 512 * 64 * 64), ("128x256x32x32", 128 * 256 * 32 * 32),
    ("8x320x64x64", 8 * 320 * 64 * 64),
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timer", default="events")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        return 77
    if not torch.cuda.is_available():
        return 77
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import peers
    bench = peers.Bench(torch, args)
    out = open(args.json, "w") if args.json else None
    print(f"{'size':>16} {'op':>5} {'MB moved':>9} {'us':>8} {'GB/s':>7}")
    for label, n in SHAPES:
        for op, tensors in (("copy", 2), ("add", 3)):
            moved = n * 2 * tensors
            # each set: the inputs (one for copy, two for add) and the output
            sets = [[bench.rand((n,), torch.bfloat16) for _ in range(tensors - 1)]
                    + [torch.empty(n, dtype=torch.bfloat16, device="cuda")] for _ in range(bench.nsets(moved))]
            if op == "copy":
                fns = [lambda s=s: s[1].copy_(s[0]) for s in sets]
            else:
                fns = [lambda s=s: torch.add(s[0], s[1], out=s[2]) for s in sets]
            med, best, runs = bench.time(fns)
            gbs = moved / (med * 1e-3) / 1e9
            print(f"{label:>16} {op:>5} {moved / 1e6:9.1f} {med * 1e3:8.1f} {gbs:7.0f}")
            if out:
                out.write(json.dumps(dict(impl="ceiling", op=op, size=label, elements=n, bytes=moved,
                                          median_ms=med, min_ms=best, runs=runs, gbs=gbs)) + "\n")
            del sets, fns
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
