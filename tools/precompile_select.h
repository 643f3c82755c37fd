/*
 * precompile_select.h — choosing which kernel keys frost-precompile compiles: the keys the
 * engines' selectors can pick (--selectors), without duplicates, thinned to a covering
 * subset (--cover) and split across machines (--shard).  Private to frost-precompile; the
 * rules themselves are explained at the top of precompile_select.c.
 *
 * A key travels as its printable text ("src/ops/sdpa/sdpa_fwd.cu:sdpa_fwd_kernel
 * DTYPE_F16 D_QK=64 ..."), which is what list files hold and what --print writes.
 */
#ifndef FROST_TOOLS_PRECOMPILE_SELECT_H
#define FROST_TOOLS_PRECOMPILE_SELECT_H

#include <stddef.h>
#include <stdio.h>

/* Selector bits for --selectors. */
enum {
    PC_SEL_SDPA_FWD = 1 << 0,
    PC_SEL_SDPA_BWD = 1 << 1,
    PC_SEL_NORM = 1 << 2,
    PC_SEL_CNORM = 1 << 3,
    PC_SEL_ALL = (1 << 4) - 1,
};

/* An ordered list of owned key texts. */
typedef struct pc_key_list {
    char **texts;
    int count, cap;
} pc_key_list;

/* Appends a copy of text; 0 when out of memory. */
int pc_list_add(pc_key_list *list, const char *text);
/* Appends copies of every key of src. */
int pc_list_append(pc_key_list *list, const pc_key_list *src);
void pc_list_free(pc_key_list *list);
/* Appends the keys of a list file: one per line, '#' starts a comment, blank lines are
 * skipped, "-" is standard input.  0 (with a message on stderr) when it cannot be read. */
int pc_list_read(const char *path, pc_key_list *keys);

/* Parses "sdpa_fwd,sdpa_bwd,norm,cnorm,all" into selector bits (ORed into *mask).
 * 0 and a message on stderr for an unknown name. */
int pc_selectors_parse(const char *names, unsigned *mask);

/* Appends the keys the selected engines can choose on arch (sdpa_bwd's tiles depend on
 * the arch's shared-memory tier), in the engines' order.  equal_dims_only keeps SDPA keys
 * with d_qk = d_v.  Writes "selector: N keys" lines to `notes` (stderr or NULL).  0 when
 * out of memory. */
int pc_select(pc_key_list *out, unsigned mask, const char *arch, int equal_dims_only, FILE *notes);

/* Rewrites every key that parses into its canonical printable form, so that the same key
 * spelled with other spacing is recognised as a duplicate; keys that do not parse stay as
 * given (they fail later with the parser's message). */
void pc_canonicalize(pc_key_list *list);

/* Removes repeated keys, keeping each first occurrence and the order. */
void pc_dedup(pc_key_list *list);

/* Replaces list by its covering subset (the rule is in precompile_select.c), in the
 * original order.  0 when out of memory (list unchanged). */
int pc_cover(pc_key_list *list);

/* Keeps the keys whose index is congruent to shard modulo num_shards. */
void pc_shard(pc_key_list *list, int shard, int num_shards);

/* The key text without its entry point ("source DEFINES"): keys with equal cubin ids share
 * one cubin (the cache key ignores the entry).  Writes into buf (cap bytes). */
void pc_cubin_id(const char *text, char *buf, size_t cap);

#endif /* FROST_TOOLS_PRECOMPILE_SELECT_H */
