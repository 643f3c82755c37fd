#!/usr/bin/env python3
"""peer_kernels.py - the GPU kernels a peer (torch eager, torch.compile) runs for one call
of a case, and their time a call, from torch.profiler: the side-by-side view that tells
where a peer's lead over frost comes from (docs/PERF.md).  Each case is built exactly as
peers.py builds it (same input sets, same rotation); 20 calls warm up, then 50 calls are
profiled and each kernel's device time is divided by 50.

Usage (on a GPU machine):
  python3 bench/peer_kernels.py --cases bench.jsonl [--impl torch-eager,torch-compile]
      (the cases of frost-bench or peers.py JSON lines)
  ncu --profile-from-start off --kernel-name regex:triton --launch-count 1 ... \
      python3 bench/peer_kernels.py --cases ... --impl torch-compile --ncu
      (--ncu: after the warm calls, one call between cudaProfilerStart and cudaProfilerStop,
      so that Nsight Compute sees that call's kernels alone; nothing is printed)
Exit: 0, 2 usage, 77 no torch or no CUDA device.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402

WARM, CALLS = 20, 50


def profile_calls(torch, fns, ncu=False):
    """Prints the ten longest kernels of one call (µs a call, launches a call); with ncu, runs
    one call inside the CUDA profiler's range instead."""
    from torch.profiler import ProfilerActivity, profile
    for i in range(WARM):
        fns[i % len(fns)]()
    torch.cuda.synchronize()
    if ncu:
        torch.cuda.cudart().cudaProfilerStart()
        fns[0]()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        return 1.0, 1.0, 1
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(CALLS):
            fns[i % len(fns)]()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t > 0 and e.count >= CALLS:  # kernels of every call, not one-off set-up
            rows.append((t / CALLS, e.count // CALLS, e.key[:110]))
    rows.sort(reverse=True)
    for t, n, key in rows[:10]:
        print(f"   {t:9.1f} us x{n}  {key}")
    print(f"   {sum(r[0] for r in rows):9.1f} us in all")
    return 1.0, 1.0, 1  # what Bench.time returns; unused


def main():
    p = argparse.ArgumentParser(description="Kernels a peer runs per call, from torch.profiler.")
    p.add_argument("--cases", required=True, help="JSON lines with the cases ('-' = stdin)")
    p.add_argument("--impl", default="torch-eager,torch-compile")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--ncu", action="store_true", help="one call inside cudaProfilerStart / Stop, for ncu")
    a = p.parse_args()
    impls = [i for i in a.impl.split(",") if i]
    if any(i not in peers.IMPLS for i in impls):
        p.error(f"--impl takes {', '.join(peers.IMPLS)}")
    torch = peers.cuda_torch("peer_kernels.py")
    if torch is None:
        return 77
    a.runs, a.warmup, a.timer = 30, 5, "events"  # the fields Bench reads
    bench = peers.Bench(torch, a)
    bench.time = lambda fns: profile_calls(torch, fns, a.ncu)
    for c in peers.read_cases(a.cases):
        for impl in peers.impls_for(c, impls):
            print(f"{impl} {c['op']} {peers.label(c)}", flush=True)
            try:
                peers.SETS[c["op"]](bench, c, impl)
            except Exception as e:  # a peer that cannot run the case: say so, go on
                print(f"   failed: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
