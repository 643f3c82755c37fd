/*
 * test_runtime_device.c — devices, loaded kernels and launches (src/runtime/device.c,
 * loader.c).
 *
 * Runs everywhere.  Without a CUDA driver it checks the refusal: frost__device_open
 * returns NO_DEVICE naming libcuda.so.1, and says the same thing again on a second call
 * (the once-only load replays its outcome).  In forked children (the load happens once
 * per process) it checks FROST_NVRTC_PATH: a bad path is NO_DEVICE naming that path, a
 * good one is used as given.
 *
 * With a GPU it also runs the test kernel end to end: properties, kernel_get (cached in
 * process: the same pointer twice), a launch of y = SCALE*a*x + y checked bit for bit
 * against fmaf on the host, a launch with more than 48 KiB of dynamic shared memory and
 * one asking for more than the device has (refused), a second entry point of the same
 * source, memset, events, and enforce_precompiled.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/loader.h"
#include "runtime/runtime.h"
#include "test_util.h"

#define AXPY "src/ops/testing/axpy.cu"

/* Runs fn in a child process; returns its exit status (0 = all checks passed). */
static int in_child(int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        _exit(fn());
    }
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 100;
}

static int child_bad_nvrtc_path(void)
{
    setenv("FROST_NVRTC_PATH", "/nonexistent/libnvrtc.so.99", 1);
    int bad = 0;
    bad |= frost__nvrtc_load() != FROST_NO_DEVICE;
    bad |= strstr(frost_last_error(), "/nonexistent/libnvrtc.so.99") == NULL;
    bad |= frost__nvrtc_load() != FROST_NO_DEVICE; /* replayed */
    bad |= strstr(frost_last_error(), "/nonexistent/libnvrtc.so.99") == NULL;
    bad |= frost__nvrtc_version() != 0;
    frost__device *dev = NULL;
    bad |= frost__device_open(0, &dev) != FROST_NO_DEVICE || dev != NULL;
    if (bad) {
        fprintf(stderr, "bad FROST_NVRTC_PATH: %s\n", frost_last_error());
    }
    return bad;
}

static int child_explicit_nvrtc_path(void)
{
    const char *path = "/usr/local/cuda/lib64/libnvrtc.so.13";
    if (access(path, R_OK) != 0) {
        return 0; /* nothing to check on this machine */
    }
    setenv("FROST_NVRTC_PATH", path, 1);
    int bad = frost__nvrtc_load() != FROST_OK || strcmp(frost__nvrtc_library(), path) != 0;
    if (bad) {
        fprintf(stderr, "explicit FROST_NVRTC_PATH: %s (library \"%s\")\n", frost_last_error(),
                frost__nvrtc_library());
    }
    return bad;
}

static void case_nvrtc_path(void)
{
    TU_CHECK(in_child(child_bad_nvrtc_path) == 0);
    TU_CHECK(in_child(child_explicit_nvrtc_path) == 0);
}

/* ---- with a GPU ------------------------------------------------------------------------- */
static void check_properties(const frost__device *dev)
{
    TU_CHECK(dev->cc_major >= 7);
    char arch[16];
    snprintf(arch, sizeof arch, dev->cc_major == 9 && dev->cc_minor == 0 ? "sm_%d%da" : "sm_%d%d", dev->cc_major,
             dev->cc_minor);
    TU_CHECK(strcmp(dev->arch, arch) == 0);
    TU_CHECK(dev->sm_count > 0);
    TU_CHECK(dev->smem_per_block_optin >= 48 * 1024);
    TU_CHECK(dev->smem_per_sm >= dev->smem_per_block_optin);
    TU_CHECK(dev->l2_bytes > 0 && dev->global_mem_bytes > 0);
    TU_CHECK(dev->name[0] != '\0');
    printf("device: %s, %s, %d SMs\n", dev->name, dev->arch, dev->sm_count);
}

static void run_axpy(frost__device *dev, frost__kernel *k, size_t dyn_smem, const float *x, float *y, int n,
                     float a)
{
    void *dx = NULL, *dy = NULL;
    size_t bytes = sizeof(float) * (size_t)n;
    TU_OK(frost__dev_alloc(dev, bytes, &dx));
    TU_OK(frost__dev_alloc(dev, bytes, &dy));
    TU_OK(frost__dev_copy_htod(dev, dx, x, bytes));
    TU_OK(frost__dev_copy_htod(dev, dy, y, bytes));
    frost__launch_dims dims = {{(unsigned)(n + 255) / 256, 1, 1}, {256, 1, 1}, dyn_smem, 0};
    void *args[] = {&a, &dx, &dy, &n};
    TU_OK(frost__launch(dev, k, &dims, args, NULL));
    TU_OK(frost__dev_synchronize(dev));
    TU_OK(frost__dev_copy_dtoh(dev, y, dy, bytes));
    frost__dev_free(dev, dx);
    frost__dev_free(dev, dy);
}

static void case_gpu_axpy(frost__device *dev)
{
    check_properties(dev);
    frost__kernel_key key;
    frost__key_init(&key, AXPY, "frost_test_axpy");
    frost__key_define(&key, "SCALE", "2.0f");
    frost__kernel *k = NULL, *again = NULL;
    TU_OK(frost__kernel_get(dev, &key, 0, &k));
    TU_OK(frost__kernel_get(dev, &key, 1, &again)); /* in-process hit: no compile needed */
    TU_CHECK(k != NULL && k == again);
    if (!k) {
        return;
    }
    TU_CHECK(k->attrs.registers > 0 && k->attrs.max_threads >= 256);
    enum { N = 1000 };
    float x[N], y[N], expected[N];
    const float a = 0.75f;
    for (int i = 0; i < N; i++) {
        x[i] = (float)i * 0.01f - 3.0f;
        y[i] = (float)(i % 17) - 8.0f;
        expected[i] = fmaf(2.0f * a, x[i], y[i]);
    }
    run_axpy(dev, k, 0, x, y, N, a);
    TU_CHECK(memcmp(y, expected, sizeof y) == 0);
    /* More than the default 48 KiB of dynamic shared memory (unused by the kernel, but the
     * limit must be raised for the launch to be accepted). */
    size_t big = 64 * 1024;
    if (dev->smem_per_block_optin >= big) {
        for (int i = 0; i < N; i++) {
            expected[i] = fmaf(2.0f * a, x[i], y[i]);
        }
        run_axpy(dev, k, big, x, y, N, a);
        TU_CHECK(memcmp(y, expected, sizeof y) == 0);
        TU_CHECK(k->dyn_smem_set >= big);
    }
    /* More than the device allows is refused with words, before the driver sees it. */
    frost__launch_dims too_much = {{1, 1, 1}, {32, 1, 1}, dev->smem_per_block_optin + 1, 0};
    int zero = 0;
    void *none = NULL;
    void *args[] = {(void *)&a, &none, &none, &zero};
    TU_CHECK_STATUS(frost__launch(dev, k, &too_much, args, NULL), FROST_INTERNAL);
    TU_CHECK(strstr(frost_last_error(), "dynamic shared memory") != NULL);
}

static void case_gpu_fill_memset_events(frost__device *dev)
{
    frost__kernel_key key;
    frost__key_init(&key, AXPY, "frost_test_fill");
    frost__kernel *k = NULL;
    TU_OK(frost__kernel_get(dev, &key, 0, &k));
    enum { N = 300 };
    float y[N];
    void *dy = NULL;
    TU_OK(frost__dev_alloc(dev, sizeof y, &dy));
    TU_OK(frost__dev_memset_async(dev, dy, 0xff, sizeof y, NULL));
    void *start = NULL, *end = NULL;
    TU_OK(frost__event_create(&start));
    TU_OK(frost__event_create(&end));
    TU_OK(frost__event_record(start, NULL));
    float value = 1.5f;
    int n = N - 1; /* the last element keeps the memset pattern */
    void *args[] = {&value, &dy, &n};
    frost__launch_dims dims = {{2, 1, 1}, {256, 1, 1}, 0, 0};
    if (k) {
        TU_OK(frost__launch(dev, k, &dims, args, NULL));
    }
    TU_OK(frost__event_record(end, NULL));
    TU_OK(frost__dev_synchronize(dev));
    float ms = -1;
    TU_OK(frost__event_elapsed_ms(start, end, &ms));
    TU_CHECK(ms >= 0);
    TU_OK(frost__dev_copy_dtoh(dev, y, dy, sizeof y));
    for (int i = 0; i < N - 1; i++) {
        TU_CHECK(y[i] == 1.5f);
    }
    uint32_t last;
    memcpy(&last, &y[N - 1], sizeof last);
    TU_CHECK(last == 0xffffffffu);
    frost__event_destroy(start);
    frost__event_destroy(end);
    frost__dev_free(dev, dy);
    void *none = (void *)1;
    TU_OK(frost__dev_alloc(dev, 0, &none));
    TU_CHECK(none == NULL);
}

static void case_gpu_enforce(frost__device *dev)
{
    frost__kernel_key key;
    frost__key_init(&key, AXPY, "frost_test_axpy");
    frost__key_define(&key, "SCALE", "%.3ff", (double)getpid()); /* new to this cache */
    frost__kernel *k = (frost__kernel *)1;
    TU_CHECK_STATUS(frost__kernel_get(dev, &key, 1, &k), FROST_COMPILE_REQUIRED);
    TU_CHECK(k == NULL);
    TU_OK(frost__kernel_get(dev, &key, 0, &k));
    frost__device *none = NULL;
    TU_CHECK_STATUS(frost__device_open(1000, &none), FROST_NO_DEVICE);
    TU_CHECK(none == NULL);
}

int main(void)
{
    int cases_run = 0;
    tu_set_context("test_runtime_device", 0, cases_run++, "nvrtc_path");
    tu_case_begin();
    case_nvrtc_path();
    tu_case_end();

    frost__device *dev = NULL;
    frost_status s = frost__device_open(0, &dev);
    if (s != FROST_OK) {
        tu_set_context("test_runtime_device", 0, cases_run++, "no_device");
        tu_case_begin();
        char first[1024];
        snprintf(first, sizeof first, "%s", frost_last_error());
        printf("no device: %s: %s\n", frost_status_name(s), first);
        TU_CHECK(s == FROST_NO_DEVICE);
        TU_CHECK(dev == NULL);
        TU_CHECK(first[0] != '\0');
        if (frost__driver_load() != FROST_OK) {
            TU_CHECK(strstr(first, "libcuda.so.1") != NULL || strstr(first, "cuInit") != NULL);
        }
        TU_CHECK_STATUS(frost__device_open(0, &dev), FROST_NO_DEVICE);
        TU_CHECK(strcmp(frost_last_error(), first) == 0); /* the same words again */
        frost__device_close(NULL);
        tu_case_end();
        return tu_finish(cases_run);
    }
    char cache_dir[] = "/tmp/frost-device-test-XXXXXX";
    if (mkdtemp(cache_dir)) {
        setenv("FROST_CACHE_DIR", cache_dir, 1);
    }
    static const struct {
        const char *name;
        void (*run)(frost__device *);
    } cases[] = {
        {"gpu_axpy", case_gpu_axpy},
        {"gpu_fill_memset_events", case_gpu_fill_memset_events},
        {"gpu_enforce", case_gpu_enforce},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tu_set_context("test_runtime_device", 0, cases_run++, cases[i].name);
        tu_case_begin();
        cases[i].run(dev);
        tu_case_end();
    }
    frost__device_close(dev);
    char command[256];
    snprintf(command, sizeof command, "rm -rf '%s'", cache_dir);
    if (system(command) != 0) {
        fprintf(stderr, "could not remove %s\n", cache_dir);
    }
    return tu_finish(cases_run);
}
