/*
 * graph.c — the graph IR and its fixed lifecycle:
 *
 *   create -> add_tensor / add_<op> -> build -> workspace_size -> execute (many times)
 *
 * Tensors are small integer ids (1..num_tensors) into g->tensors; a node is an op kind, one
 * tensor id per slot (the op defines the slots) and the op's validated problem.  Ops
 * validate and infer shapes when they are added, so build only selects engines and
 * prepares kernels.
 *
 * Build asks the engines in priority order (cuda, then ref) for each node; the first one
 * whose selector says yes is built, and every refusal is kept for frost_graph_explain.
 * After build the graph is immutable, and execute walks the nodes in insertion order
 * (which is a topological order: a node can only read tensors that already exist).
 * Execute resolves bindings with linear scans over a small array: no allocation and no
 * hashing on that path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "runtime/runtime.h"

/* ------------------------------------------------------------------------------------ */
/* Create / destroy                                                                      */
/* ------------------------------------------------------------------------------------ */
frost_status frost_graph_create(frost_context *ctx, frost_graph **out)
{
    frost__clear_error();
    if (!out)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_create: out is NULL");
    *out = NULL;
    if (!ctx)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_create: ctx is NULL");
    frost_graph *g = calloc(1, sizeof *g);
    if (!g)
        return frost__fail(FROST_OUT_OF_MEMORY, "frost_graph_create: out of host memory");
    g->g.ctx = ctx;
    *out = g;
    return FROST_OK;
}

static void release_plans(frost__graph *g)
{
    for (int i = 0; i < g->num_nodes; i++) {
        frost__node *n = &g->nodes[i];
        if (n->plan) {
            const frost__op_impl *impl = frost__op_classes[n->op]->impl[n->engine];
            if (impl && impl->release)
                impl->release(n->plan);
            else
                free(n->plan);
        }
        n->plan = NULL;
        n->workspace = 0;
        frost__buf_free(&n->refusals);
    }
    g->built = 0;
    g->workspace = 0;
}

void frost_graph_destroy(frost_graph *graph)
{
    if (!graph)
        return;
    frost__graph *g = &graph->g;
    release_plans(g);
    for (int i = 0; i < g->num_nodes; i++)
        free(g->nodes[i].problem);
    for (uint32_t t = 1; t <= g->num_tensors; t++)
        free(g->tensors[t].name);
    free(g->tensors);
    free(g->nodes);
    free(graph);
}

frost_status frost__graph_check_mutable(const frost__graph *g, const char *fn)
{
    if (!g)
        return frost__fail(FROST_INVALID_ARGUMENT, "%s: graph is NULL", fn);
    if (g->built)
        return frost__fail(FROST_BAD_STATE, "%s: the graph is already built and can no longer change", fn);
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Tensors                                                                               */
/* ------------------------------------------------------------------------------------ */
const frost__tensor *frost__tensor_get(const frost__graph *g, frost_tensor id)
{
    if (!g || id == 0 || id > g->num_tensors)
        return NULL;
    return &g->tensors[id];
}

static frost_tensor tensor_append(frost__graph *g)
{
    if (g->num_tensors + 1 >= g->cap_tensors) {
        uint32_t cap = g->cap_tensors ? g->cap_tensors * 2 : 16;
        frost__tensor *t = realloc(g->tensors, (size_t)cap * sizeof *t);
        if (!t)
            return 0;
        g->tensors = t;
        g->cap_tensors = cap;
    }
    frost_tensor id = ++g->num_tensors;
    memset(&g->tensors[id], 0, sizeof g->tensors[id]);
    g->tensors[id].producer = -1;
    return id;
}

/* a * b for a, b >= 0; 0 when the product passes INT64_MAX */
static int mul_fits(int64_t a, int64_t b, int64_t *out)
{
    if (a != 0 && b > INT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

/* Whether a tensor's element count, its packed strides (when it gives none), the elements
 * its strides span and their bytes all stay within int64: every later size computation
 * relies on it.  dims and strides are >= 0 here. */
static int tensor_extent_fits(const frost_tensor_desc *d, int packed)
{
    int64_t count = 1, outer = 1, span = 1, step;
    for (int i = d->rank - 1; i >= 0; i--) {
        const int64_t stride = packed ? outer : d->strides[i];
        if (!mul_fits(count, d->dims[i], &count) || !mul_fits(outer, d->dims[i] > 0 ? d->dims[i] : 1, &outer))
            return 0;
        if (d->dims[i] > 1) {
            if (!mul_fits(d->dims[i] - 1, stride, &step) || step > INT64_MAX - span)
                return 0;
            span += step;
        }
    }
    return mul_fits(span, (int64_t)frost_dtype_size(d->dtype), &step);
}

static void packed_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
}

static char *name_copy(const char *name, frost_tensor id)
{
    char tmp[32];
    if (!name) {
        snprintf(tmp, sizeof tmp, "t%u", (unsigned)id);
        name = tmp;
    }
    size_t n = strlen(name);
    char *p = malloc(n + 1);
    if (p)
        memcpy(p, name, n + 1);
    return p;
}

frost_status frost_graph_add_tensor(frost_graph *graph, const frost_tensor_desc *d, frost_tensor *out)
{
    frost__clear_error();
    frost__graph *g = graph ? &graph->g : NULL;
    frost_status s = frost__graph_check_mutable(g, "frost_graph_add_tensor");
    if (s != FROST_OK)
        return s;
    if (!d || !out)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_add_tensor: %s is NULL", d ? "out" : "desc");
    const char *nm = d->name ? d->name : "(unnamed)";
    if (frost_dtype_size(d->dtype) == 0)
        return frost__fail(FROST_INVALID_ARGUMENT, "tensor '%s': dtype %d is not a frost_dtype", nm, (int)d->dtype);
    if (d->rank < 1 || d->rank > FROST_MAX_RANK)
        return frost__fail(FROST_INVALID_ARGUMENT, "tensor '%s': rank must be 1..%d, got %d", nm, FROST_MAX_RANK,
                           d->rank);
    int any_stride = 0;
    for (int i = 0; i < d->rank; i++) {
        if (d->dims[i] < 0)
            return frost__fail(FROST_INVALID_ARGUMENT, "tensor '%s': dim %d must be >= 0, got %lld", nm, i,
                               (long long)d->dims[i]);
        if (d->strides[i] < 0)
            return frost__fail(FROST_INVALID_ARGUMENT, "tensor '%s': stride %d must be >= 0, got %lld", nm, i,
                               (long long)d->strides[i]);
        any_stride |= d->strides[i] != 0;
    }
    if (!tensor_extent_fits(d, !any_stride)) {
        char dims[256];
        frost__dims_str(dims, sizeof dims, d->rank, d->dims);
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "tensor '%s': dims [%s]%s count or address more than INT64_MAX elements or bytes", nm, dims,
                           any_stride ? " with its strides" : "");
    }
    if (d->ragged_offset) {
        const frost__tensor *r = frost__tensor_get(g, d->ragged_offset);
        if (!r)
            return frost__fail(FROST_INVALID_ARGUMENT, "tensor '%s': ragged_offset %u is not a tensor of this graph",
                               nm, (unsigned)d->ragged_offset);
        if (r->dtype != FROST_I32 && r->dtype != FROST_I64)
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "tensor '%s': ragged_offset '%s' must be i32 or i64, got %s", nm, r->name,
                               frost_dtype_name(r->dtype));
    }
    frost_tensor id = tensor_append(g);
    if (!id)
        return frost__fail(FROST_OUT_OF_MEMORY, "frost_graph_add_tensor: out of host memory");
    frost__tensor *t = &g->tensors[id];
    t->name = name_copy(d->name, id);
    if (!t->name) {
        g->num_tensors--;
        return frost__fail(FROST_OUT_OF_MEMORY, "frost_graph_add_tensor: out of host memory");
    }
    t->dtype = d->dtype;
    t->rank = d->rank;
    memcpy(t->dims, d->dims, sizeof t->dims);
    if (any_stride)
        memcpy(t->strides, d->strides, sizeof t->strides);
    else
        packed_strides(t->rank, t->dims, t->strides);
    for (int i = t->rank; i < FROST_MAX_RANK; i++)
        t->dims[i] = 1, t->strides[i] = 0;
    t->ragged_offset = d->ragged_offset;
    *out = id;
    return FROST_OK;
}

frost_tensor frost__tensor_new_output(frost__graph *g, const char *name, frost_dtype dtype, int rank,
                                      const int64_t *dims, const int64_t *strides, frost_tensor ragged)
{
    frost_tensor id = tensor_append(g);
    if (!id)
        return 0;
    frost__tensor *t = &g->tensors[id];
    t->name = name_copy(name, id);
    if (!t->name) {
        g->num_tensors--;
        return 0;
    }
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < FROST_MAX_RANK; i++)
        t->dims[i] = i < rank ? dims[i] : 1;
    if (strides)
        for (int i = 0; i < FROST_MAX_RANK; i++)
            t->strides[i] = i < rank ? strides[i] : 0;
    else
        packed_strides(rank, t->dims, t->strides);
    t->ragged_offset = ragged;
    return id;
}

frost_status frost_graph_tensor_desc(const frost_graph *graph, frost_tensor id, frost_tensor_desc *out)
{
    frost__clear_error();
    if (!graph || !out)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_tensor_desc: %s is NULL", graph ? "out" : "graph");
    const frost__tensor *t = frost__tensor_get(&graph->g, id);
    if (!t)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_tensor_desc: %u is not a tensor of this graph",
                           (unsigned)id);
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->rank = t->rank;
    for (int i = 0; i < t->rank; i++) {
        out->dims[i] = t->dims[i];
        out->strides[i] = t->strides[i];
    }
    out->ragged_offset = t->ragged_offset;
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Nodes                                                                                 */
/* ------------------------------------------------------------------------------------ */
frost_status frost__graph_add_node(frost__graph *g, frost__op op, const frost_tensor *slots, void *problem)
{
    const frost__op_class *cls = frost__op_classes[op];
    for (int i = 0; i < cls->num_slots; i++) {
        if (!(cls->output_slots & (1u << i)) || !slots[i])
            continue;
        const frost__tensor *t = frost__tensor_get(g, slots[i]);
        if (t && t->producer >= 0) {
            free(problem);
            return frost__fail(FROST_INVALID_ARGUMENT, "%s: output %s ('%s') is already written by node %d",
                               cls->name, cls->slot_names[i], t->name, t->producer);
        }
    }
    if (g->num_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 8;
        frost__node *n = realloc(g->nodes, (size_t)cap * sizeof *n);
        if (!n) {
            free(problem);
            return frost__fail(FROST_OUT_OF_MEMORY, "%s: out of host memory", cls->name);
        }
        g->nodes = n;
        g->cap_nodes = cap;
    }
    frost__node *n = &g->nodes[g->num_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    memcpy(n->slot, slots, (size_t)cls->num_slots * sizeof *slots);
    n->problem = problem;
    for (int i = 0; i < cls->num_slots; i++)
        if ((cls->output_slots & (1u << i)) && slots[i])
            g->tensors[slots[i]].producer = g->num_nodes;
    g->num_nodes++;
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Build                                                                                 */
/* ------------------------------------------------------------------------------------ */
static frost_status build_node(frost__graph *g, int index, const frost_build_options *opt)
{
    frost__node *n = &g->nodes[index];
    const frost__op_class *cls = frost__op_classes[n->op];
    frost__buf_free(&n->refusals);
    for (int e = 0; e < FROST__ENGINE_COUNT; e++) {
        const char *ename = frost__engine_names[e];
        const frost__op_impl *impl = cls->impl[e];
        frost__buf why = {0};
        if (opt && opt->engine && strcmp(opt->engine, ename) != 0) {
            frost__buf_printf(&n->refusals, "  %s: not requested (build option engine=\"%s\")\n", ename, opt->engine);
            continue;
        }
        if (!frost__engine_available(g->ctx, (frost__engine_id)e, &why)) {
            frost__buf_printf(&n->refusals, "  %s: %s\n", ename, frost__buf_str(&why));
            frost__buf_free(&why);
            continue;
        }
        if (!impl || !impl->select) {
            frost__buf_printf(&n->refusals, "  %s: has no implementation of %s\n", ename, cls->name);
            continue;
        }
        void *plan = NULL;
        frost_status s = impl->select(g->ctx, g, n, &plan, &why);
        if (s == FROST_NOT_SUPPORTED) {
            frost__buf_printf(&n->refusals, "  %s: %s\n", ename, frost__buf_str(&why));
            frost__buf_free(&why);
            continue;
        }
        frost__buf_free(&why);
        if (s != FROST_OK)
            return s;
        n->engine = (frost__engine_id)e;
        n->plan = plan;
        if (impl->build) {
            s = impl->build(g->ctx, n, plan, opt);
            if (s != FROST_OK)
                return s; /* release_plans frees the plan */
        }
        n->workspace = impl->workspace ? impl->workspace(n, plan) : 0;
        frost__log(FROST_LOG_INFO, "node %d (%s): engine %s", index, cls->name, ename);
        return FROST_OK;
    }
    return frost__fail(FROST_NOT_SUPPORTED, "node %d (%s): no engine in this context can run it:\n%s", index,
                       cls->name, frost__buf_str(&n->refusals));
}

frost_status frost_graph_build(frost_graph *graph, const frost_build_options *opt)
{
    frost__clear_error();
    frost__graph *g = graph ? &graph->g : NULL;
    frost_status s = frost__graph_check_mutable(g, "frost_graph_build");
    if (s != FROST_OK)
        return s;
    if (opt && opt->policy != FROST_BUILD_HEURISTIC && opt->policy != FROST_BUILD_ALL)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_build: policy must be HEURISTIC (0) or ALL (1), got %d",
                           (int)opt->policy);
    if (opt && opt->engine) {
        int known = 0;
        for (int e = 0; e < FROST__ENGINE_COUNT; e++)
            known |= strcmp(opt->engine, frost__engine_names[e]) == 0;
        if (!known)
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "frost_graph_build: engine \"%s\" is unknown (engines: \"cuda\", \"ref\")", opt->engine);
    }
    if (g->num_nodes == 0)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_build: the graph has no op");
    if (g->ctx->device) {
        s = frost__device_make_current(g->ctx->device);
        if (s != FROST_OK)
            return s;
    }
    for (int i = 0; i < g->num_nodes; i++) {
        s = build_node(g, i, opt);
        if (s != FROST_OK) {
            /* keep the refusal text of the failing node for explain, drop the plans */
            frost__buf keep = g->nodes[i].refusals;
            g->nodes[i].refusals = (frost__buf){0};
            release_plans(g);
            g->nodes[i].refusals = keep;
            return s;
        }
        if (g->nodes[i].workspace > g->workspace)
            g->workspace = g->nodes[i].workspace;
    }
    g->built = 1;
    return FROST_OK;
}

frost_status frost_graph_workspace_size(const frost_graph *graph, size_t *bytes)
{
    frost__clear_error();
    if (!graph || !bytes)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_workspace_size: %s is NULL",
                           graph ? "bytes" : "graph");
    if (!graph->g.built)
        return frost__fail(FROST_BAD_STATE, "frost_graph_workspace_size: build the graph first");
    *bytes = graph->g.workspace;
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Execute                                                                               */
/* ------------------------------------------------------------------------------------ */
static int64_t tensor_elems(const frost__tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

static frost_status check_bindings(const frost__graph *g, const frost_binding *b, int nb)
{
    for (int i = 0; i < nb; i++) {
        const frost__tensor *t = frost__tensor_get(g, b[i].tensor);
        if (!t)
            return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_execute: binding %d names tensor %u, which is not a "
                               "tensor of this graph", i, (unsigned)b[i].tensor);
        if (!b[i].ptr && tensor_elems(t) > 0)
            return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_execute: binding %d: tensor '%s' has a NULL pointer",
                               i, t->name);
        size_t align = frost_dtype_size(t->dtype);
        if (align > 1 && (uintptr_t)b[i].ptr % align != 0)
            return frost__fail(FROST_INVALID_ARGUMENT,
                               "frost_graph_execute: binding %d: tensor '%s' (%s) pointer %p is not aligned to its "
                               "element size (%zu bytes)",
                               i, t->name, frost_dtype_name(t->dtype), b[i].ptr, align);
        for (int j = 0; j < i; j++)
            if (b[j].tensor == b[i].tensor)
                return frost__fail(FROST_INVALID_ARGUMENT,
                                   "frost_graph_execute: tensor '%s' is bound twice (bindings %d and %d)", t->name, j,
                                   i);
    }
    return FROST_OK;
}

static const frost_binding *find_binding(const frost_binding *b, int nb, frost_tensor id)
{
    for (int i = 0; i < nb; i++)
        if (b[i].tensor == id)
            return &b[i];
    return NULL;
}

frost_status frost_graph_execute(const frost_graph *graph, const frost_binding *bindings, int num_bindings,
                                 void *workspace, void *stream)
{
    frost__clear_error();
    if (!graph)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_execute: graph is NULL");
    const frost__graph *g = &graph->g;
    if (!g->built)
        return frost__fail(FROST_BAD_STATE, "frost_graph_execute: build the graph before executing it");
    if (num_bindings < 0 || (num_bindings > 0 && !bindings))
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_execute: %d bindings at %p", num_bindings,
                           (const void *)bindings);
    if (g->workspace > 0 && !workspace)
        return frost__fail(FROST_INVALID_ARGUMENT,
                           "frost_graph_execute: the graph needs %zu bytes of workspace, but workspace is NULL",
                           g->workspace);
    frost_status s = check_bindings(g, bindings, num_bindings);
    if (s != FROST_OK)
        return s;
    if (g->ctx->device) {
        s = frost__device_make_current(g->ctx->device);
        if (s != FROST_OK)
            return s;
    }
    for (int i = 0; i < g->num_nodes; i++) {
        const frost__node *n = &g->nodes[i];
        const frost__op_class *cls = frost__op_classes[n->op];
        void *ptrs[FROST__MAX_SLOTS] = {0};
        for (int k = 0; k < cls->num_slots; k++) {
            if (!n->slot[k])
                continue;
            const frost_binding *b = find_binding(bindings, num_bindings, n->slot[k]);
            if (!b) {
                const frost__tensor *t = frost__tensor_get(g, n->slot[k]);
                return frost__fail(FROST_INVALID_ARGUMENT,
                                   "frost_graph_execute: tensor '%s' (%s of node %d, %s) is not bound; %d bindings "
                                   "given",
                                   t->name, cls->slot_names[k], i, cls->name, num_bindings);
            }
            ptrs[k] = b->ptr;
        }
        s = cls->impl[n->engine]->execute(g->ctx, n, n->plan, ptrs, workspace, stream);
        if (s != FROST_OK)
            return s;
    }
    return FROST_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Explain                                                                               */
/* ------------------------------------------------------------------------------------ */
static void explain_tensor(frost__buf *out, const frost__graph *g, frost_tensor id)
{
    const frost__tensor *t = &g->tensors[id];
    frost__buf_printf(out, "  t%u '%s' %s [", (unsigned)id, t->name, frost_dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++)
        frost__buf_printf(out, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    frost__buf_printf(out, "] strides [");
    for (int i = 0; i < t->rank; i++)
        frost__buf_printf(out, "%s%lld", i ? "," : "", (long long)t->strides[i]);
    frost__buf_printf(out, "]");
    if (t->ragged_offset)
        frost__buf_printf(out, " ragged by t%u", (unsigned)t->ragged_offset);
    if (t->producer >= 0)
        frost__buf_printf(out, " (written by node %d)", t->producer);
    frost__buf_printf(out, "\n");
}

frost_status frost_graph_explain(const frost_graph *graph, char *buf, size_t cap, size_t *len)
{
    frost__clear_error();
    if (!graph)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_explain: graph is NULL");
    if (!buf && cap > 0)
        return frost__fail(FROST_INVALID_ARGUMENT, "frost_graph_explain: buf is NULL but cap is %zu", cap);
    const frost__graph *g = &graph->g;
    frost__buf out = {0};
    frost__buf_printf(&out, "graph on %s: %d node(s), %u tensor(s), %s\n", g->ctx->name, g->num_nodes,
                      (unsigned)g->num_tensors, g->built ? "built" : "not built");
    for (int i = 0; i < g->num_nodes; i++) {
        const frost__node *n = &g->nodes[i];
        const frost__op_class *cls = frost__op_classes[n->op];
        frost__buf_printf(&out, "node %d: %s ", i, cls->name);
        if (cls->describe)
            cls->describe(g, n, &out);
        frost__buf_printf(&out, "\n");
        for (int k = 0; k < cls->num_slots; k++)
            if (n->slot[k])
                frost__buf_printf(&out, "  %s = t%u '%s'\n", cls->slot_names[k], (unsigned)n->slot[k],
                                  g->tensors[n->slot[k]].name);
        if (g->built) {
            const frost__op_impl *impl = cls->impl[n->engine];
            frost__buf_printf(&out, "  engine: %s", frost__engine_names[n->engine]);
            if (impl->describe_plan) {
                frost__buf_printf(&out, " — ");
                impl->describe_plan(n->plan, &out);
            }
            frost__buf_printf(&out, "; workspace %zu bytes\n", n->workspace);
        }
        if (n->refusals.len)
            frost__buf_printf(&out, "  refused by:\n%s", frost__buf_str(&n->refusals));
    }
    frost__buf_printf(&out, "tensors:\n");
    for (uint32_t t = 1; t <= g->num_tensors; t++)
        explain_tensor(&out, g, t);
    if (g->built)
        frost__buf_printf(&out, "workspace: %zu bytes\n", g->workspace);
    if (out.oom) {
        frost__buf_free(&out);
        return frost__fail(FROST_OUT_OF_MEMORY, "frost_graph_explain: out of host memory");
    }
    if (len)
        *len = out.len;
    frost__buf_copy_out(&out, buf, cap);
    frost__buf_free(&out);
    return FROST_OK;
}

void frost__dims_str(char *buf, size_t cap, int rank, const int64_t *dims)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < rank && len + 1 < cap; ++i) {
        int n = snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)dims[i]);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

int frost__elements_overlap(int rank, const int64_t *dims, const int64_t *strides)
{
    int64_t st[FROST_MAX_RANK], dm[FROST_MAX_RANK];
    int n = 0;
    for (int i = 0; i < rank; ++i) {
        if (dims[i] == 0)
            return 0; /* no elements at all */
        if (dims[i] > 1)
            st[n] = strides[i], dm[n++] = dims[i];
    }
    for (int i = 1; i < n; ++i) /* insertion sort by stride */
        for (int j = i; j > 0 && st[j] < st[j - 1]; --j) {
            const int64_t ts = st[j], td = dm[j];
            st[j] = st[j - 1], dm[j] = dm[j - 1];
            st[j - 1] = ts, dm[j - 1] = td;
        }
    int64_t reach = 1; /* elements spanned by the dims sorted so far */
    for (int i = 0; i < n; ++i) {
        if (st[i] < reach)
            return 1;
        reach += st[i] * (dm[i] - 1);
    }
    return 0;
}
