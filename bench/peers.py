#!/usr/bin/env python3
"""peers.py - times the libraries a user would pick instead of frost, on frost-bench's
shapes, in one process, with the protocol of docs/PERF.md: CUDA events around each run,
warm-up first, the median of >= 20 runs, inputs rotated over several random sets whose total
exceeds twice the L2, and the FLOP/byte counts that frost-bench uses.

Peers (the "impl" key of each JSON line):
  torch-cudnn    F.scaled_dot_product_attention under sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
  torch-flash    the same under SDPBackend.FLASH_ATTENTION (FlashAttention-2 in torch)
                 (forward on inputs without requires_grad; backward = autograd.grad of q, k, v)
  torch-eager    F.rms_norm / F.layer_norm (forward under no_grad; backward = autograd.grad
                 of x, weight (and bias));
                 F.group_norm (32 groups) / F.batch_norm (training=True, running statistics)
                 / F.instance_norm with weight and bias on x [N, C, H, W] in frost's layout
                 (channels_last for "nhwc": x.to(memory_format=torch.channels_last));
                 backward = autograd.grad of x, weight, bias.  BatchNorm's weight, bias and
                 running statistics are f32 (torch's mixed-precision form, as frost-bench);
                 the others' are in x's dtype.  The record's "y_layout" says which layout
                 torch's output came in (a peer that converts to NCHW pays for it).
                 AdaLN: F.layer_norm(x, no affine) * (1 + scale) + shift, x [B, S, C],
                 scale and shift [B, 1, C]; backward = grads of x, scale, shift
  torch-compile  the same norms through torch.compile
A peer that cannot run a case gives a line with "status" NOT_SUPPORTED (or ERROR,
OUT_OF_MEMORY) and the reason; the run goes on.

Usage:
  python3 bench/peers.py --suite smoke|sdpa|norm|cnorm|all [--json FILE]
  frost-bench --suite sdpa --list | python3 bench/peers.py --cases -      (frost's exact cases)
  python3 bench/peers.py --cases bench.jsonl      (the shapes of a frost-bench JSON file)
  --impl torch-cudnn,torch-flash   --runs N (30)   --warmup N (5)   --budget SECONDS
  --timer events|do_bench   --list (print the cases with their work; needs no torch)
Exit: 0, 2 usage, 77 no torch or no CUDA device.
"""
import argparse
import json
import math
import statistics
import sys
import time
import warnings

IMPLS = ("torch-cudnn", "torch-flash", "torch-eager", "torch-compile")
SDPA_OPS = ("sdpa_fwd", "sdpa_bwd")
NORM_OPS = ("rmsnorm_fwd", "rmsnorm_bwd", "layernorm_fwd", "layernorm_bwd")
CNORM_OPS = ("groupnorm_fwd", "groupnorm_bwd", "instancenorm_fwd", "instancenorm_bwd",
             "batchnorm_fwd", "batchnorm_bwd")
ADALN_OPS = ("adalayernorm_fwd", "adalayernorm_bwd")
ALL_OPS = SDPA_OPS + NORM_OPS + CNORM_OPS + ADALN_OPS
DTYPES = {"bf16": 2, "f16": 2, "f32": 4}
SPIN_BATCH = 100  # timed runs queued behind one spin (Bench.time)


# ---- the case lists of bench/cases.h (keep the two in step; --cases avoids the copy) ----
def _sdpa_pair(b, hq, hkv, s, d, causal):
    return [dict(op=op, dtype="bf16", b=b, h_q=hq, h_kv=hkv, s_q=s, s_kv=s, d=d, d_v=d,
                 causal=bool(causal), layout="bhsd") for op in SDPA_OPS]


def _norm_four(rows, cols):
    return [dict(op=op, dtype="bf16", rows=rows, cols=cols) for op in NORM_OPS]


def _cnorm_pair(kind, n, c, h, w, layout="nhwc"):
    g = dict(groups=32) if kind == "groupnorm" else {}
    return [dict(op=f"{kind}_{d}", dtype="bf16", n=n, c=c, h=h, w=w, layout=layout, **g)
            for d in ("fwd", "bwd")]


def _adaln_pair(b, s, c):
    return [dict(op=op, dtype="bf16", b=b, s=s, c=c) for op in ADALN_OPS]


def cnorm_suite():
    """bench/cases_norm.h: the issue's shapes in NHWC and NCHW; InstanceNorm; an SD GroupNorm; AdaLN."""
    out = []
    for shape in ((32, 512, 64, 64), (128, 256, 32, 32)):
        out += _cnorm_pair("groupnorm", *shape) + _cnorm_pair("batchnorm", *shape)
    for shape in ((32, 512, 64, 64), (128, 256, 32, 32)):
        out += _cnorm_pair("groupnorm", *shape, "nchw") + _cnorm_pair("batchnorm", *shape, "nchw")
    out += _cnorm_pair("instancenorm", 32, 512, 64, 64)
    out += _cnorm_pair("instancenorm", 32, 512, 64, 64, "nchw")
    out += _cnorm_pair("groupnorm", 8, 320, 64, 64, "nchw")
    return out + _adaln_pair(8, 4096, 2048)


def suite_cases(name):
    out = []
    if name in ("sdpa", "all"):
        for d in (64, 128, 256):
            for s in (512, 2048, 8192):
                for causal in (0, 1):
                    out += _sdpa_pair(16384 // s, 2048 // d, 2048 // d, s, d, causal)
    if name in ("norm", "all"):
        for rows, cols in ((16384, 4096), (32768, 4096), (8192, 8192), (65536, 1024),
                           (1024, 12288), (4096, 16384)):
            out += _norm_four(rows, cols)
    if name in ("cnorm", "all"):
        out += cnorm_suite()
    if name == "smoke":
        out += _sdpa_pair(2, 8, 8, 512, 64, 0) + _sdpa_pair(4, 16, 16, 1024, 128, 1)
        out += _sdpa_pair(2, 16, 4, 1024, 128, 1)
        out += _norm_four(4096, 4096) + _norm_four(1000, 1000)
        out += _cnorm_pair("groupnorm", 8, 320, 24, 24) + _cnorm_pair("batchnorm", 8, 320, 24, 24)
        out += _adaln_pair(4, 1024, 1152)
    if not out:
        raise SystemExit(f"peers.py: unknown suite '{name}' (smoke, sdpa, norm, cnorm, all)")
    return out


SHAPE_KEYS = ("op", "dtype", "b", "h_q", "h_kv", "s_q", "s_kv", "d", "d_v", "causal", "layout",
              "rows", "cols", "param_dtype", "rms_bias", "y_only", "n", "c", "h", "w", "groups", "s")


def normalize(c):
    """The shape keys of a case (JSON line of any impl), with the defaults filled in."""
    c = {k: c[k] for k in SHAPE_KEYS if k in c}
    if c.get("op") in SDPA_OPS:
        c.setdefault("h_kv", c["h_q"])
        c.setdefault("d_v", c["d"])
        c.setdefault("layout", "bhsd")
        c["causal"] = bool(c.get("causal", False))
    if c.get("op") in CNORM_OPS:
        c.setdefault("layout", "nchw")
    return c


def read_cases(path):
    f = sys.stdin if path == "-" else open(path)
    seen, out = set(), []
    for line in f:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            c = normalize(json.loads(line))
        except (ValueError, KeyError):
            continue
        key = json.dumps(c, sort_keys=True)
        if c.get("op") in ALL_OPS and key not in seen:
            seen.add(key)
            out.append(c)
    return out


# ---- work counts: the same conventions as frost-bench ----
def unmasked(c):
    """Score elements that take part: all, or the top-left causal lower triangle."""
    sq, skv = c["s_q"], c["s_kv"]
    if not c["causal"]:
        n = sq * skv
    else:
        m = min(sq, skv)  # rows 0..m-1 see i+1 keys, later rows see all s_kv keys
        n = m * (m + 1) // 2 + (sq - m) * skv
    return c["b"] * c["h_q"] * n


def work(c):
    """FLOPs for attention, bytes for norms."""
    if c["op"] in SDPA_OPS:
        n, dqk, dv = unmasked(c), c["d"], c["d_v"]
        return 2.0 * n * (dqk + dv) if c["op"] == "sdpa_fwd" else 2.0 * n * (3 * dqk + 2 * dv)
    return (2.0 if c["op"].endswith("_fwd") else 3.0) * elems(c) * DTYPES[c["dtype"]]


def elems(c):
    """Elements of x (norms): the per-channel / per-sample tensors are not counted."""
    if c["op"] in CNORM_OPS:
        return c["n"] * c["c"] * c["h"] * c["w"]
    if c["op"] in ADALN_OPS:
        return c["b"] * c["s"] * c["c"]
    return c["rows"] * c["cols"]


def label(c):
    if c["op"] in SDPA_OPS:
        return (f"b={c['b']} h={c['h_q']}/{c['h_kv']} s={c['s_q']}/{c['s_kv']} d={c['d']}"
                + (" causal" if c["causal"] else "") + (" bshd" if c["layout"] == "bshd" else ""))
    if c["op"] in CNORM_OPS:
        g = f" G={c['groups']}" if "groups" in c else ""
        return f"{c['n']}x{c['c']}x{c['h']}x{c['w']} {c['layout']}{g}"
    y_only = " y only" if c.get("y_only") else ""
    if c["op"] in ADALN_OPS:
        return f"{c['b']} x {c['s']} x {c['c']}, [B,1,C] params{y_only}"
    return (f"{c['rows']} x {c['cols']}" + (f" params {c['param_dtype']}" if "param_dtype" in c else "")
            + (" bias" if c.get("rms_bias") else "") + y_only)


def impls_for(c, wanted):
    own = ("torch-cudnn", "torch-flash") if c["op"] in SDPA_OPS else ("torch-eager", "torch-compile")
    return [i for i in own if i in wanted]


# ---- timing ----
class Bench:
    def __init__(self, torch, args):
        self.torch, self.args = torch, args
        props = torch.cuda.get_device_properties(0)
        self.l2 = getattr(props, "L2_cache_size", 0) or 50 * 2**20
        self.mem = props.total_memory
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(args.seed)
        self.extra = {}  # notes a sets function adds to the case's record
        self._spin_rate = None  # torch.cuda._sleep cycles per ms (spin_cycles_per_ms)

    def rand(self, shape, dtype, grad=False):
        """Uniform [-1, 1) on the device, seeded; never an all-zero tensor."""
        t = torch_rand(self.torch, shape, dtype, self.gen)
        return t.requires_grad_(True) if grad else t

    def nsets(self, set_bytes):
        n = 3 if set_bytes * 3 >= 2 * self.l2 else math.ceil(2 * self.l2 / max(set_bytes, 1))
        while n > 1 and n * set_bytes > 0.4 * self.mem:
            n -= 1
        return min(n, 64)

    def _events(self):
        """A pair of timing events (start, end)."""
        return self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)

    def spin_cycles_per_ms(self):
        """Clock cycles of torch.cuda._sleep per millisecond on this GPU: measured on first use,
        then the rate the last spin ran at (_spun_runs)."""
        if self._spin_rate is None:
            torch, cycles = self.torch, 10_000_000
            e0, e1 = self._events()
            e0.record()
            torch.cuda._sleep(cycles)
            e1.record()
            torch.cuda.synchronize()
            self._spin_rate = cycles / max(e0.elapsed_time(e1), 1e-3)
        return self._spin_rate

    def _spun_runs(self, fns, start, n, spin_ms):
        """n timed runs from fns[start % len], queued behind a spin of spin_ms (0: none).
        Returns their ms, the host's ms to queue them and the spin's."""
        torch = self.torch
        ev = [self._events() for _ in range(n)]
        s0, s1 = self._events()
        cycles = int(spin_ms * self.spin_cycles_per_ms()) if spin_ms > 0 else 0
        torch.cuda.synchronize()
        s0.record()
        if cycles:
            torch.cuda._sleep(cycles)
        s1.record()
        h0 = time.perf_counter()
        for i in range(n):
            ev[i][0].record()
            fns[(start + i) % len(fns)]()
            ev[i][1].record()
        queued = (time.perf_counter() - h0) * 1e3
        torch.cuda.synchronize()
        spun = s0.elapsed_time(s1)
        if cycles and spun > 0.1:  # the clock moves under load: keep the rate the last spin ran at
            self._spin_rate = cycles / spun
        return [s.elapsed_time(e) for s, e in ev], queued, spun

    def time(self, fns):
        """Median/min ms of one call, rotating over fns (one closure per input set).

        The events must see the GPU's time, not Python's: a spin kernel holds the GPU while
        the host queues the timed runs, in batches of SPIN_BATCH runs (so the launch queue
        never fills and blocks the host), each spin as long as queueing its batch takes (the
        host's time a call, from the warm-up, with a margin).  A batch whose queueing
        outlasted its spin may have timed the host (the GPU reached a run before its kernels
        were queued): it is timed again under a longer spin, and after three tries the
        record says host_bound.  A fixed spin of 0.1 ms a run was too short for
        torch.compile's backward, whose autograd wrappers cost the host more than the GPU
        its kernels.  The record keeps host_ms, the host's time a call."""
        torch, a = self.torch, self.args
        if a.timer == "do_bench":
            import triton.testing
            it = iter(range(1 << 62))
            f = lambda: fns[next(it) % len(fns)]()  # noqa: E731
            ms = triton.testing.do_bench(f, warmup=100, rep=max(50, a.runs * 2), return_mode="median")
            return ms, ms, 0
        # the first call may compile (torch.compile builds its backward on the first
        # autograd.grad): untimed, so that the probe sizes the runs from a steady call
        fns[0]()
        torch.cuda.synchronize()
        e0, e1 = self._events()
        e0.record()
        fns[0]()
        e1.record()
        torch.cuda.synchronize()
        first = max(e0.elapsed_time(e1), 1e-3)
        warm = max(a.warmup, min(2000, int(100 / first)))
        runs = max(a.runs, min(2000, int(50 / first)))
        h0 = time.perf_counter()
        for i in range(warm):
            fns[(1 + i) % len(fns)]()
        host_ms = (time.perf_counter() - h0) * 1e3 / max(warm, 1)
        spin = hasattr(torch.cuda, "_sleep")
        t, host_bound, done = [], False, 0
        while done < runs:
            n = min(SPIN_BATCH, runs - done)
            for _ in range(3 if spin else 1):
                ts, queued, spun = self._spun_runs(fns, 1 + warm + done, n, 1.5 * n * host_ms + 0.5 if spin else 0)
                if not spin or queued <= spun:
                    break
                host_ms = max(host_ms, queued / n)
            else:
                host_bound = True
            t += ts
            done += n
        t.sort()
        self.extra["host_ms"] = round(host_ms, 4)
        if host_bound:
            self.extra["host_bound"] = True
        return statistics.median(t), t[0], runs


def torch_rand(torch, shape, dtype, gen):
    t = torch.rand(shape, device="cuda", dtype=torch.float32, generator=gen).mul_(2).sub_(1)
    return t.to(dtype)


def sdpa_sets(bench, c, impl):
    torch = bench.torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = SDPBackend.CUDNN_ATTENTION if impl == "torch-cudnn" else SDPBackend.FLASH_ATTENTION
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[c["dtype"]]
    b, hq, hkv, sq, skv, d, dv = (c[k] for k in ("b", "h_q", "h_kv", "s_q", "s_kv", "d", "d_v"))
    bwd = c["op"] == "sdpa_bwd"
    el = DTYPES[c["dtype"]]
    set_bytes = el * (b * hq * sq * (d + dv) + b * hkv * skv * (d + dv)) * (2 if bwd else 1)
    kw = dict(is_causal=c["causal"])
    if hq != hkv:
        kw["enable_gqa"] = True

    def mk(h, s, dd):
        if c["layout"] == "bshd":
            return bench.rand((b, s, h, dd), dt, bwd).transpose(1, 2)
        return bench.rand((b, h, s, dd), dt, bwd)

    fns = []
    with sdpa_kernel([backend]):
        for _ in range(bench.nsets(set_bytes)):
            q, k, v = mk(hq, sq, d), mk(hkv, skv, d), mk(hkv, skv, dv)
            if not bwd:
                fns.append(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, **kw))
                continue
            o = F.scaled_dot_product_attention(q, k, v, **kw)
            do = bench.rand(o.shape, dt)
            fns.append(lambda o=o, q=q, k=k, v=v, do=do:
                       torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
        return bench.time(fns)


def _dtype(torch, name):
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[name]


def _maybe_compile(torch, f, impl):
    if impl != "torch-compile":
        return f
    import torch._dynamo
    torch._dynamo.reset()  # a fresh cache per shape: no recompile limit, no stale guards
    return torch.compile(f, dynamic=False)


def _autograd_sets(bench, f, make, set_bytes, bwd):
    """One closure per input set (make() gives f's arguments): the forward under no_grad, or
    autograd.grad of f's output with respect to every argument that requires grad, from a
    random dy with the output's strides.  Returns the closures and one output."""
    torch = bench.torch
    fns, y = [], None
    for _ in range(bench.nsets(set_bytes)):
        args = make()
        if not bwd:
            def fwd(args=args):
                with torch.no_grad():
                    return f(*args)
            fns.append(fwd)
            continue
        y = f(*args)
        dy = torch.empty_like(y).copy_(bench.rand(tuple(y.shape), y.dtype))
        wrt = tuple(a for a in args if isinstance(a, torch.Tensor) and a.requires_grad)
        fns.append(lambda y=y, dy=dy, wrt=wrt: torch.autograd.grad(y, wrt, dy, retain_graph=True))
    return fns, (y if bwd else fns[0]())


def norm_sets(bench, c, impl):
    torch = bench.torch
    import torch.nn.functional as F
    dt = _dtype(torch, c["dtype"])
    pdt = _dtype(torch, c.get("param_dtype", c["dtype"]))  # frost-bench --param-dtype
    rows, cols, op = c["rows"], c["cols"], c["op"]
    ln, bwd = op.startswith("layernorm"), op.endswith("_bwd")
    biased = ln or c.get("rms_bias", False)  # frost-bench --rms-bias: F.rms_norm, then + bias

    def f(x, w, bias):
        if ln:
            return F.layer_norm(x, (cols,), w, bias, 1e-5)
        y = F.rms_norm(x, (cols,), w, 1e-5)
        return y + bias if bias is not None else y

    def make():
        return (bench.rand((rows, cols), dt, bwd), bench.rand((cols,), pdt, bwd),
                bench.rand((cols,), pdt, bwd) if biased else None)

    set_bytes = DTYPES[c["dtype"]] * rows * cols * (4 if bwd else 2)
    fns, _ = _autograd_sets(bench, _maybe_compile(torch, f, impl), make, set_bytes, bwd)
    return bench.time(fns)


def _layout_of(torch, t):
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return "nhwc"
    return "nchw" if t.is_contiguous() else "strided"


def cnorm_sets(bench, c, impl):
    """GroupNorm, InstanceNorm or BatchNorm (training) on x [N, C, H, W] in the case's layout."""
    torch = bench.torch
    import torch.nn.functional as F
    dt = _dtype(torch, c["dtype"])
    kind, bwd = c["op"].rsplit("_", 1)[0], c["op"].endswith("_bwd")
    nc = c["c"]
    fmt = torch.channels_last if c["layout"] == "nhwc" else torch.contiguous_format
    pdt = torch.float32 if kind == "batchnorm" else dt  # as frost-bench (bench/graphs_norm.h)

    def f(x, w, b, rm, rv):
        if kind == "groupnorm":
            return F.group_norm(x, c["groups"], w, b, 1e-5)
        if kind == "instancenorm":
            return F.instance_norm(x, weight=w, bias=b, eps=1e-5)
        return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5)

    def make():
        x = bench.rand((c["n"], nc, c["h"], c["w"]), dt).contiguous(memory_format=fmt).requires_grad_(bwd)
        rm = rv = None
        if kind == "batchnorm":  # running statistics, updated in place as frost's are
            rm = bench.rand((nc,), torch.float32).mul_(0.01)
            rv = bench.rand((nc,), torch.float32).abs_().add_(0.5)
        return x, bench.rand((nc,), pdt, bwd), bench.rand((nc,), pdt, bwd), rm, rv

    set_bytes = DTYPES[c["dtype"]] * elems(c) * (4 if bwd else 2)
    fns, y = _autograd_sets(bench, _maybe_compile(torch, f, impl), make, set_bytes, bwd)
    bench.extra["y_layout"] = _layout_of(torch, y)
    return bench.time(fns)


def adaln_sets(bench, c, impl):
    """AdaLN as a DiT block writes it: layer_norm without affine, then (1 + scale) and shift."""
    torch = bench.torch
    import torch.nn.functional as F
    dt = _dtype(torch, c["dtype"])
    b, s, nc, bwd = c["b"], c["s"], c["c"], c["op"].endswith("_bwd")

    def f(x, scale, shift):
        return F.layer_norm(x, (nc,), None, None, 1e-5) * (1 + scale) + shift

    def make():
        return (bench.rand((b, s, nc), dt, bwd), bench.rand((b, 1, nc), dt, bwd),
                bench.rand((b, 1, nc), dt, bwd))

    set_bytes = DTYPES[c["dtype"]] * elems(c) * (4 if bwd else 2)
    fns, _ = _autograd_sets(bench, _maybe_compile(torch, f, impl), make, set_bytes, bwd)
    return bench.time(fns)


SETS = dict([(op, sdpa_sets) for op in SDPA_OPS] + [(op, norm_sets) for op in NORM_OPS]
            + [(op, cnorm_sets) for op in CNORM_OPS] + [(op, adaln_sets) for op in ADALN_OPS])


def run_one(bench, c, impl):
    """Returns the JSON record of one (case, impl)."""
    torch = bench.torch
    rec = dict(impl=impl, **c)
    caught = []
    bench.extra = {}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ms, ms_min, runs = SETS[c["op"]](bench, c, impl)
        rate_key = "tflops" if c["op"] in SDPA_OPS else "gbps"
        rate = work(c) / (ms * 1e-3) / (1e12 if rate_key == "tflops" else 1e9)
        rec.update(ms=round(ms, 6), ms_min=round(ms_min, 6), runs=runs, status="OK")
        rec[rate_key] = round(rate, 3)
        rec.update(bench.extra)
    except torch.cuda.OutOfMemoryError as e:
        rec.update(status="OUT_OF_MEMORY", reason=str(e).splitlines()[0][:300])
    except Exception as e:  # a refusal (no kernel for this shape) or a peer's failure
        msg = " ".join(str(e).split())[:300] or type(e).__name__
        refused = "No available kernel" in msg or "not supported" in msg.lower()
        # torch says why a backend refused in warnings, not in the exception
        why = "; ".join(" ".join(str(w.message).split())[:200] for w in caught[:3])
        rec.update(status="NOT_SUPPORTED" if refused else "ERROR",
                   reason=f"{type(e).__name__}: {msg}" + (f" [{why}]" if why else ""))
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return rec


def cuda_torch(prog):
    """torch when it is installed and sees a CUDA device; else None, having said why."""
    try:
        import torch
    except ImportError as e:
        print(f"{prog}: no torch ({e})", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{prog}: torch sees no CUDA device", file=sys.stderr)
        return None
    return torch


def main():
    p = argparse.ArgumentParser(description="Time frost's peers on frost-bench's shapes.")
    p.add_argument("--suite", default=None, help="smoke, sdpa, norm or all (default smoke)")
    p.add_argument("--cases", default=None, help="JSON lines with the cases ('-' = stdin)")
    p.add_argument("--impl", default=",".join(IMPLS), help="comma list of " + ", ".join(IMPLS))
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--timer", choices=("events", "do_bench"), default="events")
    p.add_argument("--budget", type=float, default=0, help="seconds; later cases are SKIPPED")
    p.add_argument("--json", default=None, help="also write the JSON lines to this file")
    p.add_argument("--list", action="store_true", help="print the cases and their work, no torch")
    a = p.parse_args()
    wanted = [i for i in a.impl.split(",") if i]
    if any(i not in IMPLS for i in wanted) or a.runs < 1 or a.warmup < 0:
        p.error(f"--impl takes {', '.join(IMPLS)}; --runs >= 1, --warmup >= 0")
    cases = read_cases(a.cases) if a.cases else []
    if a.suite or not a.cases:
        cases += suite_cases(a.suite or "smoke")
    if a.list:
        for c in cases:
            print(json.dumps(dict(c, work=work(c), impls=impls_for(c, wanted))))
        return 0
    torch = cuda_torch("peers.py")
    if torch is None:
        return 77
    bench = Bench(torch, a)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    print(f"peers.py: torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {cudnn}, "
          f"{torch.cuda.get_device_name(0)}, L2 {bench.l2 >> 20} MiB; timer {a.timer}")
    print(f"{'impl':<14} {'op':<14} {'shape':<36} {'ms':>9} {'rate':>9}")
    jf = open(a.json, "w") if a.json else None
    lines, t0 = [], time.monotonic()
    for c in cases:
        for impl in impls_for(c, wanted):
            if a.budget and time.monotonic() - t0 > a.budget:
                rec = dict(impl=impl, **c, status="SKIPPED", reason=f"over the {a.budget:g} s budget")
            else:
                rec = run_one(bench, c, impl)
            if rec["status"] == "OK":
                unit = "TFLOP/s" if "tflops" in rec else "GB/s"
                rate = rec.get("tflops", rec.get("gbps"))
                print(f"{impl:<14} {c['op']:<14} {label(c):<36} {rec['ms']:9.4f} {rate:9.1f} {unit}")
            else:
                print(f"{impl:<14} {c['op']:<14} {label(c):<36} {rec['status']}: {rec['reason']}")
            line = json.dumps(rec)
            lines.append(line)
            if jf:
                jf.write(line + "\n")
                jf.flush()
            sys.stdout.flush()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
