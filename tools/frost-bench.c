/*
 * frost-bench — times frost's ops on a CUDA device the way docs/PERF.md says: build the
 * graph once, fill several input sets with random data (never zeros; a seeded host pool
 * copied in) so the inputs rotated between runs exceed twice the L2, warm up, then time
 * every run with CUDA events and report the median.  It prints a table and, per case,
 * one JSON line (starting with '{') in the schema that bench/peers.py and bench/report.py
 * share.  A refused case (NOT_SUPPORTED) shows its reason and the run goes on.
 *
 *   frost-bench --suite smoke|sdpa|norm|cnorm|all [--json FILE] [--list]
 *   frost-bench --op sdpa_fwd[,sdpa_bwd] --b 2 --h 16 [--h-kv 4] --s 2048 --d 128 [--causal]
 *   frost-bench --op rmsnorm_fwd --rows 16384 --cols 4096
 *   frost-bench --op groupnorm_fwd,batchnorm_bwd --n 32 --c 512 --height 64 --width 64
 *               [--groups 32] [--layout nhwc|nchw]       (channel norms; nhwc = channels-last)
 *   frost-bench --op adalayernorm_fwd --b 8 --s 4096 --c 2048   (scale, shift [b, 1, c])
 *   --dtype bf16|f16|f32  --layout bhsd|bshd|nhwc|nchw  --runs N (30)  --warmup N (5)  --sets N
 *   --param-dtype bf16|f16|f32 (RMSNorm / LayerNorm scale and bias; default: --dtype)
 *   --rms-bias (RMSNorm with a bias: y = x_hat * w + b, and d_bias in the backward)
 *   --slice N (RMSNorm / LayerNorm: x and d_y are [rows / N, N, cols] slices of a
 *             [rows / N, N + 1, cols] buffer, rows in runs of N; y and d_x packed)
 *   --seed N  --device N  --explain (print frost_graph_explain per case)
 *   --exact (exactly --warmup and --runs; otherwise both grow to ~100 ms and ~50 ms)
 * --check runs each case once more after timing and compares every tensor with the CPU
 * reference engine's result for the same inputs (check_case; slow for large attention
 * cases): a sweep's settings then come with their correctness.
 * --list prints the cases as JSON lines and needs no GPU.  --cpu runs the same harness on the
 * CPU reference engine (host memory, wall clock): a check of the tool, not a performance
 * number.  Exit: 0 all cases ran or were refused, 1 a case failed, 2 usage, 77 no GPU.
 *
 * Backward cases get synthetic saved statistics (attention LSE = log(#keys) + 1/18, the
 * value for uniform [-1, 1) inputs; norm inv_std ~ sqrt(3), mean ~ 0), so they run without
 * the forward and without overflow.  The norm graphs are in bench/graphs_norm.h, the
 * channel-norm and AdaLayerNorm cases in bench/cases_norm.h; the data pools, memory and
 * timed runs in tools/bench_run.c (shared types in tools/bench.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "frost/frost.h"
#include "runtime/runtime.h"
#include "../bench/cases.h" /* the case lists, work counts and JSON case keys */
#include "bench.h"

#define PEAK_TFLOPS 790.0 /* bf16 GEMM measured on the H200, shared/PERF.md (2026-12-02) */
#define PEAK_GBPS 4184.0  /* device-to-device copy measured there */

/* ---- graphs ------------------------------------------------------------------------ */
static void note(bgraph *bg, frost_tensor t, int role) /* a tensor to bind */
{
    if (t != FROST_TENSOR_NONE && t != FROST_TENSOR_AUTO && bg->nt < MAX_T) {
        bg->id[bg->nt] = t;
        bg->role[bg->nt++] = role;
    }
}

static frost_status add_in(bgraph *bg, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                           const int64_t *strides, int role)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    memcpy(d.dims, dims, sizeof(int64_t) * (size_t)rank);
    if (strides)
        memcpy(d.strides, strides, sizeof(int64_t) * (size_t)rank);
    frost_tensor t = 0;
    frost_status s = frost_graph_add_tensor(bg->g, &d, &t);
    note(bg, s ? 0 : t, role);
    return s;
}

/* BSHD strides of a [b, h, s, d] tensor (BHSD uses packed, i.e. zeros). */
static const int64_t *layout(const bcase *c, const int64_t *dims, int64_t *st)
{
    st[3] = 1, st[1] = dims[3], st[2] = dims[1] * dims[3], st[0] = dims[2] * st[2];
    return c->bshd ? st : NULL;
}

static frost_status build_sdpa(const bcase *c, bgraph *bg)
{
    int64_t qd[4] = {c->b, c->h_q, c->s_q, c->d}, kd[4] = {c->b, c->h_kv, c->s_kv, c->d};
    int64_t vd[4] = {c->b, c->h_kv, c->s_kv, c->d_v}, od[4] = {c->b, c->h_q, c->s_q, c->d_v};
    int64_t ld[4] = {c->b, c->h_q, c->s_q, 1}, st[4][4];
    frost_tensor ids[MAX_T];
    frost_status s = FROST_OK;
    int bwd = c->op == OP_SDPA_BWD;
    s = s ? s : add_in(bg, "q", c->dtype, 4, qd, layout(c, qd, st[0]), R_RANDOM);
    s = s ? s : add_in(bg, "k", c->dtype, 4, kd, layout(c, kd, st[1]), R_RANDOM);
    s = s ? s : add_in(bg, "v", c->dtype, 4, vd, layout(c, vd, st[2]), R_RANDOM);
    if (bwd) {
        s = s ? s : add_in(bg, "o", c->dtype, 4, od, layout(c, od, st[3]), R_RANDOM);
        s = s ? s : add_in(bg, "d_o", c->dtype, 4, od, layout(c, od, st[3]), R_RANDOM);
        s = s ? s : add_in(bg, "lse", FROST_F32, 4, ld, NULL, R_LSE);
    }
    if (s)
        return s;
    memcpy(ids, bg->id, sizeof ids);
    frost_sdpa_attrs at = {0};
    if (c->causal)
        at.mask_flags = FROST_MASK_RIGHT_BOUND;
    if (!bwd) {
        frost_sdpa_desc d = {.q = ids[0], .k = ids[1], .v = ids[2], .attrs = at};
        frost_sdpa_outputs o = {.o = FROST_TENSOR_AUTO, .stats = FROST_TENSOR_AUTO};
        s = frost_graph_add_sdpa(bg->g, &d, &o);
        note(bg, o.o, R_OUTPUT), note(bg, o.stats, R_OUTPUT);
    } else {
        frost_sdpa_backward_desc d = {.q = ids[0], .k = ids[1], .v = ids[2], .o = ids[3], .d_o = ids[4],
                                      .stats = ids[5], .attrs = at};
        frost_sdpa_grads gr = {.d_q = FROST_TENSOR_AUTO, .d_k = FROST_TENSOR_AUTO, .d_v = FROST_TENSOR_AUTO};
        s = frost_graph_add_sdpa_backward(bg->g, &d, &gr);
        note(bg, gr.d_q, R_OUTPUT), note(bg, gr.d_k, R_OUTPUT), note(bg, gr.d_v, R_OUTPUT);
    }
    return s;
}

#include "../bench/graphs_norm.h" /* build_norm, build_cnorm: the norm graphs */

/* Synthetic saved statistics (f32, one per row). */
static frost_status fill_stats(const frost__device *dev, const bcase *c, void *dst, int role, int64_t n, uint64_t *rng)
{
    float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!h)
        return FROST_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n; i++) {
        if (role == R_LSE) {
            int64_t keys = row_keys(c, i % c->s_q);
            h[i] = keys > 0 ? (float)(log((double)keys) + 1.0 / 18.0) : -INFINITY;
        } else {
            h[i] = role == R_MEAN ? 0.01f * bench_rng_unit(rng) : 1.7320508f * (1.0f + 0.01f * bench_rng_unit(rng));
        }
    }
    frost_status s = bench_copy_in(dev, dst, h, sizeof(float) * (size_t)n);
    free(h);
    return s;
}

static frost_status build_case(const bcase *c, bgraph *bg)
{
    return is_sdpa(c->op) ? build_sdpa(c, bg) : is_cnorm(c->op) ? build_cnorm(c, bg) : build_norm(c, bg);
}

/* ---- running one case ------------------------------------------------------------------- */
/* Builds the graph, then allocates and fills the input sets: enough that the rotated sets
 * exceed 2 x L2, at least 3 (or --sets), never more than half of the device memory. */
static frost_status setup(bstate *st, const bcase *c, const bopts *o, pools *pl, bresult *r)
{
    const frost__device *dev = st->dev;
    size_t wsb = 0, set_bytes = 0;
    uint64_t rng = o->seed * 0x9E37ull + (uint64_t)c->op;
    frost_status s = build_case(c, &st->bg);
    if (s)
        return bench_fail(r, s, "add"), s;
    s = frost_graph_build(st->bg.g, NULL);
    if (o->explain) { /* the choice, or every engine's refusal */
        size_t len = 0;
        frost_graph_explain(st->bg.g, NULL, 0, &len);
        char *txt = malloc(len + 1);
        if (txt && frost_graph_explain(st->bg.g, txt, len + 1, NULL) == FROST_OK)
            fprintf(stderr, "%s\n", txt);
        free(txt);
    }
    if (s)
        return bench_fail(r, s, "build"), s;
    if ((s = bench_resolve(&st->bg)) || (s = frost_graph_workspace_size(st->bg.g, &wsb)))
        return bench_fail(r, s, "resolve"), s;
    for (int i = 0; i < st->bg.nt; i++)
        set_bytes += bench_bytes(&st->bg, i);
    int n = o->sets > 0 ? o->sets : 3;
    if (dev && o->sets <= 0 && set_bytes && (size_t)n * set_bytes < 2 * dev->l2_bytes)
        n = (int)((2 * dev->l2_bytes + set_bytes - 1) / set_bytes);
    n = n > MAX_SETS ? MAX_SETS : n;
    while (dev && n > 1 && (double)n * (double)set_bytes > 0.5 * (double)dev->global_mem_bytes)
        n--;
    if (wsb && (s = bench_mem_alloc(dev, wsb, &st->ws)))
        return bench_fail(r, s, "workspace alloc"), s;
    for (st->nsets = 0; st->nsets < n; st->nsets++)
        for (int i = 0; i < st->bg.nt; i++) {
            int k = st->nsets, role = st->bg.role[i];
            size_t bytes = bench_bytes(&st->bg, i);
            if ((s = bench_mem_alloc(dev, bytes ? bytes : 16, &st->ptr[k][i])))
                return bench_fail(r, s, "alloc"), s;
            if (role == R_RANDOM)
                s = bench_fill_random(dev, pl, st->ptr[k][i], st->bg.dt[i], st->bg.span[i], &rng);
            else if (role != R_OUTPUT)
                s = fill_stats(dev, c, st->ptr[k][i], role, st->bg.span[i], &rng);
            if (s)
                return bench_fail(r, s, "fill"), s;
        }
    return FROST_OK;
}

/* --check, after the timed runs: input set 0 goes to the host, its outputs are poisoned
 * (NaN) and the engine under test runs it once more; the same case, built on the CPU
 * context, runs on the host copy through the reference engine.  Every bound tensor is then
 * compared, the inputs too (they must come back as they went in, or as the reference
 * updates them in place: BatchNorm's running statistics).  FROST_BENCH_CHECK_FLIP=1
 * negates the engine's first output element before the comparison, so that a test can see
 * the check fail. */
static void check_case(frost_context *cpu, const bcase *c, bstate *st, bresult *r)
{
    bgraph ref = {0};
    void *host[MAX_T] = {0}, *got[MAX_T] = {0}, *ws = NULL;
    frost_binding bind[MAX_T];
    size_t wsb = 0;
    const int nt = st->bg.nt;
    frost_status s = frost_graph_create(cpu, &ref.g);
    s = s ? s : build_case(c, &ref);
    s = s ? s : frost_graph_build(ref.g, NULL);
    s = s ? s : bench_resolve(&ref);
    s = s ? s : frost_graph_workspace_size(ref.g, &wsb);
    if (!s && ref.nt != nt)
        s = frost__fail(FROST_INTERNAL, "the reference graph binds %d tensors, the timed one %d", ref.nt, nt);
    if (!s && wsb && !(ws = malloc(wsb)))
        s = FROST_OUT_OF_MEMORY;
    for (int i = 0; !s && i < nt; i++) {
        const size_t bytes = bench_bytes(&st->bg, i);
        host[i] = malloc(bytes ? bytes : 16), got[i] = malloc(bytes ? bytes : 16);
        if (!host[i] || !got[i])
            s = FROST_OUT_OF_MEMORY;
        else if (st->bg.role[i] != R_OUTPUT)
            s = bench_copy_out(st->dev, host[i], st->ptr[0][i], bytes);
        else { /* outputs of both engines start as all-ones bits: NaN in every float dtype */
            memset(got[i], 0xff, bytes);
            memset(host[i], 0xff, bytes);
            s = bench_copy_in(st->dev, st->ptr[0][i], got[i], bytes);
        }
    }
    for (int i = 0; !s && i < nt; i++)
        bind[i] = (frost_binding){st->bg.id[i], st->ptr[0][i]};
    s = s ? s : frost_graph_execute(st->bg.g, bind, nt, st->ws, NULL);
    s = s ? s : st->dev ? frost__dev_synchronize(st->dev) : FROST_OK;
    for (int i = 0; !s && i < nt; i++)
        s = bench_copy_out(st->dev, got[i], st->ptr[0][i], bench_bytes(&st->bg, i));
    for (int i = 0; !s && i < nt; i++)
        bind[i] = (frost_binding){ref.id[i], host[i]};
    s = s ? s : frost_graph_execute(ref.g, bind, nt, ws, NULL);
    if (s) {
        bench_fail(r, s, "check");
    } else {
        const char *flip = getenv("FROST_BENCH_CHECK_FLIP");
        for (int i = 0; flip && atoi(flip) && i < nt; i++)
            if (st->bg.role[i] == R_OUTPUT && st->bg.span[i] > 0) {
                frost__store_elem(got[i], 0, st->bg.dt[i], -frost__load_elem(got[i], 0, st->bg.dt[i]) - 1.0);
                break;
            }
        r->check = 1;
        double worst = -1; /* the worst tensor: the largest error over its tolerance */
        for (int k = 0; k < 2 * nt; k++) { /* the outputs first, so that a tie names an output */
            const int i = k % nt;
            if ((st->bg.role[i] == R_OUTPUT) != (k < nt))
                continue;
            const double e = bench_rel_err(got[i], host[i], st->bg.dt[i], st->bg.span[i]);
            const double tol = bench_check_tol(st->bg.dt[i]);
            if (!(e / tol <= worst)) {
                frost_tensor_desc d;
                worst = e / tol;
                r->check_err = e;
                snprintf(r->check_tensor, sizeof r->check_tensor, "%s",
                         frost_graph_tensor_desc(st->bg.g, st->bg.id[i], &d) == FROST_OK && d.name ? d.name : "?");
            }
            if (!(e <= tol))
                r->check = -1;
        }
    }
    for (int i = 0; i < nt; i++)
        free(host[i]), free(got[i]);
    free(ws);
    frost_graph_destroy(ref.g);
}

static void time_case(frost_context *ctx, frost_context *cpu, const bcase *c, const bopts *o, pools *pl, bresult *r)
{
    bstate *st = calloc(1, sizeof *st);
    frost_status s = st ? frost_graph_create(ctx, &st->bg.g) : FROST_OUT_OF_MEMORY;
    if (s) {
        bench_fail(r, s, "graph_create");
        free(st);
        return;
    }
    st->dev = ctx->device;
    if (!setup(st, c, o, pl, r))
        bench_measure(st, o, r);
    if (cpu && r->status == FROST_OK)
        check_case(cpu, c, st, r);
    bench_state_free(st);
}

/* ---- output ----------------------------------------------------------------------------- */
static void json_str(frost__buf *f, const char *s)
{
    frost__buf_printf(f, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            frost__buf_printf(f, "\\%c", ch);
        else if (ch < 0x20)
            frost__buf_printf(f, "\\u%04x", ch);
        else
            frost__buf_printf(f, "%c", ch);
    }
    frost__buf_printf(f, "\"");
}

/* Prints the table row and appends the case's JSON line to all (and to the --json file). */
static void report(const bcase *c, const bresult *r, FILE *jf, frost__buf *all)
{
    char label[160];
    frost__buf j = {0};
    case_label(c, label, sizeof label);
    double work = case_work(c);
    int flops = is_sdpa(c->op);
    json_case(&j, c);
    if (r->status == FROST_OK) {
        double rate = flops ? work / (r->ms * 1e-3) / 1e12 : work / (r->ms * 1e-3) / 1e9;
        double peak = flops ? PEAK_TFLOPS : PEAK_GBPS;
        char chk[128] = "";
        if (r->check)
            snprintf(chk, sizeof chk, "  check %s %.2e (%s)", r->check > 0 ? "ok" : "FAILED", r->check_err,
                     r->check_tensor);
        printf("%-16s %-5s %-36s %9.4f %9.1f %s %5.0f%%%s%s\n", op_names[c->op], frost_dtype_name(c->dtype), label,
               r->ms, rate, flops ? "TFLOP/s" : "GB/s   ", 100.0 * rate / peak,
               r->nonfinite ? "  NONFINITE OUTPUT" : "", chk);
        frost__buf_printf(&j, ",\"ms\":%.6f,\"ms_min\":%.6f,\"%s\":%.3f,\"runs\":%d,\"sets\":%d,\"status\":\"OK\"",
                          r->ms, r->ms_min, flops ? "tflops" : "gbps", rate, r->runs, r->sets);
        if (r->nonfinite)
            frost__buf_printf(&j, ",\"nonfinite\":%d", r->nonfinite);
        if (r->check) {
            frost__buf_printf(&j, ",\"check\":\"%s\",\"check_err\":%.3e,\"check_tensor\":",
                              r->check > 0 ? "ok" : "FAILED", isfinite(r->check_err) ? r->check_err : 1e308);
            json_str(&j, r->check_tensor);
        }
    } else {
        printf("%-16s %-5s %-36s %s (%s): %s\n", op_names[c->op], frost_dtype_name(c->dtype), label,
               r->status == FROST_NOT_SUPPORTED ? "refused" : "FAILED", frost_status_name(r->status), r->reason);
        frost__buf_printf(&j, ",\"status\":\"%s\",\"reason\":", frost_status_name(r->status));
        json_str(&j, r->reason);
    }
    frost__buf_printf(&j, "}\n");
    frost__buf_printf(all, "%s", frost__buf_str(&j));
    if (jf) {
        fputs(frost__buf_str(&j), jf);
        fflush(jf);
    }
    frost__buf_free(&j);
    fflush(stdout);
}

/* ---- command line ------------------------------------------------------------------------ */
static int usage(void)
{
    fprintf(stderr, "usage: frost-bench [--suite smoke|sdpa|norm|cnorm|all] [--op OP[,OP]] [--b N --h N --h-kv N\n"
                    "       --s N --s-q N --s-kv N --d N --d-v N --causal --layout bhsd|bshd] [--rows N --cols N]\n"
                    "       [--n N --c N --height N --width N --groups N --layout nhwc|nchw]\n"
                    "       [--dtype bf16|f16|f32] [--param-dtype bf16|f16|f32] [--runs N] [--warmup N] [--sets N]\n"
                    "       [--rms-bias] [--y-only] [--slice N] [--seed N] [--device N] [--json FILE] [--list]\n"
                    "       [--explain] [--cpu] [--exact] [--check]\n"
                    "  OP: sdpa_fwd sdpa_bwd rmsnorm_fwd rmsnorm_bwd layernorm_fwd layernorm_bwd groupnorm_fwd\n"
                    "      groupnorm_bwd instancenorm_fwd instancenorm_bwd batchnorm_fwd batchnorm_bwd\n"
                    "      adalayernorm_fwd adalayernorm_bwd (AdaLayerNorm: --b, --s, --c)\n");
    return 2;
}

/* The dtype a --dtype / --param-dtype value names (f32, f16, bf16), or FROST_DTYPE_INVALID. */
static frost_dtype io_dtype(const char *v)
{
    static const frost_dtype io[] = {FROST_F32, FROST_F16, FROST_BF16};
    for (size_t i = 0; i < sizeof io / sizeof io[0]; i++)
        if (!strcmp(v, frost_dtype_name(io[i])))
            return io[i];
    return FROST_DTYPE_INVALID;
}

/* Parses argv into the ad-hoc case, the options and the suite/op selection; 0 on success. */
static int parse(int argc, char **argv, bcase *c, bopts *o, const char **suite, const char **ops, const char **json)
{
    int64_t runs = 30, warm = 5, sets = 0, seed = 1234, dev = 0;
    struct { const char *name; int64_t *v; } num[] = {
        {"--b", &c->b}, {"--h", &c->h_q}, {"--h-kv", &c->h_kv}, {"--s-q", &c->s_q}, {"--s-kv", &c->s_kv},
        {"--d", &c->d}, {"--d-v", &c->d_v}, {"--rows", &c->rows}, {"--cols", &c->cols}, {"--runs", &runs},
        {"--warmup", &warm}, {"--sets", &sets}, {"--seed", &seed}, {"--device", &dev}, {"--n", &c->n},
        {"--c", &c->c}, {"--height", &c->h}, {"--width", &c->w}, {"--groups", &c->groups}, {"--slice", &c->slice}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        struct { const char *name; int *v; } flags[] = {
            {"--causal", &c->causal}, {"--list", &o->list}, {"--explain", &o->explain}, {"--cpu", &o->cpu},
            {"--exact", &o->exact}, {"--rms-bias", &c->rms_bias}, {"--check", &o->check},
            {"--y-only", &c->y_only}};
        int f = 0, nf = (int)(sizeof flags / sizeof flags[0]);
        while (f < nf && strcmp(a, flags[f].name))
            f++;
        if (f < nf) {
            *flags[f].v = 1;
            continue;
        }
        if (!v || strncmp(a, "--", 2))
            return fprintf(stderr, "frost-bench: bad argument %s\n", a), -1;
        i++;
        int k = 0, nk = (int)(sizeof num / sizeof num[0]);
        while (k < nk && strcmp(a, num[k].name))
            k++;
        char *end = NULL;
        if (k < nk && (*num[k].v = strtoll(v, &end, 10), !*end))
            continue;
        if (k < nk)
            return fprintf(stderr, "frost-bench: %s wants a number, got '%s'\n", a, v), -1;
        if (!strcmp(a, "--s"))
            c->s_q = c->s_kv = atoll(v);
        else if (!strcmp(a, "--suite"))
            *suite = v;
        else if (!strcmp(a, "--op"))
            *ops = v;
        else if (!strcmp(a, "--json"))
            *json = v;
        else if (!strcmp(a, "--layout") && (!strcmp(v, "bhsd") || !strcmp(v, "bshd")))
            c->bshd = !strcmp(v, "bshd");
        else if (!strcmp(a, "--layout") && (!strcmp(v, "nhwc") || !strcmp(v, "nchw")))
            c->nchw = !strcmp(v, "nchw");
        else if (!strcmp(a, "--dtype") && io_dtype(v))
            c->dtype = io_dtype(v);
        else if (!strcmp(a, "--param-dtype") && io_dtype(v))
            c->param_dtype = io_dtype(v);
        else
            return fprintf(stderr, "frost-bench: bad option %s %s\n", a, v), -1;
    }
    c->h_kv = c->h_kv ? c->h_kv : c->h_q;
    c->d_v = c->d_v ? c->d_v : c->d;
    if (runs < 1 || runs > 100000 || warm < 0 || warm > 100000 || sets < 0 || sets > MAX_SETS || c->b < 1 ||
        c->h_q < 1 || c->h_kv < 1 || c->s_q < 1 || c->s_kv < 1 || c->d < 1 || c->d_v < 1 || c->rows < 1 ||
        c->cols < 1 || c->n < 1 || c->c < 1 || c->h < 1 || c->w < 1 || c->groups < 1 || dev < 0)
        return fprintf(stderr, "frost-bench: sizes and counts must be positive (sets <= %d)\n", MAX_SETS), -1;
    if (c->slice < 0 || (c->slice > 0 && c->rows % c->slice != 0))
        return fprintf(stderr, "frost-bench: --slice %lld must divide --rows %lld\n", (long long)c->slice,
                       (long long)c->rows),
               -1;
    o->runs = (int)runs, o->warmup = (int)warm, o->sets = (int)sets, o->seed = (uint64_t)seed, o->device = (int)dev;
    return 0;
}

int main(int argc, char **argv)
{
    bopts o = {0};
    bcase adhoc = {.dtype = FROST_BF16, .b = 2, .h_q = 16, .s_q = 2048, .s_kv = 2048, .d = 128, .rows = 16384,
                   .cols = 4096, .n = 32, .c = 512, .h = 64, .w = 64, .groups = 32};
    const char *suite = NULL, *ops = NULL, *json_path = NULL;
    int rc = 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return usage(), 0;
    if (parse(argc, argv, &adhoc, &o, &suite, &ops, &json_path))
        return usage();
    if (ops) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", ops);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            int k = 0;
            while (k < OP_N && strcmp(tok, op_names[k]))
                k++;
            if (k == OP_N)
                return fprintf(stderr, "frost-bench: unknown op '%s'\n", tok), usage();
            adhoc.op = (bench_op)k;
            push(adhoc);
        }
    }
    if ((suite || !ops) && suite_cases(suite ? suite : "smoke"))
        return usage();
    if (o.list) { /* the cases as JSON lines, no GPU needed (bench/peers.py --cases reads them) */
        for (int i = 0; i < ncases; i++) {
            frost__buf j = {0};
            json_case(&j, &cases[i]);
            printf("%s}\n", frost__buf_str(&j));
            frost__buf_free(&j);
        }
        return 0;
    }

    frost_context_options co = {.kind = o.cpu ? FROST_DEVICE_CPU : FROST_DEVICE_CUDA, .device_index = o.device};
    frost_context *ctx = NULL, *cpu = NULL;
    FILE *jf = NULL;
    frost_status s = frost_context_create(&co, &ctx);
    if (s != FROST_OK) {
        fprintf(stderr, "frost-bench: no usable GPU (%s): %s\n", frost_status_name(s), frost_last_error());
        return s == FROST_NO_DEVICE ? 77 : 1;
    }
    if (ctx->device && (s = frost__device_make_current(ctx->device)) != FROST_OK)
        fprintf(stderr, "frost-bench: %s: %s\n", frost_status_name(s), frost_last_error());
    else if (json_path && !(jf = fopen(json_path, "w")))
        perror(json_path);
    else if (o.check && (s = frost_context_create(NULL, &cpu)) != FROST_OK)
        fprintf(stderr, "frost-bench: --check: no CPU context (%s): %s\n", frost_status_name(s), frost_last_error());
    else
        rc = 0;
    if (rc)
        return frost_context_destroy(ctx), jf ? fclose(jf) : 0, 1;
    printf("frost-bench %s on %s\nmedian of >= %d runs after >= 100 ms warm-up; rotating input sets (>= 3 and "
           "> 2 x L2 unless --sets); %%peak of %.0f TFLOP/s or %.0f GB/s\n",
           frost_version(), frost_context_device_name(ctx), o.runs, PEAK_TFLOPS, PEAK_GBPS);
    printf("%-16s %-5s %-36s %9s %9s %s %6s\n", "op", "dtype", "shape", "ms", "rate", "unit   ", "%peak");
    pools pl = {{0}};
    frost__buf all = {0};
    int failed = 0;
    for (int i = 0; i < ncases; i++) {
        bresult r = {.status = FROST_INTERNAL};
        time_case(ctx, cpu, &cases[i], &o, &pl, &r);
        failed += (r.status != FROST_OK && r.status != FROST_NOT_SUPPORTED) || r.check < 0;
        report(&cases[i], &r, jf, &all);
    }
    if (jf)
        fclose(jf);
    printf("%s", frost__buf_str(&all)); /* the JSON lines, one per case */
    printf("frost-bench: %d cases, %d failed (refusals are not failures%s)\n", ncases, failed,
           o.check ? "; a failed check is one" : "");
    frost__buf_free(&all);
    for (int i = 0; i < 16; i++)
        free(pl.p[i]);
    frost_context_destroy(cpu);
    frost_context_destroy(ctx);
    return failed ? 1 : 0;
}
