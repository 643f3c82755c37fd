#!/usr/bin/env python3
"""compile_probe.py - torch.compile's LayerNorm / RMSNorm forward kernels (Triton, made by
Inductor) on the row-norm shapes, for reading their code and profiling them next to frost's.

Compiles F.layer_norm / F.rms_norm (bf16, weight and bias of x's dtype, no grad) per shape,
warms each up, then runs each once between cudaProfilerStart and cudaProfilerStop, so that
    ncu --profile-from-start off --clock-control none --cache-control all --metrics ... \\
        python3 bench/compile_probe.py ln,rms
profiles exactly one launch per case (in the order printed at the end), and
    TORCH_LOGS=output_code python3 bench/compile_probe.py ln
prints the generated kernels.  Needs torch with CUDA; exit 77 without.
"""
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)

SHAPES = [(65536, 1024), (16384, 4096), (8192, 8192), (4096, 16384), (16384, 1000), (262144, 128)]
RMS_SHAPES = [(65536, 1024), (8192, 8192), (4096, 16384), (16384, 1000)]


def main():
    if not torch.cuda.is_available():
        sys.exit(77)
    kinds = sys.argv[1].split(",") if len(sys.argv) > 1 else ["ln", "rms"]
    cases = []
    for kind in kinds:
        for rows, cols in SHAPES if kind == "ln" else RMS_SHAPES:
            x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
            torch._dynamo.reset()
            if kind == "ln":
                f = torch.compile(lambda x, w, b, c=cols: F.layer_norm(x, (c,), w, b, 1e-5), dynamic=False)
            else:
                f = torch.compile(lambda x, w, b, c=cols: F.rms_norm(x, (c,), w, 1e-5), dynamic=False)
            with torch.no_grad():
                for _ in range(3):
                    f(x, w, b)
            cases.append((kind, rows, cols, f, x, w, b))
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    with torch.no_grad():
        for _, _, _, f, x, w, b in cases:
            f(x, w, b)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    for kind, rows, cols, *_ in cases:
        print("profiled", kind, rows, cols)


if __name__ == "__main__":
    main()
