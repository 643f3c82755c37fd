/*
 * test_api.c — the graph API's own contract, independent of any op's math: statuses and
 * their names, the thread-local error, logging, contexts, tensors, the lifecycle
 * (create -> add -> build -> workspace -> execute) and every binding check of execute.
 * Each bad call must return the right status and a message naming what was wrong.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static int log_calls;
static void on_log(frost_log_level level, const char *msg, void *user)
{
    (void)level, (void)msg;
    (*(int *)user)++;
}

static void expect_msg(const char *needle)
{
    if (!strstr(frost_last_error(), needle))
        tu_failf("frost_last_error() = \"%s\" does not mention \"%s\"", frost_last_error(), needle);
}

static frost_tensor add(frost_graph *g, const char *name, frost_dtype dt, int rank, const int64_t *dims)
{
    frost_tensor_desc d = {.name = name, .dtype = dt, .rank = rank};
    memcpy(d.dims, dims, sizeof(int64_t) * (size_t)rank);
    frost_tensor t = 0;
    TU_OK(frost_graph_add_tensor(g, &d, &t));
    return t;
}

static void test_status_and_version(void)
{
    TU_CHECK(strcmp(frost_status_name(FROST_OK), "OK") == 0);
    TU_CHECK(strcmp(frost_status_name(FROST_NOT_SUPPORTED), "NOT_SUPPORTED") == 0);
    TU_CHECK(strcmp(frost_status_name(FROST_CORRUPT_DATA), "CORRUPT_DATA") == 0);
    TU_CHECK(strcmp(frost_status_name((frost_status)999), "UNKNOWN_STATUS") == 0);
    TU_CHECK(frost_version_number() == FROST_VERSION_NUMBER);
    TU_CHECK(strlen(frost_version()) >= 5);
    TU_CHECK(frost_dtype_size(FROST_BF16) == 2 && frost_dtype_size(FROST_F64) == 8 && frost_dtype_size(FROST_U8) == 1);
    TU_CHECK(frost_dtype_size((frost_dtype)77) == 0);
    TU_CHECK(strcmp(frost_dtype_name(FROST_BF16), "bf16") == 0);
    TU_CHECK(frost_engine_count() == 2 && frost_engine_name(5) == NULL && frost_op_name(-1) == NULL);
}

static void test_context(void)
{
    frost_context *ctx = (frost_context *)1;
    TU_CHECK_STATUS(frost_context_create(NULL, NULL), FROST_INVALID_ARGUMENT);
    frost_context_options bad = {.kind = (frost_device_kind)7};
    TU_CHECK_STATUS(frost_context_create(&bad, &ctx), FROST_INVALID_ARGUMENT);
    expect_msg("kind");
    TU_CHECK(ctx == NULL);
    frost_context_options neg = {.kind = FROST_DEVICE_CUDA, .device_index = -1};
    TU_CHECK_STATUS(frost_context_create(&neg, &ctx), FROST_INVALID_ARGUMENT);
    expect_msg("device_index");
    /* A CUDA context either works or says what is missing. */
    frost_context_options cu = {.kind = FROST_DEVICE_CUDA};
    frost_status s = frost_context_create(&cu, &ctx);
    if (s == FROST_OK)
        frost_context_destroy(ctx);
    else {
        TU_CHECK(s == FROST_NO_DEVICE);
        TU_CHECK(strlen(frost_last_error()) > 10);
    }
    frost_context_destroy(NULL);
    frost_graph_destroy(NULL);
}

static void test_logging(frost_context *ctx)
{
    frost_set_log_callback(on_log, &log_calls);
    frost_set_log_level(FROST_LOG_WARN);
    frost_graph *g = NULL;
    TU_CHECK_STATUS(frost_graph_create(ctx, NULL), FROST_INVALID_ARGUMENT);
    TU_CHECK(log_calls > 0);
    frost_set_log_level(FROST_LOG_OFF);
    int before = log_calls;
    TU_CHECK_STATUS(frost_graph_create(NULL, &g), FROST_INVALID_ARGUMENT);
    TU_CHECK(log_calls == before);
    frost_set_log_callback(NULL, NULL);
}

static void test_tensors(frost_context *ctx)
{
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(ctx, &g));
    frost_tensor t = 0;
    frost_tensor_desc d = {.name = "x", .dtype = FROST_F32, .rank = 0};
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &d, &t), FROST_INVALID_ARGUMENT);
    expect_msg("'x'");
    expect_msg("rank");
    d.rank = 9;
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &d, &t), FROST_INVALID_ARGUMENT);
    d.rank = 2, d.dims[0] = 3, d.dims[1] = -1;
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &d, &t), FROST_INVALID_ARGUMENT);
    expect_msg("dim 1");
    d.dims[1] = 4, d.strides[0] = -4, d.strides[1] = 1;
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &d, &t), FROST_INVALID_ARGUMENT);
    expect_msg("stride 0");
    d.strides[0] = 0, d.strides[1] = 0, d.dtype = (frost_dtype)42;
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &d, &t), FROST_INVALID_ARGUMENT);
    expect_msg("dtype");
    d.dtype = FROST_F32, d.ragged_offset = 99;
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &d, &t), FROST_INVALID_ARGUMENT);
    expect_msg("ragged_offset");
    d.ragged_offset = 0;
    /* sizes past int64: packed strides, the element count (broadcast strides), the span's
     * bytes; at the limit itself a tensor is fine, and an empty one too */
    frost_tensor_desc big = {.name = "big", .dtype = FROST_F32, .rank = 3, .dims = {1 << 20, 1 << 22, 1 << 22}};
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &big, &t), FROST_INVALID_ARGUMENT);
    expect_msg("'big'");
    expect_msg("[1048576,4194304,4194304]");
    expect_msg("INT64_MAX");
    big.dims[0] = 0, big.dims[1] = big.dims[2] = (int64_t)1 << 40; /* empty, but its packed strides pass int64 */
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &big, &t), FROST_INVALID_ARGUMENT);
    big.dims[1] = 0; /* empty, strides that fit */
    TU_OK(frost_graph_add_tensor(g, &big, &t));
    big.dims[0] = 1 << 20, big.dims[1] = big.dims[2] = 1 << 22, big.strides[2] = 1; /* broadcast: one row */
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &big, &t), FROST_INVALID_ARGUMENT);
    expect_msg("with its strides");
    big.rank = 1, big.dims[0] = INT64_MAX / 4, big.strides[0] = 1;
    TU_OK(frost_graph_add_tensor(g, &big, &t));
    big.dims[0] = INT64_MAX / 4 + 2;
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &big, &t), FROST_INVALID_ARGUMENT);
    big.rank = 2, big.dims[0] = 2, big.dims[1] = INT64_MAX / 2, big.strides[0] = 0, big.strides[1] = 0;
    big.dtype = FROST_U8;
    TU_OK(frost_graph_add_tensor(g, &big, &t));
    TU_CHECK_STATUS(frost_graph_add_tensor(g, NULL, &t), FROST_INVALID_ARGUMENT);
    TU_OK(frost_graph_add_tensor(g, &d, &t));
    frost_tensor_desc back;
    TU_OK(frost_graph_tensor_desc(g, t, &back));
    TU_CHECK(back.rank == 2 && back.dims[1] == 4 && back.strides[0] == 4 && back.strides[1] == 1);
    TU_CHECK(strcmp(back.name, "x") == 0);
    TU_CHECK_STATUS(frost_graph_tensor_desc(g, 1234, &back), FROST_INVALID_ARGUMENT);
    /* a float tensor cannot carry ragged offsets */
    frost_tensor_desc r = {.name = "r", .dtype = FROST_F32, .rank = 1, .dims = {3}};
    frost_tensor rt = 0;
    TU_OK(frost_graph_add_tensor(g, &r, &rt));
    d.ragged_offset = rt;
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &d, &t), FROST_INVALID_ARGUMENT);
    expect_msg("i32 or i64");
    /* an empty graph cannot be built */
    TU_CHECK_STATUS(frost_graph_build(g, NULL), FROST_INVALID_ARGUMENT);
    frost_graph_destroy(g);
}

/* A two-node graph: RMSNorm then LayerNorm, f32 on the CPU. */
static void test_lifecycle_and_bindings(frost_context *ctx)
{
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(ctx, &g));
    int64_t dims[2] = {3, 8};
    frost_tensor x = add(g, "x", FROST_F32, 2, dims);
    frost_norm_desc nd = {.x = x, .phase = FROST_NORM_INFERENCE};
    frost_norm_outputs o1 = {0}, o2 = {0};
    TU_OK(frost_graph_add_rmsnorm(g, &nd, &o1));
    nd.x = o1.y;
    TU_OK(frost_graph_add_layernorm(g, &nd, &o2));
    /* the same output cannot be written by a second node */
    frost_norm_outputs dup = {.y = o1.y};
    nd.x = x;
    TU_CHECK_STATUS(frost_graph_add_rmsnorm(g, &nd, &dup), FROST_INVALID_ARGUMENT);

    size_t ws = 1;
    frost_binding b[4] = {{x, NULL}, {o1.y, NULL}, {o2.y, NULL}};
    TU_CHECK_STATUS(frost_graph_execute(g, b, 3, NULL, NULL), FROST_BAD_STATE);
    expect_msg("build");
    TU_CHECK_STATUS(frost_graph_workspace_size(g, &ws), FROST_BAD_STATE);

    frost_build_options bo = {.engine = "nonesuch"};
    TU_CHECK_STATUS(frost_graph_build(g, &bo), FROST_INVALID_ARGUMENT);
    expect_msg("nonesuch");
    bo.engine = "cuda"; /* only the cuda engine, in a CPU context: nobody can run it */
    TU_CHECK_STATUS(frost_graph_build(g, &bo), FROST_NOT_SUPPORTED);
    expect_msg("cuda");
    expect_msg("ref: not requested");
    bo.engine = NULL;
    bo.policy = (frost_build_policy)5;
    TU_CHECK_STATUS(frost_graph_build(g, &bo), FROST_INVALID_ARGUMENT);
    TU_OK(frost_graph_build(g, NULL));
    TU_CHECK_STATUS(frost_graph_build(g, NULL), FROST_BAD_STATE);
    TU_CHECK_STATUS(frost_graph_add_rmsnorm(g, &nd, &dup), FROST_BAD_STATE);
    frost_tensor late = 0;
    frost_tensor_desc ld = {.dtype = FROST_F32, .rank = 1, .dims = {1}};
    TU_CHECK_STATUS(frost_graph_add_tensor(g, &ld, &late), FROST_BAD_STATE);
    TU_OK(frost_graph_workspace_size(g, &ws));

    /* explain: sizing call, truncation, content */
    size_t len = 0;
    TU_OK(frost_graph_explain(g, NULL, 0, &len));
    TU_CHECK(len > 50);
    char *text = malloc(len + 1), small[16];
    TU_OK(frost_graph_explain(g, text, len + 1, NULL));
    TU_CHECK(strlen(text) == len);
    TU_CHECK(strstr(text, "rmsnorm_fwd") && strstr(text, "layernorm_fwd") && strstr(text, "engine: ref"));
    TU_CHECK(strstr(text, "cuda: runs only in a CUDA context"));
    TU_OK(frost_graph_explain(g, small, sizeof small, NULL));
    TU_CHECK(strlen(small) == sizeof small - 1);
    TU_CHECK_STATUS(frost_graph_explain(g, NULL, 10, NULL), FROST_INVALID_ARGUMENT);
    free(text);

    float hx[24], hy1[24], hy2[24];
    for (int i = 0; i < 24; i++)
        hx[i] = (float)(i % 5) - 1.5f, hy1[i] = hy2[i] = NAN;
    void *wsp = ws ? malloc(ws) : NULL;
    frost_binding ok[3] = {{x, hx}, {o1.y, hy1}, {o2.y, hy2}};
    /* binding checks */
    TU_CHECK_STATUS(frost_graph_execute(g, ok, -1, wsp, NULL), FROST_INVALID_ARGUMENT);
    TU_CHECK_STATUS(frost_graph_execute(g, NULL, 3, wsp, NULL), FROST_INVALID_ARGUMENT);
    TU_CHECK_STATUS(frost_graph_execute(g, ok, 2, wsp, NULL), FROST_INVALID_ARGUMENT);
    expect_msg("not bound");
    frost_binding nul[3] = {{x, hx}, {o1.y, NULL}, {o2.y, hy2}};
    TU_CHECK_STATUS(frost_graph_execute(g, nul, 3, wsp, NULL), FROST_INVALID_ARGUMENT);
    expect_msg("NULL pointer");
    frost_binding twice[4] = {{x, hx}, {o1.y, hy1}, {o2.y, hy2}, {x, hx}};
    TU_CHECK_STATUS(frost_graph_execute(g, twice, 4, wsp, NULL), FROST_INVALID_ARGUMENT);
    expect_msg("bound twice");
    frost_binding skew[3] = {{x, (char *)hx + 2}, {o1.y, hy1}, {o2.y, hy2}};
    TU_CHECK_STATUS(frost_graph_execute(g, skew, 3, wsp, NULL), FROST_INVALID_ARGUMENT);
    expect_msg("not aligned");
    frost_binding unknown[4] = {{x, hx}, {o1.y, hy1}, {o2.y, hy2}, {777, hx}};
    TU_CHECK_STATUS(frost_graph_execute(g, unknown, 4, wsp, NULL), FROST_INVALID_ARGUMENT);
    expect_msg("777");
    TU_OK(frost_graph_execute(g, ok, 3, wsp, NULL));
    /* y2 = layernorm(rmsnorm(x)): each row of y2 has mean 0 */
    for (int r = 0; r < 3; r++) {
        double m = 0;
        for (int c = 0; c < 8; c++)
            m += hy2[r * 8 + c];
        TU_CHECK(fabs(m / 8) < 1e-5);
        for (int c = 0; c < 8; c++)
            TU_CHECK(!isnan(hy1[r * 8 + c]));
    }
    free(wsp);
    frost_graph_destroy(g);
}

int main(void)
{
    tu_set_context("test_api", 0, 0, "api contract");
    frost_context *ctx = NULL;
    TU_OK(frost_context_create(NULL, &ctx));
    int cases = 0;
    void (*plain[])(void) = {test_status_and_version, test_context};
    void (*with_ctx[])(frost_context *) = {test_logging, test_tensors, test_lifecycle_and_bindings};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++, cases++) {
        tu_case_begin();
        plain[i]();
        tu_case_end();
    }
    for (size_t i = 0; i < sizeof with_ctx / sizeof *with_ctx; i++, cases++) {
        tu_case_begin();
        with_ctx[i](ctx);
        tu_case_end();
    }
    frost_context_destroy(ctx);
    return tu_finish(cases);
}
