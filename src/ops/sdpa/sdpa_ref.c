/*
 * sdpa_ref.c — the reference engine's attention, forward and backward: plain C loops with
 * fp64 accumulation over f32 / f16 / bf16 storage.  It is the oracle that the CUDA
 * kernels are tested against, so it favours being obviously right over being fast: one
 * query row at a time, the mask decided per (row, key) by frost__sdpa_admissible, every
 * element read through its strides.
 *
 * Layout legend: b = batch, h = query head, hk = KV head (h / G, G = h_q / h_kv), i = query
 * row, j = key row, d = head-dim index.
 *
 * Per-batch geometry is resolved at execute time, before anything is written:
 *   - a ragged operand's batch b starts at offsets[b] * stride[2] and owns
 *     offsets[b+1] - offsets[b] rows (which must lie in 0..s); a padded operand starts at
 *     b * stride[0] and owns s rows;
 *   - len_q(b) is seq_len_q[b] when given, else Q's ragged length, else s_q; len_kv(b) is
 *     seq_len_kv[b], else K's (then V's) ragged length, else s_kv.  Each length must fit in
 *     every operand of its side.  A violation is INVALID_ARGUMENT naming the batch.
 *
 * What gets written (the contract the CUDA engine follows too):
 *   - forward: rows i < len_q of O and stats hold the attention; the other rows an operand
 *     owns are O = 0 and stats = -inf (stats is never ragged, so that is i in len_q..s_q).
 *     A row with no admissible key and no sink gives O = 0, LSE = -inf; with a sink it
 *     gives O = 0, LSE = sink.
 *   - backward: dQ rows i >= len_q and dK / dV rows j >= len_kv that the operand owns are
 *     0; d_bias is written over all of its elements (0 where nothing contributes);
 *     d_sink_h = -sum over rows of exp(sink_h - lse) * delta.  A row whose LSE is -inf
 *     contributes nothing (exp(s - lse) is never evaluated for it).
 *
 * Workspace (host memory, no allocation in execute): forward keeps one KV head in fp64
 * (K and V rows), one row of scores, the query row and the output accumulator; backward
 * keeps one KV head, its dK/dV accumulators, the row vectors, a fp64 copy of d_bias and
 * one d_sink accumulator per head.  Sizes are in fwd_doubles / bwd_doubles.
 */
#include <math.h>
#include <string.h>

#include "ops/sdpa/sdpa.h"

/* ------------------------------------------------------------------------------------ */
/* Per-batch geometry                                                                    */
/* ------------------------------------------------------------------------------------ */

static const int q_side[] = {FROST__SDPA_Q, FROST__SDPA_O, FROST__SDPA_D_O, FROST__SDPA_D_Q};
static const int kv_side[] = {FROST__SDPA_K, FROST__SDPA_V, FROST__SDPA_D_K, FROST__SDPA_D_V};
static const char *const role_names[FROST__SDPA_NUM_SLOTS] = {
    [FROST__SDPA_Q] = "Q",    [FROST__SDPA_K] = "K",    [FROST__SDPA_V] = "V",    [FROST__SDPA_O] = "O",
    [FROST__SDPA_D_O] = "dO", [FROST__SDPA_D_Q] = "dQ", [FROST__SDPA_D_K] = "dK", [FROST__SDPA_D_V] = "dV",
};

typedef struct batch_geo {
    int64_t len_q, len_kv;
    int64_t base[FROST__SDPA_NUM_SLOTS]; /* element offset of (b, 0, 0, 0) per 4-D slot */
    int64_t rows[FROST__SDPA_NUM_SLOTS]; /* rows of the s dim this batch owns per 4-D slot */
} batch_geo;

/* One side (query rows or key rows) of batch b.  `op` names the node in messages. */
static frost_status side_geometry(const frost__sdpa_problem *p, void *const *ptrs, int64_t b, const int *slots,
                                  int64_t s_dim, int seq_slot, const char *op, int64_t *len, batch_geo *geo)
{
    const char *len_src = NULL;
    *len = -1;
    for (int k = 0; k < 4; k++) {
        int s = slots[k];
        const frost__sdpa_operand *o = &p->op[s];
        if (!o->present)
            continue;
        if (!o->ragged) {
            geo->base[s] = b * o->stride[0];
            geo->rows[s] = s_dim;
            continue;
        }
        const void *offs = ptrs[frost__sdpa_ragged_slot(s)];
        int64_t first = frost__load_index(offs, o->ragged_dtype, b);
        int64_t count = frost__load_index(offs, o->ragged_dtype, b + 1) - first;
        if (first < 0 || count < 0 || count > s_dim)
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "%s (ref): %s's ragged offsets [%lld] = %lld, [%lld] = %lld give batch %lld a length of "
                               "%lld; it must lie in 0..%lld (the s dim) and offsets must be >= 0",
                               op, role_names[s], (long long)b, (long long)first, (long long)(b + 1),
                               (long long)(first + count), (long long)b, (long long)count, (long long)s_dim);
        geo->base[s] = first * o->stride[2];
        geo->rows[s] = count;
        /* only the inputs (Q, K, V) define the length; outputs follow */
        if (*len < 0 && (s == FROST__SDPA_Q || s == FROST__SDPA_K || s == FROST__SDPA_V)) {
            *len = count;
            len_src = role_names[s];
        }
    }
    if (p->op[seq_slot].present) {
        int64_t v = ((const int32_t *)ptrs[seq_slot])[b * p->op[seq_slot].stride[0]];
        if (v < 0 || v > s_dim)
            return frost__fail(FROST_INVALID_ARGUMENT, "%s (ref): %s[%lld] = %lld must lie in 0..%lld (the s dim)", op,
                               seq_slot == FROST__SDPA_SEQ_LEN_Q ? "seq_len_q" : "seq_len_kv", (long long)b,
                               (long long)v, (long long)s_dim);
        *len = v;
        len_src = seq_slot == FROST__SDPA_SEQ_LEN_Q ? "seq_len_q" : "seq_len_kv";
    }
    if (*len < 0) {
        *len = s_dim;
        len_src = "the s dim";
    }
    for (int k = 0; k < 4; k++) {
        int s = slots[k];
        if (p->op[s].present && geo->rows[s] < *len)
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "%s (ref): batch %lld has length %lld (from %s) but %s's ragged slice holds only %lld "
                               "rows", op, (long long)b, (long long)*len, len_src, role_names[s],
                               (long long)geo->rows[s]);
    }
    return FROST_OK;
}

static frost_status geometry(const frost__sdpa_problem *p, void *const *ptrs, int64_t b, batch_geo *geo)
{
    const char *op = p->backward ? "sdpa_bwd" : "sdpa_fwd";
    frost_status s = side_geometry(p, ptrs, b, q_side, p->s_q, FROST__SDPA_SEQ_LEN_Q, op, &geo->len_q, geo);
    if (s == FROST_OK)
        s = side_geometry(p, ptrs, b, kv_side, p->s_kv, FROST__SDPA_SEQ_LEN_KV, op, &geo->len_kv, geo);
    return s;
}

/* Checks every batch before anything is written, so a bad offset leaves outputs as they
 * were. */
static frost_status check_all_batches(const frost__sdpa_problem *p, void *const *ptrs)
{
    batch_geo geo;
    for (int64_t b = 0; b < p->b; b++) {
        frost_status s = geometry(p, ptrs, b, &geo);
        if (s != FROST_OK)
            return s;
    }
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Row helpers                                                                           */
/* ------------------------------------------------------------------------------------ */

/* Element offset of (h, row, 0) inside batch `geo` of a 4-D slot; add d * stride[3]. */
static int64_t row_at(const frost__sdpa_problem *p, const batch_geo *geo, int slot, int64_t h, int64_t row)
{
    const int64_t *st = p->op[slot].stride;
    return geo->base[slot] + h * st[1] + row * st[2];
}

static void load_row(const frost__sdpa_problem *p, const void *base, int slot, int64_t at, int64_t n, double *dst)
{
    const frost__sdpa_operand *o = &p->op[slot];
    for (int64_t d = 0; d < n; d++)
        dst[d] = frost__load_elem(base, at + d * o->stride[3], o->dtype);
}

/* Stores scale * src (src may be NULL: zeros). */
static void store_row(const frost__sdpa_problem *p, void *base, int slot, int64_t at, int64_t n, const double *src,
                      double scale)
{
    const frost__sdpa_operand *o = &p->op[slot];
    for (int64_t d = 0; d < n; d++)
        frost__store_elem(base, at + d * o->stride[3], o->dtype, src ? scale * src[d] : 0.0);
}

/* Loads rows 0..len-1 of KV head hk of K or V into dst[len][n]. */
static void load_head(const frost__sdpa_problem *p, const batch_geo *geo, const void *base, int slot, int64_t hk,
                      int64_t len, int64_t n, double *dst)
{
    for (int64_t j = 0; j < len; j++)
        load_row(p, base, slot, row_at(p, geo, slot, hk, j), n, dst + j * n);
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0.0;
    for (int64_t d = 0; d < n; d++)
        s += a[d] * b[d];
    return s;
}

static double bias_at(const frost__sdpa_problem *p, const void *bias, int64_t b, int64_t h, int64_t i, int64_t j)
{
    const frost__sdpa_operand *o = &p->op[FROST__SDPA_BIAS];
    return frost__load_elem(bias, b * o->stride[0] + h * o->stride[1] + i * o->stride[2] + j * o->stride[3], o->dtype);
}

/* Score of (row i, key j): scale * q.k + bias, or -inf when the key is masked out. */
static double score(const frost__sdpa_problem *p, void *const *ptrs, const batch_geo *geo, int64_t b, int64_t h,
                    int64_t i, int64_t j, const double *q, const double *k)
{
    if (!frost__sdpa_admissible(p, i, j, geo->len_q, geo->len_kv))
        return -INFINITY;
    double s = p->scale * dot(q, k, p->d_qk);
    if (p->op[FROST__SDPA_BIAS].present)
        s += bias_at(p, ptrs[FROST__SDPA_BIAS], b, h, i, j);
    return s;
}

static double sink_of(const frost__sdpa_problem *p, void *const *ptrs, int64_t h)
{
    if (!p->op[FROST__SDPA_SINK].present)
        return -INFINITY;
    return ((const float *)ptrs[FROST__SDPA_SINK])[h * p->op[FROST__SDPA_SINK].stride[1]];
}

static int64_t stats_at(const frost__sdpa_problem *p, int64_t b, int64_t h, int64_t i)
{
    const int64_t *st = p->op[FROST__SDPA_STATS].stride;
    return b * st[0] + h * st[1] + i * st[2];
}

/* ------------------------------------------------------------------------------------ */
/* Forward                                                                               */
/* ------------------------------------------------------------------------------------ */

static size_t fwd_doubles(const frost__sdpa_problem *p)
{
    return (size_t)(p->s_kv * (p->d_qk + p->d_v) + p->s_kv + p->d_qk + p->d_v);
}

/* One query row: O row and LSE.  kc / vc hold the KV head, sc is scratch for s_kv scores. */
static void fwd_row(const frost__sdpa_problem *p, void *const *ptrs, const batch_geo *geo, int64_t b, int64_t h,
                    int64_t i, const double *kc, const double *vc, double *sc, double *q, double *acc)
{
    int64_t d_qk = p->d_qk, d_v = p->d_v;
    load_row(p, ptrs[FROST__SDPA_Q], FROST__SDPA_Q, row_at(p, geo, FROST__SDPA_Q, h, i), d_qk, q);
    double sink = sink_of(p, ptrs, h);
    double m = sink;
    for (int64_t j = 0; j < geo->len_kv; j++) {
        sc[j] = score(p, ptrs, geo, b, h, i, j, q, kc + j * d_qk);
        if (sc[j] > m)
            m = sc[j];
    }
    memset(acc, 0, (size_t)d_v * sizeof *acc);
    double lse = -INFINITY;
    if (m != -INFINITY) {
        double z = p->op[FROST__SDPA_SINK].present ? exp(sink - m) : 0.0;
        for (int64_t j = 0; j < geo->len_kv; j++) {
            if (sc[j] == -INFINITY)
                continue;
            double w = exp(sc[j] - m);
            z += w;
            for (int64_t d = 0; d < d_v; d++)
                acc[d] += w * vc[j * d_v + d];
        }
        for (int64_t d = 0; d < d_v; d++)
            acc[d] /= z;
        lse = m + log(z);
    }
    store_row(p, ptrs[FROST__SDPA_O], FROST__SDPA_O, row_at(p, geo, FROST__SDPA_O, h, i), d_v, acc, 1.0);
    if (p->op[FROST__SDPA_STATS].present)
        ((float *)ptrs[FROST__SDPA_STATS])[stats_at(p, b, h, i)] = (float)lse;
}

static frost_status ref_select(const frost_context *ctx, const frost__graph *g, const frost__node *n, void **plan,
                               frost__buf *why)
{
    (void)ctx, (void)g, (void)n, (void)why;
    *plan = NULL;
    return FROST_OK;
}

static size_t fwd_workspace(const frost__node *n, const void *plan)
{
    (void)plan;
    return fwd_doubles(n->problem) * sizeof(double);
}

static frost_status fwd_execute(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                                void *workspace, void *stream)
{
    (void)ctx, (void)plan, (void)stream;
    const frost__sdpa_problem *p = n->problem;
    frost_status s = check_all_batches(p, ptrs);
    if (s != FROST_OK)
        return s;
    int64_t group = p->h_q / p->h_kv;
    double *kc = workspace;
    double *vc = kc + p->s_kv * p->d_qk;
    double *sc = vc + p->s_kv * p->d_v;
    double *q = sc + p->s_kv;
    double *acc = q + p->d_qk;
    for (int64_t b = 0; b < p->b; b++) {
        batch_geo geo;
        geometry(p, ptrs, b, &geo);
        for (int64_t hk = 0; hk < p->h_kv; hk++) {
            load_head(p, &geo, ptrs[FROST__SDPA_K], FROST__SDPA_K, hk, geo.len_kv, p->d_qk, kc);
            load_head(p, &geo, ptrs[FROST__SDPA_V], FROST__SDPA_V, hk, geo.len_kv, p->d_v, vc);
            for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
                for (int64_t i = 0; i < geo.len_q; i++)
                    fwd_row(p, ptrs, &geo, b, h, i, kc, vc, sc, q, acc);
                for (int64_t i = geo.len_q; i < geo.rows[FROST__SDPA_O]; i++)
                    store_row(p, ptrs[FROST__SDPA_O], FROST__SDPA_O, row_at(p, &geo, FROST__SDPA_O, h, i), p->d_v,
                              NULL, 0.0);
                if (p->op[FROST__SDPA_STATS].present)
                    for (int64_t i = geo.len_q; i < p->s_q; i++)
                        ((float *)ptrs[FROST__SDPA_STATS])[stats_at(p, b, h, i)] = -INFINITY;
            }
        }
    }
    return FROST_OK;
}

const frost__op_impl frost__sdpa_fwd_ref = {
    .select = ref_select,
    .workspace = fwd_workspace,
    .execute = fwd_execute,
    .coverage = "every SDPA forward option (GQA, masks, padding, ragged, bias, sink, stats) on host memory; "
                "fp64 accumulation",
};

/* ------------------------------------------------------------------------------------ */
/* Backward                                                                              */
/* ------------------------------------------------------------------------------------ */

/* d_bias as a dense fp64 array [bb, bh, s_q, s_kv]; bb / bh are 1 where the bias
 * broadcasts. */
static int64_t dbias_b(const frost__sdpa_problem *p)
{
    return p->op[FROST__SDPA_D_BIAS].stride[0] == 0 ? 1 : p->b;
}

static int64_t dbias_h(const frost__sdpa_problem *p)
{
    return p->op[FROST__SDPA_D_BIAS].stride[1] == 0 ? 1 : p->h_q;
}

static int64_t dbias_elems(const frost__sdpa_problem *p)
{
    return p->op[FROST__SDPA_D_BIAS].present ? dbias_b(p) * dbias_h(p) * p->s_q * p->s_kv : 0;
}

static size_t bwd_doubles(const frost__sdpa_problem *p)
{
    return (size_t)(2 * p->s_kv * (p->d_qk + p->d_v) + 2 * p->d_qk + 2 * p->d_v + dbias_elems(p) + p->h_q);
}

/* The backward's scratch, carved from the workspace. */
typedef struct bwd_scratch {
    double *kc, *vc;   /* one KV head: K [s_kv][d_qk], V [s_kv][d_v] */
    double *dk, *dv;   /* their gradient accumulators */
    double *q, *dq;    /* [d_qk] */
    double *d_o, *o;   /* [d_v] */
    double *dbias;     /* dbias_elems(p) */
    double *dsink;     /* [h_q] */
} bwd_scratch;

/* One query row: accumulates dQ (written here), dK, dV, d_bias and d_sink. */
static void bwd_row(const frost__sdpa_problem *p, void *const *ptrs, const batch_geo *geo, int64_t b, int64_t h,
                    int64_t i, const bwd_scratch *w)
{
    int64_t d_qk = p->d_qk, d_v = p->d_v;
    load_row(p, ptrs[FROST__SDPA_Q], FROST__SDPA_Q, row_at(p, geo, FROST__SDPA_Q, h, i), d_qk, w->q);
    load_row(p, ptrs[FROST__SDPA_D_O], FROST__SDPA_D_O, row_at(p, geo, FROST__SDPA_D_O, h, i), d_v, w->d_o);
    load_row(p, ptrs[FROST__SDPA_O], FROST__SDPA_O, row_at(p, geo, FROST__SDPA_O, h, i), d_v, w->o);
    double lse = ((const float *)ptrs[FROST__SDPA_STATS])[stats_at(p, b, h, i)];
    double delta = dot(w->d_o, w->o, d_v);
    memset(w->dq, 0, (size_t)d_qk * sizeof *w->dq);
    if (lse != -INFINITY) {
        double *dbias_row = NULL;
        if (w->dbias) {
            int64_t bb = dbias_b(p) == 1 ? 0 : b, hh = dbias_h(p) == 1 ? 0 : h;
            dbias_row = w->dbias + ((bb * dbias_h(p) + hh) * p->s_q + i) * p->s_kv;
        }
        for (int64_t j = 0; j < geo->len_kv; j++) {
            const double *k = w->kc + j * d_qk, *v = w->vc + j * d_v;
            double s = score(p, ptrs, geo, b, h, i, j, w->q, k);
            if (s == -INFINITY)
                continue;
            double prob = exp(s - lse);
            double ds = prob * (dot(w->d_o, v, d_v) - delta);
            for (int64_t d = 0; d < d_qk; d++) {
                w->dq[d] += ds * k[d];
                w->dk[j * d_qk + d] += ds * w->q[d];
            }
            for (int64_t d = 0; d < d_v; d++)
                w->dv[j * d_v + d] += prob * w->d_o[d];
            if (dbias_row)
                dbias_row[j] += ds;
        }
        if (p->op[FROST__SDPA_SINK].present)
            w->dsink[h] -= exp(sink_of(p, ptrs, h) - lse) * delta;
    }
    store_row(p, ptrs[FROST__SDPA_D_Q], FROST__SDPA_D_Q, row_at(p, geo, FROST__SDPA_D_Q, h, i), d_qk, w->dq, p->scale);
}

/* Writes dK, dV of KV head hk: the accumulated rows, then zeros for the padding. */
static void bwd_store_kv(const frost__sdpa_problem *p, void *const *ptrs, const batch_geo *geo, int64_t hk,
                         const bwd_scratch *w)
{
    for (int64_t j = 0; j < geo->rows[FROST__SDPA_D_K]; j++)
        store_row(p, ptrs[FROST__SDPA_D_K], FROST__SDPA_D_K, row_at(p, geo, FROST__SDPA_D_K, hk, j), p->d_qk,
                  j < geo->len_kv ? w->dk + j * p->d_qk : NULL, p->scale);
    for (int64_t j = 0; j < geo->rows[FROST__SDPA_D_V]; j++)
        store_row(p, ptrs[FROST__SDPA_D_V], FROST__SDPA_D_V, row_at(p, geo, FROST__SDPA_D_V, hk, j), p->d_v,
                  j < geo->len_kv ? w->dv + j * p->d_v : NULL, 1.0);
}

/* d_bias and d_sink, from their fp64 accumulators, over every element they have. */
static void bwd_store_param_grads(const frost__sdpa_problem *p, void *const *ptrs, const bwd_scratch *w)
{
    if (w->dbias) {
        const int64_t *st = p->op[FROST__SDPA_D_BIAS].stride;
        float *out = ptrs[FROST__SDPA_D_BIAS];
        const double *src = w->dbias;
        for (int64_t bb = 0; bb < dbias_b(p); bb++)
            for (int64_t hh = 0; hh < dbias_h(p); hh++)
                for (int64_t i = 0; i < p->s_q; i++)
                    for (int64_t j = 0; j < p->s_kv; j++)
                        out[bb * st[0] + hh * st[1] + i * st[2] + j * st[3]] = (float)*src++;
    }
    if (p->op[FROST__SDPA_D_SINK].present) {
        float *out = ptrs[FROST__SDPA_D_SINK];
        for (int64_t h = 0; h < p->h_q; h++)
            out[h * p->op[FROST__SDPA_D_SINK].stride[1]] = (float)w->dsink[h];
    }
}

static size_t bwd_workspace(const frost__node *n, const void *plan)
{
    (void)plan;
    return bwd_doubles(n->problem) * sizeof(double);
}

static frost_status bwd_execute(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                                void *workspace, void *stream)
{
    (void)ctx, (void)plan, (void)stream;
    const frost__sdpa_problem *p = n->problem;
    frost_status s = check_all_batches(p, ptrs);
    if (s != FROST_OK)
        return s;
    int64_t kv_qk = p->s_kv * p->d_qk, kv_v = p->s_kv * p->d_v;
    bwd_scratch w;
    w.kc = workspace;
    w.vc = w.kc + kv_qk;
    w.dk = w.vc + kv_v;
    w.dv = w.dk + kv_qk;
    w.q = w.dv + kv_v;
    w.dq = w.q + p->d_qk;
    w.d_o = w.dq + p->d_qk;
    w.o = w.d_o + p->d_v;
    w.dsink = w.o + p->d_v;
    w.dbias = p->op[FROST__SDPA_D_BIAS].present ? w.dsink + p->h_q : NULL;
    memset(w.dsink, 0, (size_t)p->h_q * sizeof(double));
    if (w.dbias)
        memset(w.dbias, 0, (size_t)dbias_elems(p) * sizeof(double));

    int64_t group = p->h_q / p->h_kv;
    for (int64_t b = 0; b < p->b; b++) {
        batch_geo geo;
        geometry(p, ptrs, b, &geo);
        for (int64_t hk = 0; hk < p->h_kv; hk++) {
            load_head(p, &geo, ptrs[FROST__SDPA_K], FROST__SDPA_K, hk, geo.len_kv, p->d_qk, w.kc);
            load_head(p, &geo, ptrs[FROST__SDPA_V], FROST__SDPA_V, hk, geo.len_kv, p->d_v, w.vc);
            memset(w.dk, 0, (size_t)(kv_qk + kv_v) * sizeof(double));
            for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
                for (int64_t i = 0; i < geo.len_q; i++)
                    bwd_row(p, ptrs, &geo, b, h, i, &w);
                for (int64_t i = geo.len_q; i < geo.rows[FROST__SDPA_D_Q]; i++)
                    store_row(p, ptrs[FROST__SDPA_D_Q], FROST__SDPA_D_Q, row_at(p, &geo, FROST__SDPA_D_Q, h, i),
                              p->d_qk, NULL, 0.0);
            }
            bwd_store_kv(p, ptrs, &geo, hk, &w);
        }
    }
    bwd_store_param_grads(p, ptrs, &w);
    return FROST_OK;
}

const frost__op_impl frost__sdpa_bwd_ref = {
    .select = ref_select,
    .workspace = bwd_workspace,
    .execute = bwd_execute,
    .coverage = "every SDPA backward option (GQA, masks, padding, ragged, bias and d_bias, sink and d_sink) on "
                "host memory; fp64 accumulation; deterministic",
};
