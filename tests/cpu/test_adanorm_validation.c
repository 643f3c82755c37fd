/*
 * test_adanorm_validation.c — the add functions of AdaLayerNorm: every refusal with its
 * status and a message that names the tensor, the dim, the expected and the given value;
 * the accepted shapes (every pattern of carried outer dims, norm_dims 2, a d_bias with its
 * own pattern) and the dims of created gradients; explain's words on per-sample
 * parameters; and, on the reference engine, that AdaLayerNorm with shared [1, 1, C]
 * parameters gives exactly LayerNorm's bits, forward and backward.
 */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define F32 FROST_F32
#define F16 FROST_F16

static frost_context *cpu;

static frost_tensor add(frost_graph *g, const char *name, frost_dtype dt, int rank, const int64_t *dims,
                        const int64_t *strides)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    frost_tensor id = 0;
    for (int i = 0; i < rank; ++i) {
        d.dims[i] = dims[i];
        d.strides[i] = strides ? strides[i] : 0;
    }
    TU_OK(frost_graph_add_tensor(g, &d, &id));
    return id;
}

/* ---- AdaLayerNorm with shared parameters is LayerNorm, bit for bit ---- */
static void same_as_layernorm(uint64_t seed)
{
    tu_set_context("test_adanorm_ref", seed, -1, "shared [1,1,C] parameters give LayerNorm's bits");
    tu_rng rng = tu_rng_make(seed ^ 0xada);
    const int64_t xd[] = {3, 5, 24}, pd[] = {1, 1, 24}, sd[] = {3, 5, 1};
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(cpu, &g));
    frost_tensor x = add(g, "x", F32, 3, xd, NULL), dy = add(g, "d_y", F32, 3, xd, NULL);
    frost_tensor w = add(g, "w", F32, 3, pd, NULL), b = add(g, "b", F32, 3, pd, NULL);
    frost_tensor ids[2][6]; /* y, mean, inv_std, d_x, d_scale, d_bias of LayerNorm, AdaLayerNorm */
    for (int ada = 0; ada < 2; ++ada) {
        frost_norm_desc fd = {.x = x, .scale = w, .bias = b, .zero_centered_scale = 1};
        frost_norm_outputs fo = {.y = FROST_TENSOR_AUTO, .mean = FROST_TENSOR_AUTO, .inv_std = FROST_TENSOR_AUTO};
        TU_OK(ada ? frost_graph_add_adalayernorm(g, &fd, &fo) : frost_graph_add_layernorm(g, &fd, &fo));
        frost_norm_backward_desc bd = {.x = x, .d_y = dy, .scale = w, .has_bias = 1, .zero_centered_scale = 1};
        frost_norm_grads bo = {.d_scale = FROST_TENSOR_AUTO, .d_bias = FROST_TENSOR_AUTO};
        TU_OK(ada ? frost_graph_add_adalayernorm_backward(g, &bd, &bo)
                  : frost_graph_add_layernorm_backward(g, &bd, &bo));
        frost_tensor v[6] = {fo.y, fo.mean, fo.inv_std, bo.d_x, bo.d_scale, bo.d_bias};
        memcpy(ids[ada], v, sizeof v);
    }
    TU_OK(frost_graph_build(g, NULL));
    size_t ws_bytes = 0;
    TU_OK(frost_graph_workspace_size(g, &ws_bytes));
    void *ws = malloc(ws_bytes + 8);
    tu_buf in[4], out[2][6];
    const int64_t *in_dims[4] = {xd, xd, pd, pd};
    frost_binding bind[16];
    int nb = 0;
    frost_tensor in_ids[4] = {x, dy, w, b};
    for (int i = 0; i < 4; ++i) {
        int64_t st[3];
        tu_packed_strides(3, in_dims[i], st);
        TU_CHECK(tu_buf_alloc(&in[i], F32, 3, in_dims[i], st, 0));
        tu_buf_fill_uniform(&in[i], &rng, -1.5, 1.5);
        bind[nb++] = (frost_binding){in_ids[i], in[i].data};
    }
    for (int ada = 0; ada < 2; ++ada)
        for (int k = 0; k < 6; ++k) {
            const int64_t *dims = k == 1 || k == 2 ? sd : k >= 4 ? pd : xd;
            int64_t st[3];
            tu_packed_strides(3, dims, st);
            TU_CHECK(tu_buf_alloc(&out[ada][k], F32, 3, dims, st, 0));
            bind[nb++] = (frost_binding){ids[ada][k], out[ada][k].data};
        }
    TU_OK(frost_graph_execute(g, bind, nb, ws, NULL));
    for (int k = 0; k < 6; ++k)
        if (memcmp(out[0][k].data, out[1][k].data, (size_t)out[0][k].span * sizeof(float)) != 0)
            tu_failf("output %d of AdaLayerNorm with [1,1,C] parameters differs from LayerNorm's", k);
    for (int i = 0; i < 4; ++i)
        tu_buf_free(&in[i]);
    for (int ada = 0; ada < 2; ++ada)
        for (int k = 0; k < 6; ++k)
            tu_buf_free(&out[ada][k]);
    free(ws);
    frost_graph_destroy(g);
}

/* ---- the validation walk: each refusal, its status, and a message naming the culprit ---- */
static void expect_fail(frost_status got, frost_status want, const char *needle, const char *expr, int line)
{
    if (got != want)
        tu_failf("line %d: %s returned %s, expected %s (%s)", line, expr, frost_status_name(got),
                 frost_status_name(want), frost_last_error());
    else if (needle && !strstr(frost_last_error(), needle))
        tu_failf("line %d: %s: the message \"%s\" does not contain '%s'", line, expr, frost_last_error(), needle);
}
#define EXPECT(call, status, needle) expect_fail((call), (status), (needle), #call, __LINE__)
#define INVALID FROST_INVALID_ARGUMENT

typedef frost_norm_desc FD;
typedef frost_norm_outputs FO;
typedef frost_norm_backward_desc BD;
typedef frost_norm_grads BG;

static frost_status fwd(frost_graph *g, FD d, FO o)
{
    return frost_graph_add_adalayernorm(g, &d, &o);
}

static frost_status bwd(frost_graph *g, BD d, BG o)
{
    return frost_graph_add_adalayernorm_backward(g, &d, &o);
}

static void validation_walk(void)
{
    tu_set_context("test_adanorm_ref", 0, -1, "validation walk");
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(cpu, &g));
    const int64_t d3[] = {4, 6, 8}, bs[] = {4, 1, 8}, sh[] = {1, 1, 8}, ps[] = {1, 6, 8}, c1[] = {8};
    const int64_t bad0[] = {3, 1, 8}, bad1[] = {4, 2, 8}, badc[] = {4, 1, 7}, r2[] = {4, 8}, bc[] = {0, 8, 1};
    frost_tensor x = add(g, "ax", F32, 3, d3, NULL), dy = add(g, "ady", F32, 3, d3, NULL);
    frost_tensor w = add(g, "aw_b1c", F32, 3, bs, NULL), wsh = add(g, "aw_11c", F32, 3, sh, NULL);
    frost_tensor wps = add(g, "aw_1sc", F32, 3, ps, NULL), wrow = add(g, "aw_bsc", F32, 3, d3, NULL);
    frost_tensor wc = add(g, "aw_c", F32, 1, c1, NULL), wr2 = add(g, "aw_rank2", F32, 2, r2, NULL);
    frost_tensor wb0 = add(g, "aw_bad_b", F32, 3, bad0, NULL), wb1 = add(g, "aw_bad_s", F32, 3, bad1, NULL);
    frost_tensor wbc = add(g, "aw_bad_c", F32, 3, badc, NULL), wh = add(g, "aw_f16", F16, 3, bs, NULL);
    frost_tensor ds_sh = add(g, "ads_11c", F32, 3, sh, NULL), ds_h = add(g, "ads_f16", F16, 3, bs, NULL);
    frost_tensor ds_bc = add(g, "ads_bcast", F32, 3, bs, bc), db_b1c = add(g, "adb_b1c", F32, 3, bs, NULL);
    const frost_tensor A = FROST_TENSOR_AUTO;

    /* forward: the AdaLayerNorm parameter rule */
    EXPECT(frost_graph_add_adalayernorm(NULL, &(FD){.x = x}, &(FO){0}), INVALID, "graph");
    EXPECT(frost_graph_add_adalayernorm(g, NULL, &(FO){0}), INVALID, "descriptor");
    EXPECT(frost_graph_add_adalayernorm(g, &(FD){.x = x}, NULL), INVALID, "output");
    EXPECT(fwd(g, (FD){.scale = w}, (FO){0}), INVALID, "x is required");
    EXPECT(fwd(g, (FD){.x = x, .scale = wc}, (FO){0}), INVALID, "scale 'aw_c': rank expected 3");
    EXPECT(fwd(g, (FD){.x = x, .bias = wr2}, (FO){0}), INVALID, "bias 'aw_rank2': rank expected 3");
    EXPECT(fwd(g, (FD){.x = x, .scale = wb0}, (FO){0}), INVALID, "'aw_bad_b': dim 0 expected 1 (shared) or 4");
    EXPECT(fwd(g, (FD){.x = x, .bias = wb1}, (FO){0}), INVALID, "'aw_bad_s': dim 1 expected 1 (shared) or 6");
    EXPECT(fwd(g, (FD){.x = x, .scale = wbc}, (FO){0}), INVALID, "'aw_bad_c': dim 2 expected 8");
    EXPECT(fwd(g, (FD){.x = x, .scale = wh}, (FO){0}), INVALID, "aw_f16");
    EXPECT(fwd(g, (FD){.x = x, .scale = w, .norm_dims = 2}, (FO){0}), INVALID, "dim 1 expected 6");
    EXPECT(fwd(g, (FD){.x = x, .scale = w}, (FO){.y = w}), INVALID, "aw_b1c");
    EXPECT(fwd(g, (FD){.x = x, .epsilon = -1}, (FO){0}), INVALID, "epsilon");
    /* LayerNorm keeps its own rule: no per-sample parameters */
    EXPECT(frost_graph_add_layernorm(g, &(FD){.x = x, .scale = w}, &(FO){0}), INVALID, "dim 0 expected 1");
    /* backward */
    EXPECT(bwd(g, (BD){.x = x, .d_y = dy, .scale = wb0}, (BG){0}), INVALID, "aw_bad_b");
    EXPECT(bwd(g, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_scale = ds_sh}), INVALID,
           "d_scale 'ads_11c': dim 0 expected 4");
    EXPECT(bwd(g, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_scale = ds_h}), INVALID, "ads_f16");
    EXPECT(bwd(g, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_scale = ds_bc}), INVALID, "twice");
    EXPECT(bwd(g, (BD){.x = x, .d_y = dy, .has_bias = 1}, (BG){.d_bias = A}), INVALID, "no scale to take its dims");
    EXPECT(bwd(g, (BD){.x = x, .d_y = dy, .has_bias = 1}, (BG){.d_bias = wb1}), INVALID, "aw_bad_s");
    EXPECT(bwd(g, (BD){.x = x, .d_y = dy, .has_bias = 1}, (BG){.d_bias = wc}), INVALID, "rank expected 3");
    EXPECT(bwd(g, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_bias = A}), INVALID, "has_bias");
    EXPECT(bwd(g, (BD){.x = x, .d_y = dy}, (BG){.d_scale = A}), INVALID, "no scale");

    /* accepted: every carry pattern, norm_dims 2, d_bias declared with its own pattern */
    FO o = {.mean = A, .inv_std = A};
    TU_OK(fwd(g, (FD){.x = x, .scale = w, .bias = wsh}, o));
    TU_OK(fwd(g, (FD){.x = x, .scale = wps, .bias = wrow}, (FO){0}));
    TU_OK(fwd(g, (FD){.x = x, .scale = wrow, .norm_dims = 2}, (FO){0}));
    BG bo = {.d_scale = A, .d_bias = A};
    TU_OK(frost_graph_add_adalayernorm_backward(g, &(BD){.x = x, .d_y = dy, .scale = w, .has_bias = 1}, &bo));
    frost_tensor_desc td;
    TU_OK(frost_graph_tensor_desc(g, bo.d_scale, &td)); /* f32, scale's dims, packed */
    TU_CHECK(td.dtype == F32 && td.rank == 3 && td.dims[0] == 4 && td.dims[1] == 1 && td.dims[2] == 8);
    TU_CHECK(td.strides[0] == 8 && td.strides[2] == 1);
    TU_OK(frost_graph_tensor_desc(g, bo.d_bias, &td)); /* AUTO d_bias: scale's dims */
    TU_CHECK(td.dtype == F32 && td.rank == 3 && td.dims[0] == 4 && td.dims[1] == 1);
    bo = (BG){.d_bias = db_b1c};
    TU_OK(bwd(g, (BD){.x = x, .d_y = dy, .scale = wsh, .has_bias = 1}, bo));
    char report[8192];
    TU_OK(frost_graph_build(g, NULL));
    TU_OK(frost_graph_explain(g, report, sizeof report, NULL));
    if (!strstr(report, "adalayernorm_bwd") || !strstr(report, "per-sample scale[4,1,*] bias[1,1,*]") ||
        !strstr(report, "per-sample scale[1,1,*] d_bias[4,1,*]"))
        tu_failf("explain does not describe the per-sample parameters:\n%s", report);
    EXPECT(fwd(g, (FD){.x = x}, (FO){0}), FROST_BAD_STATE, "frost_graph_add_adalayernorm");
    frost_graph_destroy(g);

    /* the op table names both ops */
    int named = 0;
    for (int i = 0; i < frost_op_count(); ++i)
        named += !strcmp(frost_op_name(i), "adalayernorm_fwd") + !strcmp(frost_op_name(i), "adalayernorm_bwd");
    TU_CHECK(named == 2);
}

int main(void)
{
    const uint64_t seed = tu_seed(20261204);
    TU_OK(frost_context_create(NULL, &cpu));
    if (!cpu)
        return tu_finish(0);
    tu_case_begin();
    validation_walk();
    tu_case_end();
    tu_case_begin();
    same_as_layernorm(seed);
    tu_case_end();
    frost_context_destroy(cpu);
    return tu_finish(2);
}
