// PC sampling through CUPTI (tools/pc_stalls.c): where the warps of the kernels launched between
// pcs_start and pcs_stop sat, and why they were not issuing (the hardware's stall reasons), per
// kernel and per instruction. The GPU machines have no Nsight Compute; this is the measurement the
// conv kernels' "latency-bound" guesses lacked (bench/results/issue15-s24/REPORT.md).
//
// One session per process, on the calling thread's current CUDA context (create it first, e.g.
// with ff_gpu_select). While started, CUPTI serializes kernels (each launch's samples are its
// own), so time nothing between pcs_start and pcs_stop. Every function returns 0 or -1 with a
// message in err (what failed and CUPTI's words for it); CUPTI_ERROR_INSUFFICIENT_PRIVILEGES means
// the driver restricts profiling to administrators.
#ifndef FF_TOOLS_PC_STALLS_H
#define FF_TOOLS_PC_STALLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct pcs_session pcs_session;

// Enables PC sampling on the current context, one sample per warp scheduler every 2^period_log2
// cycles (5..31). *out receives the session.
int pcs_open(pcs_session **out, unsigned period_log2, char *err, size_t errlen);
int pcs_start(pcs_session *s, char *err, size_t errlen);
// Stops sampling and moves every record CUPTI holds into the session's tables (call it after the
// sampled kernels finished: synchronise first).
int pcs_stop(pcs_session *s, char *err, size_t errlen);
// Per kernel, the largest first: its samples, each stall reason's share (reasons under 0.5 %
// left out), then its top_pcs instructions by samples (offset within the kernel's SASS, as
// `cuobjdump -sass` prints it, with their two main reasons).
void pcs_report(const pcs_session *s, FILE *f, int top_pcs);
// Samples of kernel `name_part` (a substring of the demangled name; NULL: all kernels) in stall
// reason `reason` (a substring, e.g. "long_scoreboard"; NULL: all reasons).
unsigned long long pcs_samples(const pcs_session *s, const char *name_part, const char *reason);
void pcs_close(pcs_session *s);

// Tests, no GPU (verify/tools/test_pc_stalls.c): a session with this stall-reason table (names as
// CUPTI gives them, hw_index their hardware indexes), and records fed to it as cuptiPCSamplingGetData
// returns them (records: a CUpti_PCSamplingData whose totalNumPcs entries are read, then reset).
pcs_session *pcs_for_test(size_t nreasons, const char *const *names, const uint32_t *hw_index);
void pcs_feed_for_test(pcs_session *s, void *records);

#endif
