// A per-kernel GPU time table for any CUDA program, from CUPTI's activity records (the GPU
// machines have no Nsight Systems): which kernels a training step spends its time in.
//
//   FF_KERNEL_TRACE=out LD_PRELOAD=build/libff_kernel_trace.so build/fivefold train ...
//   mpiexec -n 2 env FF_KERNEL_TRACE=out LD_PRELOAD=... build/fivefold train --mode direct ...
//
// Each process writes out.<pid>.txt when it exits: one line per kernel name (templates
// demangled), with its launches, total and mean GPU time, its share of all kernels' time and the
// last launch's blocks and threads per block, the largest first; copies and memsets are lines of their own ("[memcpy
// DtoD]"). The times are the GPU's start-to-end of each launch as CUPTI records them
// (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: kernels that overlap still overlap), so a line's total can exceed its share
// of the wall time. FF_KERNEL_TRACE_SKIP=S leaves out what starts in the first S seconds after the first record
// (warm-up: GEMM tuning, the first eager steps). Without FF_KERNEL_TRACE the library does nothing.
//
// Records reach the library in buffers that CUPTI flushes every 100 ms and at exit; the last
// ones of a process that the CUDA runtime tears down first can be lost (the table says how many
// records it counted).
//
// FF_KERNEL_TRACE_TIMELINE=N also writes out.<pid>.timeline.tsv: the first N kept records (at most
// 4 M), one per line in order of their start, with start and end in microseconds from the first
// of them, the stream, the CUDA graph it ran in (CUPTI's id, 0: none), blocks, threads per block
// and the name (in a graph's replay CUPTI names the streams its branches ran on: the gradient
// lane's kernels show on streams of their own, bench/results/issue15-s31 run 2). The table says how
// long each kernel runs; the timeline says which ran side by side and what the stream waited for, which is what a
// step of two streams (the gradient lane, docs/ARCHITECTURE.md §9) needs to be read.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // RTLD_DEFAULT
#endif
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_BYTES (8u << 20)
#define MAX_NAMES 4096

typedef struct {
    char *name;
    uint64_t calls, ns;
    int grid, block;  // the last launch's blocks and threads per block (0 for copies)
} entry;

static entry g_entries[MAX_NAMES];
static int g_n;
static uint64_t g_records, g_first_ns, g_skip_ns, g_last_end;
static char g_path[4096], g_timeline_path[4096];

typedef struct {
    uint64_t start, end;
    uint32_t stream, graph;  // graph: CUPTI's id of the CUDA graph it ran in, 0 outside one
    int grid, block, name;   // name: its entry in g_entries
} timeline_rec;
static timeline_rec *g_tl;
static size_t g_tl_n, g_tl_cap;
#define TIMELINE_MAX (4u << 20)
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

// "k_gemm<128, 128, ...>" from "_Z6k_gemmILi128E...", through the C++ runtime's demangler when
// the program has one loaded (cuBLAS brings libstdc++), else the raw name.
static char *pretty(const char *raw) {
    typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
    static demangle_fn dm;
    static int looked;
    if (!looked) {
        dm = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
        looked = 1;
    }
    int status = -1;
    char *d = dm && raw ? dm(raw, NULL, NULL, &status) : NULL;
    if (d && status == 0) return d;
    free(d);
    return strdup(raw ? raw : "(unnamed)");
}

// The record into the timeline while it has room (FF_KERNEL_TRACE_TIMELINE).
static void keep(int name, uint64_t start, uint64_t end, uint32_t stream, uint32_t graph, int grid, int block) {
    if (g_tl_n == g_tl_cap) return;
    g_tl[g_tl_n++] = (timeline_rec){start, end, stream, graph, grid, block, name};
}

// One record into the table (the name is copied; a record the table cannot hold is only counted).
static void add(const char *name, uint64_t start, uint64_t end, uint32_t stream, uint32_t graph, int grid, int block) {
    if (!g_first_ns || start < g_first_ns) g_first_ns = start;
    g_records++;
    if (start < g_first_ns + g_skip_ns) return;
    if (end > g_last_end) g_last_end = end;
    for (int i = 0; i < g_n; i++)
        if (!strcmp(g_entries[i].name, name)) {
            g_entries[i].calls++;
            g_entries[i].ns += end - start;
            g_entries[i].grid = grid, g_entries[i].block = block;
            keep(i, start, end, stream, graph, grid, block);
            return;
        }
    if (g_n == MAX_NAMES || !(g_entries[g_n].name = strdup(name))) return;
    g_entries[g_n].calls = 1;
    g_entries[g_n].ns = end - start;
    g_entries[g_n].grid = grid, g_entries[g_n].block = block;
    keep(g_n, start, end, stream, graph, grid, block);
    g_n++;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUF_BYTES);
    *size = *buffer ? BUF_BYTES : 0;
    *max_records = 0;
}

static const char *copy_kind(uint8_t kind) {
    switch (kind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[memcpy HtoD]";
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[memcpy DtoH]";
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[memcpy DtoD]";
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "[memcpy PtoP]";
        default: return "[memcpy other]";
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&g_mu);
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            char *name = pretty(k->name);
            add(name ? name : "(unnamed)", k->start, k->end, k->streamId, k->graphId, k->gridX * k->gridY * k->gridZ,
                k->blockX * k->blockY * k->blockZ);
            free(name);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            add(copy_kind(m->copyKind), m->start, m->end, m->streamId, m->graphId, 0, 0);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
            add("[memset]", m->start, m->end, m->streamId, m->graphId, 0, 0);
        }
    }
    pthread_mutex_unlock(&g_mu);
    free(buffer);
}

static int by_time(const void *a, const void *b) {
    const entry *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static int by_start(const void *a, const void *b) {
    const timeline_rec *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

// (under g_mu, before the table sorts g_entries: the records name entries by index)
static void write_timeline(void) {
    if (!g_timeline_path[0] || !g_tl) return;
    FILE *f = fopen(g_timeline_path, "w");
    if (!f) {
        fprintf(stderr, "kernel_trace: cannot write %s\n", g_timeline_path);
        return;
    }
    qsort(g_tl, g_tl_n, sizeof g_tl[0], by_start);
    const uint64_t t0 = g_tl_n ? g_tl[0].start : 0;
    fprintf(f, "start_us\tend_us\tstream\tgraph\tblocks\tthreads\tkernel\n");
    for (size_t i = 0; i < g_tl_n; i++)
        fprintf(f, "%.3f\t%.3f\t%u\t%u\t%d\t%d\t%.200s\n", (double)(g_tl[i].start - t0) / 1e3,
                (double)(g_tl[i].end - t0) / 1e3, g_tl[i].stream, g_tl[i].graph, g_tl[i].grid, g_tl[i].block,
                g_entries[g_tl[i].name].name);
    fclose(f);
}

static void write_table(void) {
    if (!g_path[0]) return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&g_mu);
    write_timeline();
    FILE *f = fopen(g_path, "w");
    if (!f) {
        fprintf(stderr, "kernel_trace: cannot write %s\n", g_path);
        pthread_mutex_unlock(&g_mu);
        return;
    }
    qsort(g_entries, (size_t)g_n, sizeof g_entries[0], by_time);
    uint64_t all = 0;
    for (int i = 0; i < g_n; i++) all += g_entries[i].ns;
    const double span = g_last_end > g_first_ns + g_skip_ns ? (double)(g_last_end - g_first_ns - g_skip_ns) : 0.0;
    fprintf(f, "# kernel_trace: %llu records, %.3f ms of GPU time in the table over %.3f ms from the first kept one\n",
            (unsigned long long)g_records, all / 1e6, span / 1e6);
    fprintf(f, "%10s %12s %10s %7s %9s %6s  %s\n", "calls", "total ms", "mean us", "share", "blocks", "thr", "kernel");
    for (int i = 0; i < g_n; i++)
        fprintf(f, "%10llu %12.3f %10.2f %6.1f%% %9d %6d  %.200s\n", (unsigned long long)g_entries[i].calls,
                g_entries[i].ns / 1e6, g_entries[i].ns / 1e3 / (double)g_entries[i].calls,
                all ? 100.0 * (double)g_entries[i].ns / (double)all : 0.0, g_entries[i].grid, g_entries[i].block,
                g_entries[i].name);
    fclose(f);
    pthread_mutex_unlock(&g_mu);
}

__attribute__((constructor)) static void trace_start(void) {
    const char *out = getenv("FF_KERNEL_TRACE");
    if (!out || !out[0]) return;
    const char *skip = getenv("FF_KERNEL_TRACE_SKIP");
    char *end = NULL;
    const double skip_s = skip ? strtod(skip, &end) : 0.0;
    if (skip && (end == skip || *end || !(skip_s >= 0.0 && skip_s <= 1e6))) {  // (NaN fails too)
        fprintf(stderr, "kernel_trace: FF_KERNEL_TRACE_SKIP '%s': expected seconds, 0 to 1e6; no table\n", skip);
        return;
    }
    const char *tl = getenv("FF_KERNEL_TRACE_TIMELINE");
    const long long tl_n = tl ? strtoll(tl, &end, 10) : 0;
    if (tl && (end == tl || *end || tl_n < 1 || tl_n > (long long)TIMELINE_MAX)) {
        fprintf(stderr, "kernel_trace: FF_KERNEL_TRACE_TIMELINE '%s': expected records to keep, 1 to %u; no table\n",
                tl, TIMELINE_MAX);
        return;
    }
    if (tl_n > 0 && !(g_tl = malloc((size_t)tl_n * sizeof *g_tl))) {
        fprintf(stderr, "kernel_trace: no memory for a timeline of %lld records; no table\n", tl_n);
        return;
    }
    g_tl_cap = (size_t)tl_n;
    g_skip_ns = (uint64_t)(skip_s * 1e9);
    snprintf(g_path, sizeof g_path, "%s.%d.txt", out, (int)getpid());
    if (tl_n > 0) snprintf(g_timeline_path, sizeof g_timeline_path, "%s.%d.timeline.tsv", out, (int)getpid());
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "kernel_trace: CUPTI refused the activity API; no table\n");
        g_path[0] = 0;
        return;
    }
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    cuptiActivityFlushPeriod(100);
    atexit(write_table);
}
