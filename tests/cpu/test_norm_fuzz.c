/*
 * test_norm_fuzz.c — random descriptors for every normalization op (LayerNorm, RMSNorm,
 * AdaLayerNorm, GroupNorm, InstanceNorm, BatchNorm; forward and backward) on the CPU
 * context.  Shapes (empty dims and ranks out of range included), dtypes, strides (packed,
 * permuted with gaps, arbitrary, broadcast), parameter and statistics shapes, optional
 * tensors, a tensor passed twice or a stranger's id, and the scalar options (epsilon,
 * groups, phase, momentum) are drawn at random, most combinations invalid.
 *
 * Each call must answer OK, INVALID_ARGUMENT or NOT_SUPPORTED, and any refusal must carry a
 * message.  A graph that builds runs on guarded buffers (NaN margins and gaps, outputs
 * poisoned): the run must succeed, leave every guard element as it was, and write every
 * element of every output (finite inputs, epsilon > 0: no output element may stay NaN).
 * Under the CI's sanitizer build this is also the check that no descriptor makes the
 * validation, the planning or the reference kernels read or write out of bounds or leak.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define ITERS 1500    /* graphs per op and direction */
#define MAX_TENSORS 16
#define MAX_SPAN 20000 /* elements: larger graphs are built but not run */

typedef enum op_kind { OP_LN, OP_RMS, OP_ADA, OP_GN, OP_IN, OP_BN, OP_KINDS } op_kind;
static const char *const op_names[OP_KINDS] = {"layernorm", "rmsnorm", "adalayernorm",
                                               "groupnorm", "instancenorm", "batchnorm"};

typedef struct fuzz {
    tu_rng *r;
    frost_graph *g;
    int nt;
    frost_tensor id[MAX_TENSORS];
    int output[MAX_TENSORS]; /* written by the op (checked for unwritten elements) */
    frost_tensor x;          /* the op's X, once declared */
    int aliased;             /* an output slot was given X: the op must refuse */
} fuzz;

static int pick(tu_rng *r, int n)
{
    return (int)tu_int(r, 0, n - 1);
}

static int chance(tu_rng *r, int percent)
{
    return tu_int(r, 0, 99) < percent;
}

static int64_t small_dim(tu_rng *r)
{
    static const int64_t dims[] = {1, 2, 3, 4, 5, 7, 8, 16};
    if (chance(r, 3))
        return 0;
    if (chance(r, 1))
        return chance(r, 50) ? -1 : (int64_t)1 << 40;
    return dims[pick(r, (int)(sizeof dims / sizeof dims[0]))];
}

static frost_dtype io_dtype(tu_rng *r)
{
    static const frost_dtype ok[] = {FROST_F32, FROST_F16, FROST_BF16};
    static const frost_dtype bad[] = {FROST_F64, FROST_I32, FROST_U8, FROST_FP8_E4M3, FROST_DTYPE_INVALID};
    if (chance(r, 5))
        return bad[pick(r, (int)(sizeof bad / sizeof bad[0]))];
    return ok[pick(r, 3)];
}

/* The last error after a refusal must say something. */
static void expect_refusal_message(frost_status s, const char *what)
{
    if (s != FROST_OK && s != FROST_INVALID_ARGUMENT && s != FROST_NOT_SUPPORTED)
        tu_failf("%s: status %s (%s)", what, frost_status_name(s), frost_last_error());
    else if (s != FROST_OK && !frost_last_error()[0])
        tu_failf("%s: %s without a message", what, frost_status_name(s));
}

/* Declares a tensor with random strides: packed (all zero), dims in `order` with gaps, or
 * arbitrary strides (0 included).  Returns its id, or FROST_TENSOR_NONE when frost refused
 * the description (checked to be a refusal with a message). */
static frost_tensor declare(fuzz *f, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                            const int *order, int output)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    for (int i = 0; i < rank && i < FROST_MAX_RANK; i++)
        d.dims[i] = dims[i];
    const int mode = pick(f->r, 10);
    int ok_dims = rank >= 1 && rank <= FROST_MAX_RANK;
    for (int i = 0; ok_dims && i < rank; i++)
        ok_dims = dims[i] >= 0 && dims[i] <= 64;
    if (ok_dims && mode >= 5 && mode < 9) {
        int ord[FROST_MAX_RANK];
        for (int i = 0; i < rank; i++)
            ord[i] = order ? order[i] : i;
        tu_gapped_strides(f->r, rank, d.dims, ord, 3, 1, d.strides);
    } else if (ok_dims && mode == 9) {
        for (int i = 0; i < rank; i++)
            d.strides[i] = tu_int(f->r, 0, 40);
    }
    frost_tensor t = FROST_TENSOR_NONE;
    frost_status s = frost_graph_add_tensor(f->g, &d, &t);
    expect_refusal_message(s, name);
    if (s != FROST_OK)
        return FROST_TENSOR_NONE;
    if (f->nt < MAX_TENSORS) {
        f->id[f->nt] = t;
        f->output[f->nt++] = output;
    }
    return t;
}

/* An optional input: absent, a tensor of the given dims (sometimes one dim off), another
 * rank, another dtype, or an id that names nothing. */
static frost_tensor maybe_input(fuzz *f, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                                int absent_percent)
{
    if (chance(f->r, absent_percent))
        return FROST_TENSOR_NONE;
    if (chance(f->r, 2))
        return (frost_tensor)(4000 + pick(f->r, 100));
    int64_t d[FROST_MAX_RANK + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    int r = rank;
    for (int i = 0; i < rank && i <= FROST_MAX_RANK; i++)
        d[i] = dims[i];
    if (chance(f->r, 8) && r > 0)
        d[pick(f->r, r)] += chance(f->r, 50) ? 1 : -1;
    if (chance(f->r, 5))
        r = (int)tu_int(f->r, 1, 4), d[0] = d[0] > 0 ? d[0] : 1, d[1] = d[2] = d[3] = 1;
    if (chance(f->r, 8))
        dt = io_dtype(f->r);
    return declare(f, name, dt, r, d, NULL, 0);
}

/* An output slot: none, AUTO, or declared (right dims or not, f32 or not). */
static frost_tensor maybe_output(fuzz *f, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                                 int none_percent)
{
    const int k = pick(f->r, 100);
    if (f->x != FROST_TENSOR_NONE && chance(f->r, 2)) { /* in place: never accepted */
        f->aliased = 1;
        return f->x;
    }
    if (k < none_percent)
        return FROST_TENSOR_NONE;
    if (k < none_percent + (100 - none_percent) / 2)
        return FROST_TENSOR_AUTO;
    int64_t d[FROST_MAX_RANK + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < rank && i <= FROST_MAX_RANK; i++)
        d[i] = dims[i];
    if (chance(f->r, 8) && rank > 0)
        d[pick(f->r, rank)] += 1;
    if (chance(f->r, 8))
        dt = io_dtype(f->r);
    return declare(f, name, dt, rank, d, NULL, 1);
}

static double epsilon(tu_rng *r)
{
    static const double ok[] = {0.0, 1e-5, 1e-3, 0.25};
    if (chance(r, 4))
        return chance(r, 50) ? -1e-3 : NAN;
    return ok[pick(r, 4)];
}

/* Records a tensor the op created (AUTO) as an output to bind. */
static void created(fuzz *f, frost_tensor t)
{
    if (t == FROST_TENSOR_NONE || t == FROST_TENSOR_AUTO)
        return;
    for (int i = 0; i < f->nt; i++)
        if (f->id[i] == t)
            return;
    if (f->nt < MAX_TENSORS) {
        f->id[f->nt] = t;
        f->output[f->nt++] = 1;
    }
}

/* ---- the ops ---------------------------------------------------------------------------- */

static frost_status add_row_norm(fuzz *f, op_kind op, int backward)
{
    tu_rng *r = f->r;
    int rank = (int)tu_int(r, 1, 4);
    if (chance(r, 2))
        rank = chance(r, 50) ? 0 : FROST_MAX_RANK + 1;
    int64_t dims[FROST_MAX_RANK + 1];
    for (int i = 0; i < FROST_MAX_RANK + 1; i++)
        dims[i] = small_dim(r);
    int norm_dims = chance(r, 85) ? (int)tu_int(r, 0, rank > 1 ? 2 : 1) : (int)tu_int(r, -1, rank + 1);
    const int nd = norm_dims == 0 ? 1 : norm_dims;
    int order[FROST_MAX_RANK];
    for (int i = 0; i < FROST_MAX_RANK; i++)
        order[i] = i;
    const frost_dtype dt = io_dtype(r);
    frost_tensor x = declare(f, "x", dt, rank, dims, order, 0);
    if (chance(r, 2))
        x = FROST_TENSOR_NONE;
    f->x = x;
    /* parameters: the normalized shape, rank(X) with leading ones, or (AdaLayerNorm)
     * X's outer dims kept or broadcast */
    int64_t pdims[FROST_MAX_RANK];
    int prank = nd >= 1 && nd <= rank && nd <= FROST_MAX_RANK ? nd : 1;
    for (int i = 0; i < prank; i++)
        pdims[i] = rank - prank + i >= 0 ? dims[rank - prank + i] : 1;
    if (rank >= 1 && rank <= FROST_MAX_RANK && (op == OP_ADA || chance(r, 20))) {
        prank = rank;
        for (int i = 0; i < rank; i++)
            pdims[i] = i >= rank - nd || (op == OP_ADA && chance(r, 50)) ? dims[i] : 1;
    }
    const frost_dtype pdt = chance(r, 50) ? FROST_F32 : dt;
    frost_tensor scale = maybe_input(f, "scale", pdt, prank, pdims, 30);
    int64_t sdims[FROST_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < rank && i < FROST_MAX_RANK; i++)
        sdims[i] = i >= rank - nd ? 1 : dims[i];
    const int srank = rank >= 1 && rank <= FROST_MAX_RANK ? rank : 1;
    if (!backward) {
        frost_norm_desc d = {.x = x,
                             .scale = scale,
                             .bias = maybe_input(f, "bias", pdt, prank, pdims, 40),
                             .epsilon = epsilon(r),
                             .norm_dims = norm_dims,
                             .phase = (frost_norm_phase)(chance(r, 3) ? 2 : pick(r, 2)),
                             .zero_centered_scale = chance(r, 30)};
        if (chance(r, 5))
            d.bias = d.scale;
        frost_norm_outputs out = {.y = maybe_output(f, "y", dt, srank, dims, 5),
                                  .mean = maybe_output(f, "mean", FROST_F32, srank, sdims, 40),
                                  .inv_std = maybe_output(f, "inv_std", FROST_F32, srank, sdims, 40)};
        const frost_status s = op == OP_LN    ? frost_graph_add_layernorm(f->g, &d, &out)
                               : op == OP_RMS ? frost_graph_add_rmsnorm(f->g, &d, &out)
                                              : frost_graph_add_adalayernorm(f->g, &d, &out);
        if (s == FROST_OK)
            created(f, out.y), created(f, out.mean), created(f, out.inv_std);
        return s;
    }
    frost_norm_backward_desc d = {.x = x,
                                  .d_y = chance(r, 3) ? x : maybe_input(f, "d_y", dt, rank, dims, 2),
                                  .scale = scale,
                                  .mean = op != OP_RMS || chance(r, 5) ? maybe_input(f, "mean", FROST_F32, srank, sdims, 40)
                                                                        : FROST_TENSOR_NONE,
                                  .inv_std = maybe_input(f, "inv_std", FROST_F32, srank, sdims, 40),
                                  .epsilon = epsilon(r),
                                  .norm_dims = norm_dims,
                                  .has_bias = chance(r, 50),
                                  .zero_centered_scale = chance(r, 30),
                                  .deterministic = chance(r, 50)};
    frost_norm_grads out = {.d_x = maybe_output(f, "d_x", dt, srank, dims, 5),
                            .d_scale = maybe_output(f, "d_scale", FROST_F32, prank, pdims, 40),
                            .d_bias = maybe_output(f, "d_bias", FROST_F32, prank, pdims, 40)};
    const frost_status s = op == OP_LN    ? frost_graph_add_layernorm_backward(f->g, &d, &out)
                           : op == OP_RMS ? frost_graph_add_rmsnorm_backward(f->g, &d, &out)
                                          : frost_graph_add_adalayernorm_backward(f->g, &d, &out);
    if (s == FROST_OK)
        created(f, out.d_x), created(f, out.d_scale), created(f, out.d_bias);
    return s;
}

static frost_status add_chan_norm(fuzz *f, op_kind op, int backward)
{
    tu_rng *r = f->r;
    int rank = (int)tu_int(r, 2, 5);
    if (chance(r, 2))
        rank = chance(r, 50) ? 1 : FROST_MAX_RANK + 1;
    int64_t dims[FROST_MAX_RANK + 1];
    for (int i = 0; i < FROST_MAX_RANK + 1; i++)
        dims[i] = small_dim(r);
    if (rank >= 2 && chance(r, 50))
        dims[1] = 4 * (int64_t)tu_int(r, 1, 4); /* channels with divisors */
    const int64_t c = rank >= 2 ? dims[1] : 1;
    /* NCHW, NHWC (channels innermost) or another order */
    int order[FROST_MAX_RANK];
    const int layout = pick(r, 3);
    for (int i = 0; i < FROST_MAX_RANK; i++)
        order[i] = i;
    if (rank >= 3 && rank <= FROST_MAX_RANK && layout == 1) {
        for (int i = 1; i < rank - 1; i++)
            order[i] = i + 1;
        order[rank - 1] = 1;
    } else if (rank >= 3 && rank <= FROST_MAX_RANK && layout == 2) {
        for (int i = rank - 1; i > 0; i--) {
            const int j = pick(r, i + 1), t = order[i];
            order[i] = order[j], order[j] = t;
        }
    }
    const frost_dtype dt = io_dtype(r);
    const frost_tensor x = f->x = declare(f, "x", dt, rank, dims, order, 0);
    int groups = (int)(chance(r, 70) ? tu_int(r, 1, 4) : tu_int(r, -1, c + 1));
    if (op == OP_GN && chance(r, 60) && c > 0)
        groups = c % 4 == 0 ? 4 : 1;
    const int64_t g = groups > 0 ? groups : 1;
    /* per-channel parameters: [C] or [1, C, 1, ...] */
    int64_t pdims[FROST_MAX_RANK] = {c};
    int prank = 1;
    if (chance(r, 30) && rank >= 2 && rank <= FROST_MAX_RANK) {
        prank = rank;
        for (int i = 0; i < rank; i++)
            pdims[i] = i == 1 ? c : 1;
    }
    const frost_dtype pdt = chance(r, 50) ? FROST_F32 : dt;
    const frost_tensor scale = maybe_input(f, "scale", pdt, prank, pdims, 30);
    /* statistics: GroupNorm [N, G], InstanceNorm [N, C], BatchNorm [C] */
    int64_t sdims[2] = {dims[0], op == OP_GN ? g : c};
    int srank = 2;
    if (op == OP_BN)
        sdims[0] = c, srank = 1;
    if (!backward) {
        frost_channel_norm_desc d = {.x = x,
                                     .scale = scale,
                                     .bias = maybe_input(f, "bias", pdt, prank, pdims, 40),
                                     .epsilon = epsilon(r),
                                     .num_groups = groups,
                                     .phase = (frost_norm_phase)(chance(r, 3) ? 2 : pick(r, 2)),
                                     .zero_centered_scale = chance(r, 30),
                                     .momentum = chance(r, 80) ? (chance(r, 50) ? 0.0 : 0.3)
                                                               : (chance(r, 50) ? -0.5 : 1.5)};
        const int64_t rdims[1] = {c};
        if (op == OP_BN || chance(r, 5)) {
            d.running_mean = maybe_input(f, "running_mean", FROST_F32, 1, rdims, 30);
            d.running_var = chance(r, 10) ? d.running_mean : maybe_input(f, "running_var", FROST_F32, 1, rdims, 30);
        }
        const int rank_y = rank >= 1 && rank <= FROST_MAX_RANK ? rank : 2;
        frost_norm_outputs out = {.y = maybe_output(f, "y", dt, rank_y, dims, 5),
                                  .mean = maybe_output(f, "mean", FROST_F32, srank, sdims, 40),
                                  .inv_std = maybe_output(f, "inv_std", FROST_F32, srank, sdims, 40)};
        const frost_status s = op == OP_GN   ? frost_graph_add_groupnorm(f->g, &d, &out)
                               : op == OP_IN ? frost_graph_add_instancenorm(f->g, &d, &out)
                                             : frost_graph_add_batchnorm(f->g, &d, &out);
        if (s == FROST_OK)
            created(f, out.y), created(f, out.mean), created(f, out.inv_std);
        return s;
    }
    frost_channel_norm_backward_desc d = {.x = x,
                                          .d_y = chance(r, 3) ? x : maybe_input(f, "d_y", dt, rank, dims, 2),
                                          .scale = scale,
                                          .mean = maybe_input(f, "mean", FROST_F32, srank, sdims, 40),
                                          .inv_std = maybe_input(f, "inv_std", FROST_F32, srank, sdims, 40),
                                          .epsilon = epsilon(r),
                                          .num_groups = groups,
                                          .has_bias = chance(r, 50),
                                          .zero_centered_scale = chance(r, 30),
                                          .deterministic = chance(r, 50)};
    const int rank_dx = rank >= 1 && rank <= FROST_MAX_RANK ? rank : 2;
    frost_norm_grads out = {.d_x = maybe_output(f, "d_x", dt, rank_dx, dims, 5),
                            .d_scale = maybe_output(f, "d_scale", FROST_F32, prank, pdims, 40),
                            .d_bias = maybe_output(f, "d_bias", FROST_F32, prank, pdims, 40)};
    const frost_status s = op == OP_GN   ? frost_graph_add_groupnorm_backward(f->g, &d, &out)
                           : op == OP_IN ? frost_graph_add_instancenorm_backward(f->g, &d, &out)
                                         : frost_graph_add_batchnorm_backward(f->g, &d, &out);
    if (s == FROST_OK)
        created(f, out.d_x), created(f, out.d_scale), created(f, out.d_bias);
    return s;
}

/* ---- running a graph that built --------------------------------------------------------- */

/* The explain report: a sizing call, a short buffer (truncated, terminated, nothing written
 * past its cap) and the whole report, of the same length. */
static void check_explain(const frost_graph *g, tu_rng *r, const char *what)
{
    size_t len = 0, again = 0;
    char part[17];
    frost_status s = frost_graph_explain(g, NULL, 0, &len);
    if (s != FROST_OK || len == 0) {
        tu_failf("%s: explain (sizing) returned %s, length %zu", what, frost_status_name(s), len);
        return;
    }
    const size_t cap = (size_t)tu_int(r, 1, 16);
    memset(part, '#', sizeof part);
    s = frost_graph_explain(g, part, cap, NULL);
    if (s != FROST_OK || strlen(part) != (len < cap - 1 ? len : cap - 1) || part[cap] != '#' || part[16] != '#')
        tu_failf("%s: explain into %zu bytes: %s, not the report's first bytes, terminated", what, cap,
                 frost_status_name(s));
    char *full = malloc(len + 1);
    if (!full)
        return;
    s = frost_graph_explain(g, full, len + 1, &again);
    if (s != FROST_OK || again != len || strlen(full) != len)
        tu_failf("%s: explain returned %s, %zu bytes (sized %zu)", what, frost_status_name(s), strlen(full), len);
    free(full);
}

/* Runs the built graph on guarded buffers; returns 1 when it ran. */
static int run(fuzz *f, const char *what)
{
    tu_buf buf[MAX_TENSORS];
    frost_binding bind[MAX_TENSORS];
    const char *names[MAX_TENSORS];
    int nb = 0, ran = 0;
    size_t wsb = 0;
    void *ws = NULL;
    TU_OK(frost_graph_workspace_size(f->g, &wsb));
    for (int i = 0; i < f->nt; i++) {
        frost_tensor_desc d;
        TU_OK(frost_graph_tensor_desc(f->g, f->id[i], &d));
        if (tu_span(d.rank, d.dims, d.strides) > MAX_SPAN)
            goto out;
    }
    if (wsb > ((size_t)64 << 20))
        return 0;
    ws = wsb ? malloc(wsb) : NULL;
    for (int i = 0; i < f->nt; i++) {
        frost_tensor_desc d;
        TU_OK(frost_graph_tensor_desc(f->g, f->id[i], &d));
        if (!tu_buf_alloc(&buf[nb], d.dtype, d.rank, d.dims, d.strides, 0)) {
            tu_failf("%s: no buffer for %s", what, d.name);
            goto out;
        }
        names[nb] = d.name;
        if (!f->output[i]) /* running statistics positive: inference may take one tensor for both */
            tu_buf_fill_uniform(&buf[nb], f->r, strncmp(d.name, "running_", 8) ? -2.0 : 0.05, 2.0);
        bind[nb] = (frost_binding){f->id[i], buf[nb].data};
        nb++;
    }
    frost_status s = frost_graph_execute(f->g, bind, nb, ws, NULL);
    if (s != FROST_OK) {
        tu_failf("%s: execute returned %s (%s)", what, frost_status_name(s), frost_last_error());
        goto out;
    }
    ran = 1;
    for (int i = 0; i < nb; i++) {
        if (tu_guard_check(&buf[i], names[i]) != 0)
            tu_failf("%s: tensor %s: elements outside the tensor were written", what, names[i]);
        const int64_t n = f->output[i] ? tu_buf_count_nan(&buf[i]) : 0;
        if (n)
            tu_failf("%s: output %s: %lld elements left NaN", what, names[i], (long long)n);
    }
    if (getenv("FROST_TEST_VERBOSE")) /* the graph's tensors, to read a failure */
        for (int i = 0; i < nb; i++) {
            fprintf(stderr, "  %s %s %s [", f->output[i] ? "out" : "in ", names[i], frost_dtype_name(buf[i].dtype));
            for (int k = 0; k < buf[i].rank; k++)
                fprintf(stderr, "%s%lld/%lld", k ? ", " : "", (long long)buf[i].dims[k], (long long)buf[i].strides[k]);
            fprintf(stderr, "] (dim/stride)\n");
        }
out:
    for (int i = 0; i < nb; i++)
        tu_buf_free(&buf[i]);
    free(ws);
    return ran;
}

int main(void)
{
    const uint64_t seed = tu_seed(0x6e6f726d66757aULL);
    const int only = tu_case_filter();
    frost_context *ctx = NULL;
    TU_OK(frost_context_create(NULL, &ctx));
    int cases = 0, built = 0, ran = 0, ran_op[OP_KINDS][2] = {{0}};
    for (int op = 0; op < OP_KINDS && ctx; op++)
        for (int backward = 0; backward < 2; backward++)
            for (int it = 0; it < ITERS; it++) {
                const int index = (op * 2 + backward) * ITERS + it;
                if (only >= 0 && index != only)
                    continue;
                char what[96];
                snprintf(what, sizeof what, "%s %s, graph %d", op_names[op], backward ? "backward" : "forward", it);
                tu_rng r = tu_rng_make(seed + (uint64_t)index * 0x9e3779b97f4a7c15ULL);
                tu_set_context("test_norm_fuzz", seed, index, what);
                tu_case_begin();
                fuzz f = {.r = &r};
                TU_OK(frost_graph_create(ctx, &f.g));
                frost_status s = op <= OP_ADA ? add_row_norm(&f, (op_kind)op, backward)
                                              : add_chan_norm(&f, (op_kind)op, backward);
                expect_refusal_message(s, what);
                if (s == FROST_OK && f.aliased)
                    tu_failf("%s: accepted X as one of its outputs", what);
                if (s == FROST_OK) {
                    /* build options: the default, every candidate, an engine this context
                     * lacks, an engine that does not exist */
                    const int k = pick(&r, 20);
                    const frost_build_options opt = {.policy = k == 0 ? FROST_BUILD_ALL : FROST_BUILD_HEURISTIC,
                                                     .engine = k == 1 ? "cuda" : k == 2 ? "nope" : NULL};
                    check_explain(f.g, &r, what);
                    s = frost_graph_build(f.g, &opt);
                    expect_refusal_message(s, what);
                    if (s == FROST_OK && opt.engine)
                        tu_failf("%s: built with engine \"%s\" on a CPU context", what, opt.engine);
                    if (s == FROST_OK)
                        check_explain(f.g, &r, what);
                    if (s == FROST_OK) {
                        const int done = run(&f, what);
                        built++, ran += done, ran_op[op][backward] += done;
                    }
                }
                frost_graph_destroy(f.g);
                tu_case_end();
                cases++;
            }
    frost_context_destroy(ctx);
    printf("test_norm_fuzz: %d graphs, %d built, %d ran (forward / backward:", cases, built, ran);
    for (int op = 0; op < OP_KINDS; op++)
        printf(" %s %d / %d", op_names[op], ran_op[op][0], ran_op[op][1]);
    printf(")\n");
    /* the draws must reach every op's reference kernels, not only the validation */
    for (int op = 0; op < OP_KINDS && only < 0; op++)
        for (int backward = 0; backward < 2; backward++)
            if (ran_op[op][backward] < ITERS / 20)
                tu_failf("%s %s: only %d of %d graphs ran: the draws are too often invalid", op_names[op],
                         backward ? "backward" : "forward", ran_op[op][backward], ITERS);
    return tu_finish(cases);
}
