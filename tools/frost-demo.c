/*
 * frost-demo — the smallest complete use of frost's graph API.
 *
 * It builds one graph with two nodes,
 *     O = SDPA(Q, K, V; causal, GQA 4 query heads over 2 KV heads)
 *     Y = RMSNorm(O) over the head dim, with a learned scale,
 * builds it for a context, executes it, and checks every output element against the
 * plain formulas written out below (softmax attention and x / sqrt(mean(x^2) + eps) * w).
 *
 * Usage: frost-demo [--gpu]
 *   default: the CPU context (reference engine, host memory)
 *   --gpu:   a CUDA context (frost's kernels); bf16 I/O, device memory
 * Exit status 0 when every element matches.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frost/frost.h"
#include "runtime/runtime.h"
#include "core/internal.h"

/* b = batch, hq / hkv = query / key-value heads, s = sequence, d = head dim (BHSD layout) */
enum { B = 2, HQ = 4, HKV = 2, S = 16, D = 32 };
#define EPS 1e-5

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        frost_status st_ = (call);                                                                                     \
        if (st_ != FROST_OK) {                                                                                         \
            fprintf(stderr, "%s failed: %s: %s\n", #call, frost_status_name(st_), frost_last_error());                 \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

static double frand(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return ((*state >> 8) / 16777216.0) * 2.0 - 1.0;
}

/* The plain formulas: causal softmax attention, then RMSNorm over d. */
static void expected(const float *q, const float *k, const float *v, const float *w, double *y)
{
    double scale = 1.0 / sqrt((double)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++) {
            int hk = h / (HQ / HKV);
            for (int i = 0; i < S; i++) {
                double p[S], mx = -INFINITY, sum = 0, o[D] = {0};
                for (int j = 0; j <= i; j++) {
                    double dot = 0;
                    for (int c = 0; c < D; c++)
                        dot += (double)q[((b * HQ + h) * S + i) * D + c] * k[((b * HKV + hk) * S + j) * D + c];
                    p[j] = dot * scale;
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= i; j++)
                    sum += p[j] = exp(p[j] - mx);
                for (int j = 0; j <= i; j++)
                    for (int c = 0; c < D; c++)
                        o[c] += p[j] / sum * v[((b * HKV + hk) * S + j) * D + c];
                double ms = 0;
                for (int c = 0; c < D; c++)
                    ms += o[c] * o[c] / D;
                for (int c = 0; c < D; c++)
                    y[((b * HQ + h) * S + i) * D + c] = o[c] / sqrt(ms + EPS) * w[c];
            }
        }
}

static frost_tensor tensor(frost_graph *g, const char *name, frost_dtype dt, int rank, const int64_t *dims)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    memcpy(d.dims, dims, sizeof(int64_t) * (size_t)rank);
    frost_tensor t = 0;
    if (frost_graph_add_tensor(g, &d, &t) != FROST_OK)
        fprintf(stderr, "add_tensor %s: %s\n", name, frost_last_error());
    return t;
}

int main(int argc, char **argv)
{
    int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
    frost_dtype io = gpu ? FROST_BF16 : FROST_F32;
    printf("frost %s demo: SDPA (b=%d, h_q=%d, h_kv=%d, s=%d, d=%d, causal) -> RMSNorm over d, %s\n",
           frost_version(), B, HQ, HKV, S, D, gpu ? "CUDA, bf16" : "CPU reference engine, f32");

    frost_context_options copt = {.kind = gpu ? FROST_DEVICE_CUDA : FROST_DEVICE_CPU};
    frost_context *ctx = NULL;
    CHECK(frost_context_create(&copt, &ctx));
    printf("context: %s\n", frost_context_device_name(ctx));

    frost_graph *g = NULL;
    CHECK(frost_graph_create(ctx, &g));
    int64_t qd[4] = {B, HQ, S, D}, kd[4] = {B, HKV, S, D}, wd[1] = {D};
    frost_tensor q = tensor(g, "q", io, 4, qd), k = tensor(g, "k", io, 4, kd), v = tensor(g, "v", io, 4, kd);
    frost_tensor w = tensor(g, "w", FROST_F32, 1, wd);

    frost_sdpa_desc sd = {.q = q, .k = k, .v = v};
    sd.attrs.mask_flags = FROST_MASK_RIGHT_BOUND; /* causal: right bound 0 */
    frost_sdpa_outputs so = {0};
    CHECK(frost_graph_add_sdpa(g, &sd, &so));
    frost_norm_desc nd = {.x = so.o, .scale = w, .epsilon = EPS, .phase = FROST_NORM_INFERENCE};
    frost_norm_outputs no = {0};
    CHECK(frost_graph_add_rmsnorm(g, &nd, &no));
    CHECK(frost_graph_build(g, NULL));

    char report[8192];
    CHECK(frost_graph_explain(g, report, sizeof report, NULL));
    printf("--- frost_graph_explain ---\n%s---\n", report);

    size_t nq = (size_t)B * HQ * S * D, nk = (size_t)B * HKV * S * D, es = frost_dtype_size(io);
    float *hq = malloc(nq * 4), *hk = malloc(nk * 4), *hv = malloc(nk * 4), hw[D];
    double *ref = malloc(nq * sizeof(double));
    void *bq = malloc(nq * es), *bk = malloc(nk * es), *bv = malloc(nk * es), *bo = malloc(nq * es),
         *by = malloc(nq * es);
    unsigned seed = 42;
    for (size_t i = 0; i < nq; i++)
        frost__store_elem(bq, (int64_t)i, io, frand(&seed)), hq[i] = (float)frost__load_elem(bq, (int64_t)i, io);
    for (size_t i = 0; i < nk; i++) {
        frost__store_elem(bk, (int64_t)i, io, frand(&seed)), hk[i] = (float)frost__load_elem(bk, (int64_t)i, io);
        frost__store_elem(bv, (int64_t)i, io, frand(&seed)), hv[i] = (float)frost__load_elem(bv, (int64_t)i, io);
    }
    for (int c = 0; c < D; c++)
        hw[c] = (float)(1.0 + 0.5 * frand(&seed));
    expected(hq, hk, hv, hw, ref);

    size_t ws = 0;
    CHECK(frost_graph_workspace_size(g, &ws));
    void *pq = bq, *pk = bk, *pv = bv, *pw = hw, *po = bo, *py = by, *pws = NULL;
    if (gpu) {
        const frost__device *dev = ctx->device;
        CHECK(frost__dev_alloc(dev, nq * es, &pq));
        CHECK(frost__dev_alloc(dev, nk * es, &pk));
        CHECK(frost__dev_alloc(dev, nk * es, &pv));
        CHECK(frost__dev_alloc(dev, D * 4, &pw));
        CHECK(frost__dev_alloc(dev, nq * es, &po));
        CHECK(frost__dev_alloc(dev, nq * es, &py));
        if (ws)
            CHECK(frost__dev_alloc(dev, ws, &pws));
        CHECK(frost__dev_copy_htod(dev, pq, bq, nq * es));
        CHECK(frost__dev_copy_htod(dev, pk, bk, nk * es));
        CHECK(frost__dev_copy_htod(dev, pv, bv, nk * es));
        CHECK(frost__dev_copy_htod(dev, pw, hw, D * 4));
    } else if (ws) {
        pws = malloc(ws);
    }
    frost_binding bind[] = {{q, pq}, {k, pk}, {v, pv}, {w, pw}, {so.o, po}, {no.y, py}};
    CHECK(frost_graph_execute(g, bind, 6, pws, NULL));
    if (gpu) {
        CHECK(frost__dev_synchronize(ctx->device));
        CHECK(frost__dev_copy_dtoh(ctx->device, by, py, nq * es));
    }

    /* Tolerance: f32 I/O on the CPU is near exact; bf16 I/O on the GPU rounds O and Y. */
    double tol = gpu ? 3e-2 : 1e-5, max_err = 0;
    size_t bad = 0;
    for (size_t i = 0; i < nq; i++) {
        double got = frost__load_elem(by, (int64_t)i, io), err = fabs(got - ref[i]);
        if (!(err <= tol * (1.0 + fabs(ref[i]))))
            bad++;
        if (err > max_err || isnan(err))
            max_err = err;
    }
    printf("Y[0,0,0,0:4] = %.5f %.5f %.5f %.5f (expected %.5f %.5f %.5f %.5f)\n",
           frost__load_elem(by, 0, io), frost__load_elem(by, 1, io), frost__load_elem(by, 2, io),
           frost__load_elem(by, 3, io), ref[0], ref[1], ref[2], ref[3]);
    printf("checked %zu elements against the plain formula: max |error| = %.3g, %zu outside tolerance %.0e\n", nq,
           max_err, bad, tol);
    printf("%s\n", bad ? "demo FAILED" : "demo OK");

    if (gpu) {
        const frost__device *dev = ctx->device;
        frost__dev_free(dev, pq), frost__dev_free(dev, pk), frost__dev_free(dev, pv), frost__dev_free(dev, pw);
        frost__dev_free(dev, po), frost__dev_free(dev, py), frost__dev_free(dev, pws);
    } else {
        free(pws);
    }
    free(hq), free(hk), free(hv), free(ref), free(bq), free(bk), free(bv), free(bo), free(by);
    frost_graph_destroy(g);
    frost_context_destroy(ctx);
    return bad ? 1 : 0;
}
