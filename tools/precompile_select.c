/*
 * precompile_select.c — which kernel keys frost-precompile compiles.
 *
 * The full set.  Each cuda engine exports a function that lists every key its selector
 * can choose: frost__sdpa_fwd_cuda_keys, frost__sdpa_bwd_cuda_keys (its tiles follow the
 * arch's shared-memory tier, so the list is made per arch), frost__norm_cuda_keys and
 * frost__cnorm_cuda_keys.  --selectors concatenates the chosen lists; keys are then put in
 * canonical printable form and repeats are dropped (the norm list names the same key for
 * many hidden sizes).  The full set is about ten thousand keys, at 1-15 s of NVRTC each
 * per arch: hours on a CI machine, minutes on a 64-core one.
 *
 * The cover (--cover) is a deterministic subset small enough for CI that still touches
 * every kind of variant.  Keys are split into classes by everything that is not a number:
 * the source, the entry point, the bare flags (DTYPE_BF16, KIND_RMS, LOOPED, BIAS_F32,
 * LAYOUT_NHWC, ...), defines with non-numeric values, and the names, in order, of the
 * defines with integer values.  Every class is represented.  Inside a class, each numeric
 * define (D_QK, D_V, BLOCK_N, GROUP, STAGES, BIAS=0/1/2, ...) has marked values, taken
 * from the distinct values it has in the class: the smallest, the largest, and the median
 * (the lower middle one) as the typical value.  For head dims 16..256 that marks 16, 128
 * and 256; a define with at most three values has every value marked.  A (define, marked
 * value) pair is a target.  The cover picks keys greedily, each time the key that hits
 * the most targets not hit yet, until every target of its class is hit; ties go to the
 * key with more values at an end of their range (so the all-largest key, the heaviest in
 * registers, wins over a lopsided one), then to the earliest.  Tile defines follow the
 * head dims, so the few keys with extreme or typical dims also carry the extreme tiles,
 * stage counts and Q-in-registers choices.  The pass runs per entry point; the SDPA
 * backward's five entry points share one cubin per define set, so their picks coincide
 * and cost one compile.  The same full set gives the same cover on every machine, and
 * when an engine's list changes the cover follows by itself.
 *
 * Why one typical value: a second one (the value nearest sqrt(smallest * largest), head
 * dim 64) adds a third to the SDPA compiles and took the CI test
 * (tests/precompile/check_precompile_cover.sh) past five minutes on two cores.  Head dim
 * 64 uses the same tiles as 128 with fewer registers, so 128 is the one worth keeping.
 *
 * What the cover does not prove: that every combination of marked values compiles (only
 * that each marked value does, in some key), nor anything about the unmarked middle of a
 * range.  The full set, sharded over a big machine, is the complete proof
 * (docs/CONTRIBUTING-GPU.md).
 *
 * --shard I/N keeps the keys whose index in the final list is I modulo N, so N machines
 * with the same options split the list without overlap.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "precompile_select.h"
#include "frost/frost.h"
#include "ops/norm/chan_norm.h"
#include "ops/norm/norm.h"
#include "ops/sdpa/sdpa.h"
#include "runtime/runtime.h"

#define MAX_MARKS 3

/* ------------------------------------------------------------------------------------ */
/* Lists                                                                                 */
/* ------------------------------------------------------------------------------------ */
int pc_list_add(pc_key_list *list, const char *text)
{
    if (list->count == list->cap) {
        int cap = list->cap ? 2 * list->cap : 64;
        char **grown = realloc(list->texts, sizeof *grown * (size_t)cap);
        if (!grown) {
            return 0;
        }
        list->texts = grown;
        list->cap = cap;
    }
    list->texts[list->count] = strdup(text);
    return list->texts[list->count++] != NULL;
}

int pc_list_append(pc_key_list *list, const pc_key_list *src)
{
    for (int i = 0; i < src->count; i++) {
        if (!pc_list_add(list, src->texts[i])) {
            return 0;
        }
    }
    return 1;
}

void pc_list_free(pc_key_list *list)
{
    for (int i = 0; i < list->count; i++) {
        free(list->texts[i]);
    }
    free(list->texts);
    memset(list, 0, sizeof *list);
}

int pc_list_read(const char *path, pc_key_list *keys)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "frost-precompile: cannot open %s\n", path);
        return 0;
    }
    char line[4096];
    int ok = 1;
    while (ok && fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) {
            *hash = '\0';
        }
        char *start = line + strspn(line, " \t\r\n");
        size_t len = strlen(start);
        while (len > 0 && strchr(" \t\r\n", start[len - 1])) {
            start[--len] = '\0';
        }
        if (len > 0) {
            ok = pc_list_add(keys, start);
        }
    }
    if (f != stdin) {
        fclose(f);
    }
    return ok;
}

/* ------------------------------------------------------------------------------------ */
/* Selectors                                                                             */
/* ------------------------------------------------------------------------------------ */
static const struct {
    const char *name;
    unsigned bit;
} selector_names[] = {
    {"sdpa_fwd", PC_SEL_SDPA_FWD}, {"sdpa_bwd", PC_SEL_SDPA_BWD}, {"norm", PC_SEL_NORM},
    {"cnorm", PC_SEL_CNORM},       {"all", PC_SEL_ALL},
};

int pc_selectors_parse(const char *names, unsigned *mask)
{
    const char *p = names;
    while (*p) {
        size_t len = strcspn(p, ",");
        size_t i = 0;
        while (i < FROST__ARRAY_SIZE(selector_names) &&
               (strlen(selector_names[i].name) != len || strncmp(selector_names[i].name, p, len) != 0)) {
            i++;
        }
        if (i == FROST__ARRAY_SIZE(selector_names)) {
            fprintf(stderr, "frost-precompile: unknown selector \"%.*s\" (sdpa_fwd, sdpa_bwd, norm, cnorm, all)\n",
                    (int)len, p);
            return 0;
        }
        *mask |= selector_names[i].bit;
        p += len + (p[len] == ',');
    }
    return 1;
}

/* Appends the printable form of keys[0..count). */
static int add_keys(pc_key_list *out, const frost__kernel_key *keys, size_t count)
{
    int ok = 1;
    for (size_t i = 0; i < count && ok; i++) {
        frost__buf text = {0};
        frost__key_print(&keys[i], &text);
        ok = !text.oom && pc_list_add(out, frost__buf_str(&text));
        frost__buf_free(&text);
    }
    return ok;
}

int pc_select(pc_key_list *out, unsigned mask, const char *arch, int equal_dims_only, FILE *notes)
{
    for (unsigned bit = 1; bit < PC_SEL_ALL; bit <<= 1) {
        if (!(mask & bit)) {
            continue;
        }
        size_t total = 0;
        const char *name = bit == PC_SEL_SDPA_FWD ? "sdpa_fwd" : bit == PC_SEL_SDPA_BWD ? "sdpa_bwd"
                                                             : bit == PC_SEL_NORM       ? "norm"
                                                                                        : "cnorm";
        if (bit == PC_SEL_SDPA_FWD) {
            total = frost__sdpa_fwd_cuda_keys(NULL, 0, equal_dims_only);
        } else if (bit == PC_SEL_SDPA_BWD) {
            total = frost__sdpa_bwd_cuda_keys(NULL, 0, arch, equal_dims_only);
        } else if (bit == PC_SEL_NORM) {
            total = (size_t)frost__norm_cuda_keys(NULL, 0);
        } else {
            total = (size_t)frost__cnorm_cuda_keys(NULL, 0);
        }
        frost__kernel_key *keys = calloc(total ? total : 1, sizeof *keys);
        if (!keys) {
            return 0;
        }
        if (bit == PC_SEL_SDPA_FWD) {
            frost__sdpa_fwd_cuda_keys(keys, total, equal_dims_only);
        } else if (bit == PC_SEL_SDPA_BWD) {
            frost__sdpa_bwd_cuda_keys(keys, total, arch, equal_dims_only);
        } else if (bit == PC_SEL_NORM) {
            frost__norm_cuda_keys(keys, (int)total);
        } else {
            frost__cnorm_cuda_keys(keys, (int)total);
        }
        int ok = add_keys(out, keys, total);
        free(keys);
        if (!ok) {
            return 0;
        }
        if (notes) {
            fprintf(notes, "frost-precompile: %s: %s lists %zu keys\n", arch, name, total);
        }
    }
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* Canonical form, repeats, shards                                                       */
/* ------------------------------------------------------------------------------------ */
void pc_canonicalize(pc_key_list *list)
{
    for (int i = 0; i < list->count; i++) {
        frost__kernel_key key;
        if (frost__key_parse(list->texts[i], &key) != FROST_OK) {
            continue;
        }
        frost__buf text = {0};
        frost__key_print(&key, &text);
        char *copy = text.oom ? NULL : strdup(frost__buf_str(&text));
        if (copy) {
            free(list->texts[i]);
            list->texts[i] = copy;
        }
        frost__buf_free(&text);
    }
}

typedef struct indexed_text {
    const char *text;
    int index;
} indexed_text;

static int by_text_then_index(const void *a, const void *b)
{
    const indexed_text *x = a, *y = b;
    int c = strcmp(x->text, y->text);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

void pc_dedup(pc_key_list *list)
{
    if (list->count < 2) {
        return;
    }
    indexed_text *sorted = malloc(sizeof *sorted * (size_t)list->count);
    if (!sorted) {
        return; /* repeats only cost cache hits */
    }
    for (int i = 0; i < list->count; i++) {
        sorted[i] = (indexed_text){list->texts[i], i};
    }
    qsort(sorted, (size_t)list->count, sizeof *sorted, by_text_then_index);
    for (int i = 1; i < list->count; i++) {
        if (strcmp(sorted[i].text, sorted[i - 1].text) == 0) {
            free(list->texts[sorted[i].index]);
            list->texts[sorted[i].index] = NULL;
        }
    }
    free(sorted);
    int kept = 0;
    for (int i = 0; i < list->count; i++) {
        if (list->texts[i]) {
            list->texts[kept++] = list->texts[i];
        }
    }
    list->count = kept;
}

void pc_shard(pc_key_list *list, int shard, int num_shards)
{
    int kept = 0;
    for (int i = 0; i < list->count; i++) {
        if (i % num_shards == shard) {
            list->texts[kept++] = list->texts[i];
        } else {
            free(list->texts[i]);
        }
    }
    list->count = kept;
}

void pc_cubin_id(const char *text, char *buf, size_t cap)
{
    frost__kernel_key key;
    if (frost__key_parse(text, &key) != FROST_OK) {
        snprintf(buf, cap, "%s", text);
        return;
    }
    size_t used = (size_t)snprintf(buf, cap, "%s", key.source);
    for (int i = 0; i < key.num_defines && used < cap; i++) {
        used += (size_t)snprintf(buf + used, cap - used, " %s", key.defines[i]);
    }
}

/* ------------------------------------------------------------------------------------ */
/* The cover                                                                             */
/* ------------------------------------------------------------------------------------ */
typedef struct key_shape {
    char *class_name; /* source:entry, flags, NAME=# for numeric defines */
    int index;        /* in the list */
    int num_values;
    long values[FROST__KEY_MAX_DEFINES]; /* the numeric defines' values, in key order */
} key_shape;

/* 1 and *value when text is an optional '-' and decimal digits. */
static int integer_value(const char *text, long *value)
{
    const char *p = text + (*text == '-');
    if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 15) {
        return 0;
    }
    *value = strtol(text, NULL, 10);
    return 1;
}

static int describe_shape(const char *text, int index, key_shape *shape)
{
    memset(shape, 0, sizeof *shape);
    shape->index = index;
    frost__kernel_key key;
    frost__buf name = {0};
    if (frost__key_parse(text, &key) != FROST_OK) {
        frost__buf_printf(&name, "%s", text); /* a class of its own */
    } else {
        frost__buf_printf(&name, "%s:%s", key.source, key.entry);
        for (int i = 0; i < key.num_defines; i++) {
            const char *eq = strchr(key.defines[i], '=');
            long value;
            if (eq && integer_value(eq + 1, &value)) {
                frost__buf_printf(&name, " %.*s=#", (int)(eq - key.defines[i]), key.defines[i]);
                shape->values[shape->num_values++] = value;
            } else {
                frost__buf_printf(&name, " %s", key.defines[i]);
            }
        }
    }
    shape->class_name = name.oom ? NULL : strdup(frost__buf_str(&name));
    frost__buf_free(&name);
    return shape->class_name != NULL;
}

static int by_class_then_index(const void *a, const void *b)
{
    const key_shape *x = a, *y = b;
    int c = strcmp(x->class_name, y->class_name);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int compare_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The marked values of numeric define `slot` over shapes[0..n), into marks; returns how
 * many (distinct).  scratch holds n longs. */
static int marked_values(const key_shape *shapes, int n, int slot, long *scratch, long marks[MAX_MARKS])
{
    for (int i = 0; i < n; i++) {
        scratch[i] = shapes[i].values[slot];
    }
    qsort(scratch, (size_t)n, sizeof *scratch, compare_long);
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        if (distinct == 0 || scratch[distinct - 1] != scratch[i]) {
            scratch[distinct++] = scratch[i];
        }
    }
    long wanted[MAX_MARKS] = {scratch[0], scratch[distinct - 1], scratch[(distinct - 1) / 2]};
    int count = 0;
    for (int w = 0; w < MAX_MARKS; w++) {
        int seen = 0;
        for (int m = 0; m < count; m++) {
            seen |= marks[m] == wanted[w];
        }
        if (!seen) {
            marks[count++] = wanted[w];
        }
    }
    return count;
}

/* Greedy cover of one class shapes[0..n) (sorted by index); sets keep[index]. */
static void cover_class(const key_shape *shapes, int n, long *scratch, unsigned char *keep)
{
    int slots = shapes[0].num_values;
    long marks[FROST__KEY_MAX_DEFINES][MAX_MARKS];
    int num_marks[FROST__KEY_MAX_DEFINES];
    unsigned char hit[FROST__KEY_MAX_DEFINES][MAX_MARKS] = {{0}};
    for (int s = 0; s < slots; s++) {
        num_marks[s] = marked_values(shapes, n, s, scratch, marks[s]);
    }
    keep[shapes[0].index] |= slots == 0; /* nothing numeric: the class is one key */
    for (;;) {
        int best = -1, best_hits = 0, best_ends = 0;
        for (int i = 0; i < n; i++) {
            int hits = 0, ends = 0;
            for (int s = 0; s < slots; s++) {
                for (int m = 0; m < num_marks[s]; m++) {
                    hits += !hit[s][m] && shapes[i].values[s] == marks[s][m];
                }
                /* marks[s][0] is the smallest value, marks[s][1] (if any) the largest */
                ends += shapes[i].values[s] == marks[s][0] ||
                        (num_marks[s] > 1 && shapes[i].values[s] == marks[s][1]);
            }
            if (hits > best_hits || (hits > 0 && hits == best_hits && ends > best_ends)) {
                best = i, best_hits = hits, best_ends = ends;
            }
        }
        if (best < 0) {
            return;
        }
        keep[shapes[best].index] = 1;
        for (int s = 0; s < slots; s++) {
            for (int m = 0; m < num_marks[s]; m++) {
                hit[s][m] |= shapes[best].values[s] == marks[s][m];
            }
        }
    }
}

int pc_cover(pc_key_list *list)
{
    int n = list->count, ok = 1;
    key_shape *shapes = calloc((size_t)(n ? n : 1), sizeof *shapes);
    long *scratch = malloc(sizeof *scratch * (size_t)(n ? n : 1));
    unsigned char *keep = calloc((size_t)(n ? n : 1), 1);
    for (int i = 0; ok && shapes && i < n; i++) {
        ok = describe_shape(list->texts[i], i, &shapes[i]);
    }
    if (!shapes || !scratch || !keep || !ok) {
        ok = 0;
    } else {
        qsort(shapes, (size_t)n, sizeof *shapes, by_class_then_index);
        for (int start = 0, end; start < n; start = end) {
            end = start + 1;
            while (end < n && strcmp(shapes[end].class_name, shapes[start].class_name) == 0) {
                end++;
            }
            cover_class(shapes + start, end - start, scratch, keep);
        }
        int kept = 0;
        for (int i = 0; i < n; i++) {
            if (keep[i]) {
                list->texts[kept++] = list->texts[i];
            } else {
                free(list->texts[i]);
            }
        }
        list->count = kept;
    }
    for (int i = 0; shapes && i < n; i++) {
        free(shapes[i].class_name);
    }
    free(shapes);
    free(scratch);
    free(keep);
    return ok;
}
