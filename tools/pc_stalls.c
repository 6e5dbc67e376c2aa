// PC sampling through CUPTI's PC Sampling API (pc_stalls.h says what and why). CUPTI gives, per
// sampled instruction (kernel, offset), how many samples found a warp there in each stall reason;
// this file keeps those counts in two tables (per kernel, per instruction) and prints them.
//
// CUPTI's protocol, as its documentation gives it: enable on the context, configure (kernel-
// serialized collection, start/stop control, a configuration buffer CUPTI fills by itself), then
// after each stop drain with cuptiPCSamplingGetData into a SEPARATE buffer until nothing remains;
// records left in the configuration buffer are read from it as well (each record is consumed
// once: the buffer's count is reset after reading it).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // RTLD_DEFAULT
#endif
#include "pc_stalls.h"

#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PCS_RECORDS 8192  // PC records one buffer holds
#define PCS_MAX_KERNELS 256

typedef struct {
    char *name;       // mangled (as CUPTI gives it; cuobjdump -fun takes it)
    uint64_t offset;  // within the kernel's SASS
    uint64_t *by_reason;
    uint64_t total;
} pc_row;

typedef struct {
    char *name;  // mangled
    uint64_t *by_reason;
    uint64_t total;
    pc_row *pcs;
    size_t npcs, cap;
} kernel_row;

struct pcs_session {
    CUcontext ctx;
    size_t nreasons;
    uint32_t *reason_index;  // CUPTI's hardware index of reason i
    char **reason_name;      // its name, e.g. "smsp__pcsamp_warps_issue_stalled_long_scoreboard"
    // Reason i is the "not issued" twin of another (its samples are a subset of that one's: the
    // cycles in which the warp's scheduler issued nothing at all): not_issued[i], and base_of[i]
    // the twin; every sample has exactly one base reason, which the totals count.
    unsigned char *not_issued;
    size_t *base_of;
    CUpti_PCSamplingData config, drain;
    kernel_row kernels[PCS_MAX_KERNELS];
    size_t nkernels;
    uint64_t reported, dropped;  // samples CUPTI reported in all, and dropped (buffer full)
};

static int cupti_fail(char *err, size_t errlen, const char *what, CUptiResult r) {
    const char *msg = NULL;
    cuptiGetResultString(r, &msg);
    snprintf(err, errlen, "%s: CUPTI error %d (%s)", what, (int)r, msg ? msg : "no description");
    return -1;
}
#define PCS_TRY(what, call)                                                \
    do {                                                                   \
        const CUptiResult r_ = (call);                                     \
        if (r_ != CUPTI_SUCCESS) return cupti_fail(err, errlen, what, r_); \
    } while (0)

static int alloc_buffer(CUpti_PCSamplingData *b, size_t nreasons) {
    memset(b, 0, sizeof *b);
    b->size = sizeof *b;
    b->collectNumPcs = PCS_RECORDS;
    b->pPcData = calloc(PCS_RECORDS, sizeof *b->pPcData);
    if (!b->pPcData) return -1;
    for (size_t i = 0; i < PCS_RECORDS; i++) {
        b->pPcData[i].size = sizeof b->pPcData[i];
        b->pPcData[i].stallReasonCount = nreasons;
        b->pPcData[i].stallReason = calloc(nreasons, sizeof *b->pPcData[i].stallReason);
        if (!b->pPcData[i].stallReason) return -1;
    }
    return 0;
}
static void free_buffer(CUpti_PCSamplingData *b) {
    if (!b->pPcData) return;
    for (size_t i = 0; i < b->collectNumPcs; i++) free(b->pPcData[i].stallReason);
    free(b->pPcData);
    b->pPcData = NULL;
}

// not_issued and base_of from the names (each "X_not_issued" pairs with "X"); 0, or -1 out of memory.
static int classify_reasons(pcs_session *s) {
    s->not_issued = calloc(s->nreasons ? s->nreasons : 1, 1);
    s->base_of = calloc(s->nreasons ? s->nreasons : 1, sizeof *s->base_of);
    if (!s->not_issued || !s->base_of) return -1;
    for (size_t i = 0; i < s->nreasons; i++) {
        const char *name = s->reason_name[i], *tail = "_not_issued";
        const size_t len = strlen(name), tl = strlen(tail);
        s->base_of[i] = i;
        if (len <= tl || strcmp(name + len - tl, tail)) continue;
        for (size_t b = 0; b < s->nreasons; b++)
            if (b != i && strlen(s->reason_name[b]) == len - tl && !strncmp(s->reason_name[b], name, len - tl)) {
                s->not_issued[i] = 1, s->base_of[i] = b;
                break;
            }
    }
    return 0;
}

int pcs_open(pcs_session **out, unsigned period_log2, char *err, size_t errlen) {
    *out = NULL;
    if (period_log2 < 5 || period_log2 > 31) {
        snprintf(err, errlen, "sampling period 2^%u cycles: expected 2^5 .. 2^31", period_log2);
        return -1;
    }
    pcs_session *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    *out = s;
    // the driver's cuCtxGetCurrent, looked up in the libcuda the runtime loaded (linking the driver
    // would make the program fail to start on a machine without one, where --help must still work)
    typedef CUresult (*ctx_fn)(CUcontext *);
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    const ctx_fn get_ctx = drv ? (ctx_fn)dlsym(drv, "cuCtxGetCurrent") : NULL;
    if (!get_ctx || get_ctx(&s->ctx) != CUDA_SUCCESS || !s->ctx) {
        snprintf(err, errlen, "no current CUDA context (create one before pcs_open)");
        return -1;
    }
    CUpti_PCSamplingEnableParams en = {.size = CUpti_PCSamplingEnableParamsSize, .ctx = s->ctx};
    PCS_TRY("cuptiPCSamplingEnable", cuptiPCSamplingEnable(&en));
    CUpti_PCSamplingGetNumStallReasonsParams np = {
        .size = CUpti_PCSamplingGetNumStallReasonsParamsSize, .ctx = s->ctx, .numStallReasons = &s->nreasons};
    PCS_TRY("cuptiPCSamplingGetNumStallReasons", cuptiPCSamplingGetNumStallReasons(&np));
    s->reason_index = calloc(s->nreasons, sizeof *s->reason_index);
    s->reason_name = calloc(s->nreasons, sizeof *s->reason_name);
    int oom = !s->reason_index || !s->reason_name;
    for (size_t i = 0; !oom && i < s->nreasons; i++)
        oom = !(s->reason_name[i] = calloc(CUPTI_STALL_REASON_STRING_SIZE, 1));
    if (oom || alloc_buffer(&s->config, s->nreasons) || alloc_buffer(&s->drain, s->nreasons)) {
        snprintf(err, errlen, "out of host memory for %zu stall reasons", s->nreasons);
        return -1;
    }
    CUpti_PCSamplingGetStallReasonsParams rp = {.size = CUpti_PCSamplingGetStallReasonsParamsSize,
                                                .ctx = s->ctx,
                                                .numStallReasons = s->nreasons,
                                                .stallReasonIndex = s->reason_index,
                                                .stallReasons = s->reason_name};
    PCS_TRY("cuptiPCSamplingGetStallReasons", cuptiPCSamplingGetStallReasons(&rp));
    if (classify_reasons(s)) {
        snprintf(err, errlen, "out of host memory for %zu stall reasons", s->nreasons);
        return -1;
    }
    CUpti_PCSamplingConfigurationInfo info[5];
    memset(info, 0, sizeof info);
    info[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    info[0].attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
    info[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    info[1].attributeData.samplingPeriodData.samplingPeriod = period_log2;
    info[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    info[2].attributeData.samplingDataBufferData.samplingDataBuffer = &s->config;
    info[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
    info[3].attributeData.enableStartStopControlData.enableStartStopControl = 1;
    info[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE;
    info[4].attributeData.hardwareBufferSizeData.hardwareBufferSize = (size_t)256 << 20;
    CUpti_PCSamplingConfigurationInfoParams cp = {.size = CUpti_PCSamplingConfigurationInfoParamsSize,
                                                  .ctx = s->ctx,
                                                  .numAttributes = 5,
                                                  .pPCSamplingConfigurationInfo = info};
    PCS_TRY("cuptiPCSamplingSetConfigurationAttribute", cuptiPCSamplingSetConfigurationAttribute(&cp));
    return 0;
}

int pcs_start(pcs_session *s, char *err, size_t errlen) {
    CUpti_PCSamplingStartParams p = {.size = CUpti_PCSamplingStartParamsSize, .ctx = s->ctx};
    PCS_TRY("cuptiPCSamplingStart", cuptiPCSamplingStart(&p));
    return 0;
}

static kernel_row *kernel_of(pcs_session *s, const char *name) {
    for (size_t k = 0; k < s->nkernels; k++)
        if (!strcmp(s->kernels[k].name, name)) return &s->kernels[k];
    if (s->nkernels == PCS_MAX_KERNELS) return NULL;
    kernel_row *k = &s->kernels[s->nkernels];
    k->name = strdup(name);
    k->by_reason = calloc(s->nreasons, sizeof *k->by_reason);
    if (!k->name || !k->by_reason) return NULL;
    s->nkernels++;
    return k;
}

static pc_row *pc_of(pcs_session *s, kernel_row *k, uint64_t offset) {
    for (size_t i = 0; i < k->npcs; i++)
        if (k->pcs[i].offset == offset) return &k->pcs[i];
    if (k->npcs == k->cap) {
        const size_t cap = k->cap ? 2 * k->cap : 256;
        pc_row *p = realloc(k->pcs, cap * sizeof *p);
        if (!p) return NULL;
        k->pcs = p, k->cap = cap;
    }
    pc_row *p = &k->pcs[k->npcs];
    memset(p, 0, sizeof *p);
    p->offset = offset;
    if (!(p->by_reason = calloc(s->nreasons, sizeof *p->by_reason))) return NULL;
    k->npcs++;
    return p;
}

static size_t reason_slot(const pcs_session *s, uint32_t hw_index) {
    for (size_t i = 0; i < s->nreasons; i++)
        if (s->reason_index[i] == hw_index) return i;
    return s->nreasons;  // unknown: not counted per reason
}

static void take(pcs_session *s, CUpti_PCSamplingData *b) {
    for (size_t i = 0; i < b->totalNumPcs && i < b->collectNumPcs; i++) {
        const CUpti_PCSamplingPCData *r = &b->pPcData[i];
        kernel_row *k = kernel_of(s, r->functionName ? r->functionName : "(unnamed)");
        pc_row *p = k ? pc_of(s, k, r->pcOffset) : NULL;
        if (!p) continue;
        for (size_t j = 0; j < r->stallReasonCount; j++) {
            const size_t slot = reason_slot(s, r->stallReason[j].pcSamplingStallReasonIndex);
            const uint64_t n = r->stallReason[j].samples;
            if (slot < s->nreasons) k->by_reason[slot] += n, p->by_reason[slot] += n;
            if (slot == s->nreasons || !s->not_issued[slot]) k->total += n, p->total += n;
        }
    }
    s->reported += b->totalSamples;
    s->dropped += b->droppedSamples;
    b->totalNumPcs = 0;
}

int pcs_stop(pcs_session *s, char *err, size_t errlen) {
    CUpti_PCSamplingStopParams p = {.size = CUpti_PCSamplingStopParamsSize, .ctx = s->ctx};
    PCS_TRY("cuptiPCSamplingStop", cuptiPCSamplingStop(&p));
    for (int round = 0; round < 1 << 20; round++) {
        CUpti_PCSamplingGetDataParams g = {
            .size = CUpti_PCSamplingGetDataParamsSize, .ctx = s->ctx, .pcSamplingData = &s->drain};
        PCS_TRY("cuptiPCSamplingGetData", cuptiPCSamplingGetData(&g));
        const size_t got = s->drain.totalNumPcs, left = s->drain.remainingNumPcs;
        take(s, &s->drain);
        if (!got && !left) break;
    }
    take(s, &s->config);
    return 0;
}

static const char *short_reason(const char *name) {
    static const char *const prefixes[] = {"smsp__pcsamp_warps_issue_stalled_", "smsp__pcsamp_warps_issue_",
                                           "smsp__pcsamp_"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return name + strlen(prefixes[i]);
    return name;
}

static char *demangled(const char *raw) {
    typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
    const demangle_fn dm = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    int status = -1;
    char *d = dm ? dm(raw, NULL, NULL, &status) : NULL;
    if (d && status == 0) return d;
    free(d);
    return strdup(raw);
}

unsigned long long pcs_samples(const pcs_session *s, const char *name_part, const char *reason) {
    unsigned long long n = 0;
    for (size_t k = 0; k < s->nkernels; k++) {
        char *name = demangled(s->kernels[k].name);
        const int match = !name_part || (name && strstr(name, name_part));
        free(name);
        if (!match) continue;
        if (!reason) {
            n += s->kernels[k].total;
            continue;
        }
        for (size_t i = 0; i < s->nreasons; i++)
            if (!s->not_issued[i] && strstr(short_reason(s->reason_name[i]), reason)) n += s->kernels[k].by_reason[i];
    }
    return n;
}

typedef struct {
    size_t slot;
    uint64_t n;
} ranked;
static int by_count(const void *a, const void *b) {
    const uint64_t x = ((const ranked *)a)->n, y = ((const ranked *)b)->n;
    return x < y ? 1 : x > y ? -1 : 0;
}
static int kernel_by_total(const void *a, const void *b) {
    const uint64_t x = (*(kernel_row *const *)a)->total, y = (*(kernel_row *const *)b)->total;
    return x < y ? 1 : x > y ? -1 : 0;
}
static int pc_by_total(const void *a, const void *b) {
    const uint64_t x = ((const pc_row *)a)->total, y = ((const pc_row *)b)->total;
    return x < y ? 1 : x > y ? -1 : 0;
}

void pcs_report(const pcs_session *s, FILE *f, int top_pcs) {
    uint64_t all = 0;
    for (size_t k = 0; k < s->nkernels; k++) all += s->kernels[k].total;
    fprintf(f,
            "PC sampling: %llu samples in %zu kernel(s) (CUPTI reported %llu, dropped %llu)\n"
            "(selected: the warp issued; not_selected: it could have, another warp did; the others: why it\n"
            "could not. A sample counts once, in its warp's state; the last column: those of its samples in\n"
            "which its scheduler issued nothing at all)\n",
            (unsigned long long)all, s->nkernels, (unsigned long long)s->reported, (unsigned long long)s->dropped);
    kernel_row *order[PCS_MAX_KERNELS];
    for (size_t k = 0; k < s->nkernels; k++) order[k] = (kernel_row *)&s->kernels[k];
    qsort(order, s->nkernels, sizeof order[0], kernel_by_total);
    ranked *r = malloc((s->nreasons + 1) * sizeof *r);
    if (!r) return;
    for (size_t kk = 0; kk < s->nkernels; kk++) {
        kernel_row *k = order[kk];
        if (!k->total) continue;
        char *name = demangled(k->name);
        fprintf(f, "\nkernel %.160s: %llu samples (%.1f%%)\n", name ? name : k->name, (unsigned long long)k->total,
                100.0 * (double)k->total / (double)(all ? all : 1));
        if (name && strcmp(name, k->name)) fprintf(f, "  (%.200s)\n", k->name);  // as cuobjdump -fun takes it
        free(name);
        for (size_t i = 0; i < s->nreasons; i++) r[i] = (ranked){i, s->not_issued[i] ? 0 : k->by_reason[i]};
        qsort(r, s->nreasons, sizeof *r, by_count);
        fprintf(f, "  %-34s %12s  %6s  %s\n", "warp state", "samples", "share", "of which nothing issued");
        for (size_t i = 0; i < s->nreasons && r[i].n; i++) {
            const double share = 100.0 * (double)r[i].n / (double)k->total;
            if (share < 0.5) break;
            uint64_t idle = 0;  // its not-issued twin's samples
            for (size_t t = 0; t < s->nreasons; t++)
                if (s->not_issued[t] && s->base_of[t] == r[i].slot) idle = k->by_reason[t];
            fprintf(f, "  %-34s %12llu  %5.1f%%", short_reason(s->reason_name[r[i].slot]), (unsigned long long)r[i].n,
                    share);
            if (idle)
                fprintf(f, "  %12llu (%.1f%%)", (unsigned long long)idle, 100.0 * (double)idle / (double)k->total);
            fputc('\n', f);
        }
        qsort(k->pcs, k->npcs, sizeof *k->pcs, pc_by_total);
        if (top_pcs > 0) fprintf(f, "  top instructions (SASS offset: share of the kernel's samples, main reasons)\n");
        for (size_t p = 0; p < k->npcs && (int)p < top_pcs; p++) {
            const pc_row *pc = &k->pcs[p];
            for (size_t i = 0; i < s->nreasons; i++) r[i] = (ranked){i, s->not_issued[i] ? 0 : pc->by_reason[i]};
            qsort(r, s->nreasons, sizeof *r, by_count);
            fprintf(f, "    0x%05llx  %5.1f%%  %s %.0f%%", (unsigned long long)pc->offset,
                    100.0 * (double)pc->total / (double)k->total, short_reason(s->reason_name[r[0].slot]),
                    100.0 * (double)r[0].n / (double)(pc->total ? pc->total : 1));
            if (s->nreasons > 1 && r[1].n)
                fprintf(f, ", %s %.0f%%", short_reason(s->reason_name[r[1].slot]),
                        100.0 * (double)r[1].n / (double)(pc->total ? pc->total : 1));
            fputc('\n', f);
        }
    }
    free(r);
}

void pcs_close(pcs_session *s) {
    if (!s) return;
    if (s->ctx) {
        CUpti_PCSamplingDisableParams d = {.size = CUpti_PCSamplingDisableParamsSize, .ctx = s->ctx};
        cuptiPCSamplingDisable(&d);
    }
    free_buffer(&s->config);
    free_buffer(&s->drain);
    for (size_t k = 0; k < s->nkernels; k++) {
        for (size_t p = 0; p < s->kernels[k].npcs; p++) free(s->kernels[k].pcs[p].by_reason);
        free(s->kernels[k].pcs), free(s->kernels[k].by_reason), free(s->kernels[k].name);
    }
    for (size_t i = 0; s->reason_name && i < s->nreasons; i++) free(s->reason_name[i]);
    free(s->reason_name), free(s->reason_index), free(s->not_issued), free(s->base_of);
    free(s);
}

pcs_session *pcs_for_test(size_t nreasons, const char *const *names, const uint32_t *hw_index) {
    pcs_session *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->nreasons = nreasons;
    s->reason_index = calloc(nreasons, sizeof *s->reason_index);
    s->reason_name = calloc(nreasons, sizeof *s->reason_name);
    int oom = !s->reason_index || !s->reason_name;
    for (size_t i = 0; !oom && i < nreasons; i++) {
        s->reason_index[i] = hw_index[i];
        oom = !(s->reason_name[i] = strdup(names[i]));
    }
    if (oom || classify_reasons(s)) {
        pcs_close(s);
        return NULL;
    }
    return s;
}

void pcs_feed_for_test(pcs_session *s, void *records) {
    take(s, records);
}
