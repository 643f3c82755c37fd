/*
 * frost-precompile — fills the kernel cache ahead of time, with no GPU.
 *
 *     frost-precompile --arch sm_90a [--arch sm_80 ...] [--list FILE] [KEY ...]
 *                      [--selectors LIST [--equal-dims]] [--cover] [--shard I/N]
 *                      [-j N] [--report [--no-spills]] [--print]
 *
 * Which keys.  Each KEY is a kernel key in its printable form, one shell argument per key:
 *     'src/ops/sdpa/sdpa_fwd.cu:sdpa_fwd_kernel DTYPE_BF16 D_QK=128 D_V=128 ...'
 * A list file holds one key per line; '#' starts a comment, blank lines are skipped, and
 * "-" reads the list from standard input.  --selectors sdpa_fwd,sdpa_bwd,norm,cnorm (or
 * all) adds every key those engines' selectors can choose for each arch, --equal-dims
 * keeps only SDPA keys with d_qk = d_v.  Repeated keys are compiled once.  --cover thins
 * the list to a covering subset and --shard I/N keeps every N-th key from the I-th; both
 * are explained in precompile_select.c.  --print writes the final list to stdout (for a
 * --list file) and compiles nothing.
 *
 * Compiling.  Every key is compiled for every --arch with NVRTC into the cache that the
 * library itself uses ($FROST_CACHE_DIR, else $XDG_CACHE_HOME/frost, else ~/.cache/frost),
 * so a later process built with enforce_precompiled finds them; keys already cached are
 * not compiled again.  -j N runs N compiles at once on N threads.  That is safe: each
 * compile owns its NVRTC program (NVRTC allows concurrent calls on distinct programs), the
 * loaders run under pthread_once, the last-error string is thread-local, and the disk
 * cache serialises writers of one key with a per-key flock, which also separates threads
 * of one process because each open() of the lock file is its own open file description.
 * Keys that differ only in the entry point share one cubin, so one thread handles them
 * together and the later ones are cache hits.
 *
 * Progress goes to stderr, one line per key and arch as it finishes, with the time spent
 * and an estimate of the time left:
 *     [3/40] sm_90a src/ops/sdpa/sdpa_fwd.cu:sdpa_fwd_kernel ... compiled (1.20 s) 0:04, ~0:50 left
 * --report also prints, on stdout, what ptxas says about each entry point (registers,
 * spill stores and loads, stack frame, static shared memory); this compiles each cubin a
 * second time with ptxas in verbose mode, needs no GPU either, and reads the sibling entry
 * points' lines from the same log.  A summary line follows: the most registers, and how
 * many keys spill, each named.  --no-spills (implies --report) makes a spill a failure.
 *
 * Exit status: 0 when every key compiled (or was cached), 1 when any failed (or spilled
 * under --no-spills, or gave no report), 2 for a usage error, 3 when NVRTC cannot be
 * loaded (nothing was tried; CI scripts skip on it).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frost/frost.h"
#include "precompile_select.h"
#include "runtime/runtime.h"

#define MAX_ARCHS 8
#define MAX_THREADS 256
#define EXIT_NO_NVRTC 3

typedef struct options {
    const char *archs[MAX_ARCHS];
    int num_archs;
    pc_key_list explicit_keys;
    unsigned selectors;
    int equal_dims, cover, print, report, no_spills;
    int shard, num_shards, threads;
} options;

/* One key for one arch: what happened to it. */
typedef struct job {
    int arch;
    const char *text;
    int compiled_ok, report_ok;
    frost__ptxas_info info;
} job;

/* Keys of one arch that share a cubin: jobs[first .. first+count) after sorting. */
typedef struct cubin_group {
    int first, count;
} cubin_group;

typedef struct run_state {
    const options *opt;
    job *jobs;
    int *order;             /* job indices grouped by cubin */
    cubin_group *groups;
    int num_jobs, num_groups;
    pthread_mutex_t lock;   /* guards the fields below and all output */
    int next_group, done;
    double start;
} run_state;

static void usage(FILE *to)
{
    fprintf(to,
            "usage: frost-precompile --arch ARCH [--arch ARCH ...] [--list FILE] [KEY ...]\n"
            "                        [--selectors LIST [--equal-dims]] [--cover] [--shard I/N]\n"
            "                        [-j N] [--report [--no-spills]] [--print]\n"
            "  --arch ARCH       target such as sm_90a (Hopper) or sm_80; may be repeated\n"
            "  --list FILE       keys, one per line ('#' comments; '-' reads stdin)\n"
            "  --selectors LIST  every key the engines can choose: sdpa_fwd,sdpa_bwd,norm,cnorm or all\n"
            "  --equal-dims      SDPA keys with d_qk = d_v only\n"
            "  --cover           a covering subset (the rule: tools/precompile_select.c)\n"
            "  --shard I/N       only keys whose index is I modulo N\n"
            "  -j N              compile N keys at once (threads)\n"
            "  --report          print registers and spills per key (stdout) and a summary\n"
            "  --no-spills       fail when any key spills (implies --report)\n"
            "  --print           print the keys (for --list) and compile nothing; without\n"
            "                    --arch the keys are listed for sm_90a\n"
            "  KEY               a printable kernel key, e.g.\n"
            "                    'src/ops/testing/axpy.cu:frost_test_axpy SCALE=2.0f'\n"
            "The cache is $FROST_CACHE_DIR, else $XDG_CACHE_HOME/frost, else ~/.cache/frost.\n");
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* 1 and *value for a whole decimal number in [low, high]. */
static int parse_int(const char *text, int low, int high, int *value)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < low || v > high) {
        return 0;
    }
    *value = (int)v;
    return 1;
}

/* Parses argv into opt; returns 0 (ok), 2 (usage error) or -1 (--help printed). */
static int parse_args(int argc, char **argv, options *opt)
{
    static const char *const valued[] = {"--arch", "--list", "--selectors", "--shard", "-j", "--jobs"};
    int status = 0;
    opt->threads = 1;
    opt->num_shards = 1;
    for (int i = 1; i < argc && status == 0; i++) {
        const char *a = argv[i];
        for (size_t v = 0; v < sizeof valued / sizeof valued[0]; v++) {
            if (strcmp(a, valued[v]) == 0 && i + 1 >= argc) {
                fprintf(stderr, "frost-precompile: %s needs a value\n", a);
                return 2;
            }
        }
        if (strcmp(a, "--arch") == 0) {
            if (opt->num_archs == MAX_ARCHS) {
                fprintf(stderr, "frost-precompile: at most %d --arch options\n", MAX_ARCHS);
                status = 2;
            } else {
                opt->archs[opt->num_archs++] = argv[++i];
            }
        } else if (strcmp(a, "--list") == 0) {
            status = pc_list_read(argv[++i], &opt->explicit_keys) ? 0 : 2;
        } else if (strcmp(a, "--selectors") == 0) {
            status = pc_selectors_parse(argv[++i], &opt->selectors) ? 0 : 2;
        } else if (strcmp(a, "--shard") == 0) {
            const char *value = argv[++i], *slash = strchr(value, '/');
            char first[32];
            size_t len = slash ? (size_t)(slash - value) : 0;
            int ok = slash && len > 0 && len < sizeof first;
            if (ok) {
                memcpy(first, value, len);
                first[len] = '\0';
                ok = parse_int(slash + 1, 1, 1 << 20, &opt->num_shards) &&
                     parse_int(first, 0, opt->num_shards - 1, &opt->shard);
            }
            if (!ok) {
                fprintf(stderr, "frost-precompile: --shard wants I/N with 0 <= I < N, not \"%s\"\n", value);
                status = 2;
            }
        } else if (strcmp(a, "-j") == 0 || strcmp(a, "--jobs") == 0 || strncmp(a, "-j", 2) == 0) {
            const char *value = a[2] && a[1] == 'j' ? a + 2 : argv[++i];
            if (!parse_int(value, 1, MAX_THREADS, &opt->threads)) {
                fprintf(stderr, "frost-precompile: -j wants a thread count from 1 to %d, not \"%s\"\n", MAX_THREADS,
                        value);
                status = 2;
            }
        } else if (strcmp(a, "--equal-dims") == 0) {
            opt->equal_dims = 1;
        } else if (strcmp(a, "--cover") == 0) {
            opt->cover = 1;
        } else if (strcmp(a, "--print") == 0) {
            opt->print = 1;
        } else if (strcmp(a, "--report") == 0) {
            opt->report = 1;
        } else if (strcmp(a, "--no-spills") == 0) {
            opt->report = opt->no_spills = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return -1;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "frost-precompile: unknown option %s\n", a);
            status = 2;
        } else if (!pc_list_add(&opt->explicit_keys, a)) {
            status = 2;
        }
    }
    if (status == 0 && opt->num_archs == 0 && !opt->print) {
        fprintf(stderr, "frost-precompile: --arch is required\n");
        status = 2;
    }
    if (status == 0 && opt->explicit_keys.count == 0 && !opt->selectors) {
        fprintf(stderr, "frost-precompile: no keys given (KEY, --list or --selectors)\n");
        status = 2;
    }
    return status;
}

/* Builds the key list of one arch: given keys, selected keys, no repeats, cover, shard.
 * 0 when out of memory. */
static int keys_for_arch(const options *opt, const char *arch, pc_key_list *out)
{
    if (!pc_list_append(out, &opt->explicit_keys) ||
        !pc_select(out, opt->selectors, arch, opt->equal_dims, stderr)) {
        return 0;
    }
    pc_canonicalize(out);
    pc_dedup(out);
    fprintf(stderr, "frost-precompile: %s: %d keys in the full set", arch, out->count);
    if (opt->cover) {
        if (!pc_cover(out)) {
            return 0;
        }
        fprintf(stderr, ", %d in the cover", out->count);
    }
    if (opt->num_shards > 1) {
        pc_shard(out, opt->shard, opt->num_shards);
        fprintf(stderr, ", %d in shard %d/%d", out->count, opt->shard, opt->num_shards);
    }
    fprintf(stderr, "\n");
    return 1;
}

/* --print: the union over the archs, in order, each key once. */
static void print_keys(const options *opt, pc_key_list *lists, int num_lists)
{
    pc_key_list all = {0};
    for (int a = 0; a < num_lists; a++) {
        pc_list_append(&all, &lists[a]);
    }
    pc_dedup(&all);
    printf("# frost-precompile --print: %d keys for", all.count);
    for (int a = 0; a < num_lists; a++) {
        printf(" %s", opt->num_archs ? opt->archs[a] : "sm_90a (no --arch given)");
    }
    printf("%s%s\n", opt->cover ? ", cover" : "", opt->num_shards > 1 ? ", one shard" : "");
    for (int i = 0; i < all.count; i++) {
        printf("%s\n", all.texts[i]);
    }
    pc_list_free(&all);
}

/* ------------------------------------------------------------------------------------ */
/* The report                                                                            */
/* ------------------------------------------------------------------------------------ */
/* The ptxas -v lines of `entry` in a log that frost__compile_report returned for a sibling
 * entry point of the same cubin (the runtime parses only the entry it was asked for). */
static int entry_report(const char *log, const char *entry, frost__ptxas_info *info)
{
    memset(info, 0, sizeof *info);
    info->registers = -1;
    return frost__ptxas_parse(log, entry, info);
}

static int spills(const frost__ptxas_info *info)
{
    return info->spill_store_bytes > 0 || info->spill_load_bytes > 0;
}

/* Prints one report row (caller holds the lock). */
static void print_report_row(const options *opt, const job *j, const char *why)
{
    const char *arch = opt->archs[j->arch];
    if (j->report_ok) {
        printf("%-7s %9d %10d %10d %9d %9d  %s%s\n", arch, j->info.registers, j->info.spill_store_bytes,
               j->info.spill_load_bytes, j->info.stack_bytes, j->info.static_smem, j->text,
               spills(&j->info) ? "  <- spills" : "");
    } else {
        printf("%-7s %9s %10s %10s %9s %9s  %s  (no report: %s)\n", arch, "?", "?", "?", "?", "?", j->text, why);
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------------------------ */
/* Compiling                                                                             */
/* ------------------------------------------------------------------------------------ */
/* Compiles one key; prints its progress line.  Returns 1 on success. */
static int compile_one(run_state *st, job *j, frost__kernel_key *key)
{
    const char *arch = st->opt->archs[j->arch];
    frost__buf line = {0};
    frost_status s = frost__key_parse(j->text, key);
    double start = seconds_now();
    frost__compile_result result;
    memset(&result, 0, sizeof result);
    if (s != FROST_OK) {
        frost__buf_printf(&line, "bad key\n  %s", frost_last_error());
    } else if ((s = frost__compile(key, arch, 0, &result)) != FROST_OK) {
        frost__buf_printf(&line, "FAILED (%s)\n  %s", frost_status_name(s), frost_last_error());
    } else if (result.from_cache) {
        frost__buf_printf(&line, "cached");
    } else {
        frost__buf_printf(&line, "compiled (%.2f s)", seconds_now() - start);
    }
    free(result.cubin);
    frost__buf_free(&result.log);
    pthread_mutex_lock(&st->lock);
    int done = ++st->done;
    double elapsed = seconds_now() - st->start, left = elapsed * (st->num_jobs - done) / done;
    const char *text = frost__buf_str(&line), *newline = strchr(text, '\n');
    int head = newline ? (int)(newline - text) : (int)strlen(text);
    fprintf(stderr, "[%d/%d] %s %s ... %.*s %d:%02d, ~%d:%02d left%s\n", done, st->num_jobs, arch, j->text, head,
            text, (int)elapsed / 60, (int)elapsed % 60, (int)left / 60, (int)left % 60, newline ? newline : "");
    pthread_mutex_unlock(&st->lock);
    frost__buf_free(&line);
    return s == FROST_OK;
}

/* One cubin: compile each of its keys, then (with --report) one verbose compile whose log
 * answers for every entry point. */
static void run_group(run_state *st, const cubin_group *g)
{
    frost__kernel_key key;
    int first_ok = -1;
    for (int k = 0; k < g->count; k++) {
        job *j = &st->jobs[st->order[g->first + k]];
        j->compiled_ok = compile_one(st, j, &key);
        first_ok = first_ok < 0 && j->compiled_ok ? k : first_ok;
    }
    if (!st->opt->report || first_ok < 0) {
        return;
    }
    job *lead = &st->jobs[st->order[g->first + first_ok]];
    frost__buf log = {0};
    frost__key_parse(lead->text, &key);
    frost_status s = frost__compile_report(&key, st->opt->archs[lead->arch], &lead->info, &log);
    char why[256];
    snprintf(why, sizeof why, "%s", s == FROST_OK ? "ptxas reported nothing for this entry" : frost_last_error());
    for (int k = first_ok; k < g->count; k++) {
        job *j = &st->jobs[st->order[g->first + k]];
        if (!j->compiled_ok) {
            continue;
        }
        if (j == lead) {
            j->report_ok = s == FROST_OK;
        } else {
            frost__key_parse(j->text, &key);
            j->report_ok = entry_report(frost__buf_str(&log), key.entry, &j->info);
        }
        pthread_mutex_lock(&st->lock);
        print_report_row(st->opt, j, why);
        pthread_mutex_unlock(&st->lock);
    }
    frost__buf_free(&log);
}

static void *worker(void *arg)
{
    run_state *st = arg;
    for (;;) {
        pthread_mutex_lock(&st->lock);
        int g = st->next_group < st->num_groups ? st->next_group++ : -1;
        pthread_mutex_unlock(&st->lock);
        if (g < 0) {
            return NULL;
        }
        run_group(st, &st->groups[g]);
    }
}

typedef struct cubin_slot {
    char id[1024]; /* arch index, then pc_cubin_id */
    int job;
} cubin_slot;

static int by_id_then_job(const void *a, const void *b)
{
    const cubin_slot *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->job > y->job) - (x->job < y->job);
}

static const int *group_sort_order; /* for by_first_job; set only around its qsort */

static int by_first_job(const void *a, const void *b)
{
    int x = group_sort_order[((const cubin_group *)a)->first];
    int y = group_sort_order[((const cubin_group *)b)->first];
    return (x > y) - (x < y);
}

/* Groups the jobs by arch and cubin; groups run in the order of their first job (list
 * order, arch-major).  0 when out of memory. */
static int make_groups(run_state *st)
{
    cubin_slot *slots = malloc(sizeof *slots * (size_t)st->num_jobs);
    st->order = malloc(sizeof *st->order * (size_t)st->num_jobs);
    st->groups = malloc(sizeof *st->groups * (size_t)st->num_jobs);
    if (!slots || !st->order || !st->groups) {
        free(slots);
        return 0;
    }
    for (int i = 0; i < st->num_jobs; i++) {
        int used = snprintf(slots[i].id, sizeof slots[i].id, "%d ", st->jobs[i].arch);
        pc_cubin_id(st->jobs[i].text, slots[i].id + used, sizeof slots[i].id - (size_t)used);
        slots[i].job = i;
    }
    qsort(slots, (size_t)st->num_jobs, sizeof *slots, by_id_then_job);
    st->num_groups = 0;
    for (int i = 0; i < st->num_jobs; i++) {
        st->order[i] = slots[i].job;
        if (i == 0 || strcmp(slots[i].id, slots[i - 1].id) != 0) {
            st->groups[st->num_groups++] = (cubin_group){i, 0};
        }
        st->groups[st->num_groups - 1].count++;
    }
    group_sort_order = st->order;
    qsort(st->groups, (size_t)st->num_groups, sizeof *st->groups, by_first_job);
    group_sort_order = NULL;
    free(slots);
    return 1;
}

/* The summary of --report; returns the number of keys that spill. */
static int report_summary(const run_state *st)
{
    const job *widest = NULL;
    int spilling = 0, reported = 0;
    for (int i = 0; i < st->num_jobs; i++) {
        const job *j = &st->jobs[i];
        if (!j->report_ok) {
            continue;
        }
        reported++;
        spilling += spills(&j->info);
        if (!widest || j->info.registers > widest->info.registers) {
            widest = j;
        }
    }
    printf("report: %d of %d keys reported; max registers %d", reported, st->num_jobs,
           widest ? widest->info.registers : 0);
    if (widest) {
        printf(" (%s %s)", st->opt->archs[widest->arch], widest->text);
    }
    printf("; %d key%s with spills\n", spilling, spilling == 1 ? "" : "s");
    for (int i = 0; i < st->num_jobs; i++) {
        const job *j = &st->jobs[i];
        if (j->report_ok && spills(&j->info)) {
            printf("spills: %s %s (%d B stores, %d B loads, %d registers)\n", st->opt->archs[j->arch], j->text,
                   j->info.spill_store_bytes, j->info.spill_load_bytes, j->info.registers);
        }
    }
    return spilling;
}

/* Compiles every job; returns the exit status. */
static int compile_all(const options *opt, pc_key_list *lists)
{
    run_state st = {.opt = opt, .start = seconds_now()};
    pthread_mutex_init(&st.lock, NULL);
    for (int a = 0; a < opt->num_archs; a++) {
        st.num_jobs += lists[a].count;
    }
    st.jobs = calloc((size_t)(st.num_jobs ? st.num_jobs : 1), sizeof *st.jobs);
    for (int a = 0, n = 0; st.jobs && a < opt->num_archs; a++) {
        for (int k = 0; k < lists[a].count; k++, n++) {
            st.jobs[n] = (job){.arch = a, .text = lists[a].texts[k]};
        }
    }
    if (!st.jobs || (st.num_jobs > 0 && !make_groups(&st))) {
        fprintf(stderr, "frost-precompile: out of memory\n");
        free(st.jobs);
        free(st.order);
        free(st.groups);
        return 1;
    }
    frost__buf where = {0};
    frost__cache_describe(&where);
    int nvrtc = frost__nvrtc_version();
    int threads = opt->threads < st.num_groups ? opt->threads : st.num_groups > 0 ? st.num_groups : 1;
    fprintf(stderr, "frost-precompile: %d keys (%d cubins) over %d arch(s), %d thread%s, NVRTC %d.%d, cache %s\n",
            st.num_jobs, st.num_groups, opt->num_archs, threads, threads == 1 ? "" : "s", nvrtc / 1000,
            nvrtc % 1000 / 10, frost__buf_str(&where));
    if (strncmp(frost__buf_str(&where), "off", 3) == 0 || strstr(frost__buf_str(&where), "(readonly)")) {
        fprintf(stderr, "frost-precompile: warning: the cache is not writable in this mode; nothing will be "
                        "stored (unset FROST_CACHE)\n");
    }
    frost__buf_free(&where);
    if (opt->report) {
        printf("%-7s %9s %10s %10s %9s %9s  %s\n", "arch", "registers", "spill_st_B", "spill_ld_B", "stack_B",
               "smem_B", "key");
    }
    pthread_t ids[MAX_THREADS];
    int started = 0;
    for (int t = 1; t < threads; t++) {
        started += pthread_create(&ids[started], NULL, worker, &st) == 0;
    }
    worker(&st); /* this thread works too; with -j 1 it is the only one */
    for (int t = 0; t < started; t++) {
        pthread_join(ids[t], NULL);
    }
    int failed = 0, unreported = 0;
    for (int i = 0; i < st.num_jobs; i++) {
        failed += !st.jobs[i].compiled_ok;
        unreported += opt->report && st.jobs[i].compiled_ok && !st.jobs[i].report_ok;
    }
    int spilling = opt->report ? report_summary(&st) : 0;
    fprintf(stderr, "frost-precompile: %d of %d done, %d failed in %.1f s\n", st.num_jobs - failed, st.num_jobs,
            failed, seconds_now() - st.start);
    if (unreported) {
        fprintf(stderr, "frost-precompile: %d key%s gave no ptxas report\n", unreported, unreported == 1 ? "" : "s");
    }
    if (opt->no_spills && spilling) {
        fprintf(stderr, "frost-precompile: %d key%s spill (--no-spills)\n", spilling, spilling == 1 ? "" : "s");
    }
    free(st.jobs);
    free(st.order);
    free(st.groups);
    pthread_mutex_destroy(&st.lock);
    return failed || unreported || (opt->no_spills && spilling) ? 1 : 0;
}

int main(int argc, char **argv)
{
    options opt;
    memset(&opt, 0, sizeof opt);
    int status = parse_args(argc, argv, &opt);
    if (status != 0) {
        if (status > 0) {
            usage(stderr);
        }
        pc_list_free(&opt.explicit_keys);
        return status > 0 ? status : 0;
    }
    int num_lists = opt.num_archs ? opt.num_archs : 1;
    pc_key_list lists[MAX_ARCHS];
    memset(lists, 0, sizeof lists);
    for (int a = 0; a < num_lists && status == 0; a++) {
        if (!keys_for_arch(&opt, opt.num_archs ? opt.archs[a] : "sm_90a", &lists[a])) {
            fprintf(stderr, "frost-precompile: out of memory listing the keys\n");
            status = 1;
        }
    }
    if (status == 0 && opt.print) {
        print_keys(&opt, lists, num_lists);
    } else if (status == 0 && frost__nvrtc_load() != FROST_OK) {
        fprintf(stderr, "frost-precompile: %s\n", frost_last_error());
        status = EXIT_NO_NVRTC;
    } else if (status == 0) {
        status = compile_all(&opt, lists);
    }
    for (int a = 0; a < num_lists; a++) {
        pc_list_free(&lists[a]);
    }
    pc_list_free(&opt.explicit_keys);
    return status;
}
