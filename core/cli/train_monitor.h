// `fivefold train`'s GPU monitoring (issue 16): which rank watches which GPUs, the progress-line
// text, the temperature limit applied in lockstep by every rank, and the JSON record. The sampling
// itself is core/monitor (fivefold/monitor.h).
#pragma once
#include <stdbool.h>
#include <stdio.h>

#include "fivefold/comm.h"
#include "fivefold/json.h"
#include "fivefold/status.h"

typedef struct {
    const char *when;      // "auto" (GPU modes, or FF_FAKE_SENSORS set), "on" (an error if it cannot), "off"
    int interval_ms;       // --monitor-interval
    double max_temp_c;     // --max-temp
    const char *on_hot;    // --on-hot: "pause" or "stop"
    double pause_limit_s;  // --pause-limit: the longest a pause may last before the run stops
} train_monitor_args;

void train_monitor_args_default(train_monitor_args *a);
// Checks the values (FF_ERR_INPUT naming the flag).
ff_status train_monitor_args_check(const train_monitor_args *a);

typedef struct train_monitor train_monitor;

// World rank 0 watches every GPU of its node (CUDA's devices, found in NVML by PCI bus id; with
// FF_FAKE_SENSORS, fake GPU 0): its progress line and --json show them, and its temperature checks
// pause or stop every rank. *out is NULL when nothing is watched (off; or auto and no GPU mode or
// no NVML: then a note goes to `note` on rank 0). Collective: every rank learns whether rank 0
// watches, so the checks stay in lockstep.
ff_status train_monitor_start(train_monitor **out, const train_monitor_args *a, bool gpu_mode, ff_comm *comm,
                              FILE *note);
void train_monitor_destroy(train_monitor *m);

// " | GPU0 64C 412W 23.1/141.0GiB 98% 1980MHz ..." (empty without readings) into buf.
void train_monitor_line(const train_monitor *m, char *buf, size_t cap);

// The temperature limit, collective (every rank calls it between the same steps): FF_OK to go on.
// A hot GPU: rank 0 prints the warning once and, with --on-hot pause, every rank waits in slices
// shorter than the communication deadline until it cools (FF_OK) or --pause-limit passes (an
// error); with --on-hot stop, an error naming the GPU, its temperature and --max-temp. *follower:
// this rank failed because rank 0 did (rank 0 reports it).
ff_status train_monitor_check(train_monitor *m, ff_comm *comm, double comm_timeout_s, bool *follower);

// Writes "monitor": {...} (fivefold/monitor.h's record) into an open JSON object; nothing if none.
void train_monitor_json(train_monitor *m, ff_json *j);
// "monitor: 412 samples of 2 GPUs (nvml, every 500 ms), sampling 0.03 % of the run, 1 pause (2.1 s)"
void train_monitor_summary(train_monitor *m, FILE *f);
