#!/usr/bin/env python3
"""report.py - merges the JSON lines of frost-bench and bench/peers.py into markdown tables
with frost/peer ratios (ratio = frost's TFLOP/s or GB/s over the peer's, so > 1 means frost
is faster): one table for attention, one for RMSNorm / LayerNorm, one for the channel norms
(GroupNorm, BatchNorm, InstanceNorm) and AdaLayerNorm with the issue's targets (GroupNorm
and BatchNorm, NHWC bf16 at 32x512x64x64 and 128x256x32x32: forward >= 3200 GB/s, backward
>= 3000 GB/s), a geometric-mean summary per op (and layout) and peer, and footnotes with the
reasons of every refusal or failure.

  python3 bench/report.py bench.jsonl peers.jsonl [--out report.md] [--title T] [--meta LINE]...

Input lines that do not start with '{' are ignored, so whole logs can be passed.  Lines are
matched on their shape keys (op, dtype, b, h_q, h_kv, s_q, s_kv, d, d_v, causal, layout /
rows, cols / n, c, h, w, groups / s); for one shape and impl the last line read wins.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import (ADALN_OPS, CNORM_OPS, IMPLS, SDPA_OPS,  # noqa: E402  (one definition of the keys)
                   label, normalize)

# The targets (GB/s, bytes as in docs/PERF.md): op -> (shapes [n, c, h, w], GB/s);
# NHWC bf16 only.
TARGETS = {op: ([(32, 512, 64, 64), (128, 256, 32, 32)], 3200 if op.endswith("_fwd") else 3000)
           for op in ("groupnorm_fwd", "groupnorm_bwd", "batchnorm_fwd", "batchnorm_bwd")}
# RMSNorm / LayerNorm, bf16, rows x hidden: forward >= 3800 GB/s, backward >= 3500 GB/s.
ROW_TARGETS = {op: ([(16384, 4096), (32768, 4096), (8192, 8192), (65536, 1024), (1024, 12288), (4096, 16384)],
                    3800 if op.endswith("_fwd") else 3500)
               for op in ("rmsnorm_fwd", "rmsnorm_bwd", "layernorm_fwd", "layernorm_bwd")}


def load(paths):
    """{shape key: {impl: record}} in the order shapes first appear."""
    table = {}
    for path in paths:
        with (sys.stdin if path == "-" else open(path)) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rec = json.loads(line)
                    key = json.dumps(normalize(rec), sort_keys=True)
                except (ValueError, KeyError, TypeError):
                    continue
                if "op" in rec and "impl" in rec:
                    table.setdefault(key, {})[rec["impl"]] = rec
    return table


class Notes:
    """Numbered footnotes for records that carry no number."""

    def __init__(self):
        self.items = {}

    def mark(self, rec, what):
        text = f"{rec['impl']} {rec['op']} {what}: {rec.get('status', '?')}: {rec.get('reason', '')}"
        n = self.items.setdefault(text, len(self.items) + 1)
        return f"{rec.get('status', '?').lower()}[^{n}]"


def rate_of(rec):
    if rec and rec.get("status", "OK") == "OK":
        return rec.get("tflops", rec.get("gbps"))
    return None


def fmt(v):
    return "" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}")


def target_of(c):
    """The issue's GB/s target for this case, or None (the targets are judged on the training
    forward, which also writes the saved statistics; a y-only forward has none)."""
    if c.get("y_only"):
        return None
    if c["op"] in ROW_TARGETS:
        shapes, gbps = ROW_TARGETS[c["op"]]
        return gbps if c["dtype"] == "bf16" and (c.get("rows"), c.get("cols")) in shapes else None
    shapes, gbps = TARGETS.get(c["op"], ([], None))
    if gbps and c.get("layout") == "nhwc" and c["dtype"] == "bf16" and \
            (c["n"], c["c"], c["h"], c["w"]) in shapes:
        return gbps
    return None


def target_cell(c, fr, met):
    t = target_of(c)
    if t is None:
        return ""
    met.append(fr is not None and fr >= t)
    return f"≥{t}: " + ("no result" if fr is None else "met" if fr >= t else f"no ({int(100 * fr / t)}%)")


def layout_flag(c, rec):
    """' (y nchw)' when a peer's output came back in another layout than the case's; ' (host)'
    when peers.py could not keep the host ahead of the GPU (its events may time the host)."""
    y = rec.get("y_layout")
    flag = f" (y {y})" if y and c.get("layout") and y != c["layout"] else ""
    return flag + (" (host)" if rec.get("host_bound") else "")


def op_label(c):
    """The op's name, marked when frost ran its inference forward (y alone)."""
    return c["op"] + (" (y only)" if c.get("y_only") else "")


def shape_cells(c):
    if c["op"] in SDPA_OPS:
        extra = (f" d_v={c['d_v']}" if c["d_v"] != c["d"] else "") + (" bshd" if c["layout"] == "bshd" else "")
        heads = f"{c['h_q']}" if c["h_q"] == c["h_kv"] else f"{c['h_q']}/{c['h_kv']}"
        s = f"{c['s_q']}" if c["s_q"] == c["s_kv"] else f"{c['s_q']}/{c['s_kv']}"
        return [c["op"], str(c["d"]) + extra, s, "yes" if c["causal"] else "no", f"{c['b']}×{heads}"]
    if c["op"] in CNORM_OPS:
        return [c["op"], f"{c['n']}×{c['c']}×{c['h']}×{c['w']}", c["layout"], str(c.get("groups", ""))]
    op = op_label(c)
    if c["op"] in ADALN_OPS:
        return [op, f"{c['b']}×{c['s']}×{c['c']}", "[B,1,C] scale, shift", ""]
    return [op, f"{c['rows']} × {c['cols']}"]


def summary_key(c):
    """Ratios are averaged per op, and per layout for the channel norms."""
    return f"{c['op']} {c['layout']}" if c["op"] in CNORM_OPS else op_label(c)


HEADS = {"attn": ["op", "d", "s", "causal", "b×h"], "norm": ["op", "rows × hidden"],
         "cnorm": ["op", "N×C×H×W / B×S×C", "layout", "groups"]}


def section(title, unit, rows, notes, ratios, kind):
    """One markdown table; rows = [(case, {impl: rec})]."""
    if not rows:
        return []
    found = {i for _, recs in rows for i in recs if i != "frost"}
    peers = [i for i in IMPLS if i in found] + sorted(found - set(IMPLS))
    head = HEADS[kind] + ["frost"] + peers + [f"frost/{p.replace('torch-', '')}" for p in peers]
    head += ["issue target"] if kind in ("cnorm", "norm") else []
    out = [f"### {title} ({unit})", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    met = []
    for c, recs in rows:
        what = label(c) if kind == "cnorm" else " ".join(shape_cells(c)[1:])
        cells = shape_cells(c)
        fr = rate_of(recs.get("frost"))
        for impl in ["frost"] + peers:
            rec = recs.get(impl)
            cells.append(fmt(rate_of(rec)) + layout_flag(c, rec) if rate_of(rec) is not None else
                         notes.mark(rec, what) if rec else "")
        for p in peers:
            pr = rate_of(recs.get(p))
            if fr and pr:
                cells.append(f"{fr / pr:.2f}")
                ratios.setdefault((summary_key(c), p), []).append(fr / pr)
            else:
                cells.append("")
        if kind in ("cnorm", "norm"):
            cells.append(target_cell(c, fr, met) if "frost" in recs else "")
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    if any(r.get("host_bound") for _, recs in rows for r in recs.values() if r):
        out += ["\"(host)\" after a peer's rate: even behind a spin kernel the host could not queue "
                "its calls ahead of the GPU, so the rate may count Python's time.", ""]
    if met:
        out += [f"Issue targets met by frost: {sum(met)} of {len(met)}.", ""]
    if any(c.get("y_only") for c, _ in rows):
        out += ["\"(y only)\": frost's inference forward, which writes y alone, as torch.compile's forward "
                "under no_grad does; the other forward rows are frost's training forward, which also writes "
                "inv_std (and LayerNorm's mean), 4 bytes a row each, not counted in the bytes.", ""]
    if kind == "cnorm":
        out += ["Channel norms: bytes = x read + y written (forward), x and d_y read + d_x written "
                "(backward); the per-channel, per-group and per-sample tensors are not counted. "
                "BatchNorm runs in training mode with f32 weight, bias and running statistics; "
                "\"(y nchw)\" after a peer's rate: its output did not keep the input's layout.", ""]
    return out


def render(table, title, meta):
    notes, ratios = Notes(), {}
    cases = [(json.loads(k), recs) for k, recs in table.items()]
    attn = [(c, r) for c, r in cases if c["op"] in SDPA_OPS]
    cnorm = [(c, r) for c, r in cases if c["op"] in CNORM_OPS + ADALN_OPS]
    norm = [(c, r) for c, r in cases if c["op"] not in SDPA_OPS + CNORM_OPS + ADALN_OPS]
    out = [f"## {title}", ""] + [f"- {m}" for m in meta] + ([""] if meta else [])
    out += ["Rates are medians (TFLOP/s for attention, GB/s for norms, counted as in docs/PERF.md); "
            "a ratio is frost's rate over the peer's (> 1: frost is faster).", ""]
    out += section("Attention", "TFLOP/s", attn, notes, ratios, "attn")
    out += section("Normalization", "GB/s", norm, notes, ratios, "norm")
    out += section("Channel norms and AdaLayerNorm", "GB/s", cnorm, notes, ratios, "cnorm")
    if ratios:
        out += ["### Summary: geometric mean of frost/peer", "", "| op | peer | cases | frost/peer |",
                "|---|---|---|---|"]
        for (op, peer), v in ratios.items():
            g = math.exp(sum(math.log(x) for x in v) / len(v))
            out.append(f"| {op} | {peer} | {len(v)} | {g:.2f} |")
        out.append("")
    if not cases:
        out += ["No JSON lines were found in the input.", ""]
    for text, n in notes.items.items():
        out.append(f"[^{n}]: {text}")
    return "\n".join(out).rstrip() + "\n"


def main():
    p = argparse.ArgumentParser(description="Merge frost-bench and peers.py JSON lines into markdown.")
    p.add_argument("files", nargs="+", help="JSON-lines files or logs ('-' = stdin)")
    p.add_argument("--out", default=None, help="also write the markdown here")
    p.add_argument("--title", default="frost vs peers")
    p.add_argument("--meta", action="append", default=[], help="a bullet line under the title")
    a = p.parse_args()
    text = render(load(a.files), a.title, a.meta)
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
