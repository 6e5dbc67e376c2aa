// `fivefold train`'s GPU monitoring (train_monitor.h).
#include "train_monitor.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/gpu.h"
#include "fivefold/monitor.h"

struct train_monitor {
    ff_monitor *mon;  // rank 0's sampler; NULL on the other ranks
    train_monitor_args a;
    double waited_s;  // this episode's pause so far (every rank counts the same slices)
};

void train_monitor_args_default(train_monitor_args *a) {
    a->when = "auto";
    a->interval_ms = FF_MONITOR_INTERVAL_MS_DEFAULT;
    a->max_temp_c = FF_MONITOR_MAX_TEMP_C_DEFAULT;
    a->on_hot = "pause";
    a->pause_limit_s = FF_MONITOR_PAUSE_LIMIT_S_DEFAULT;
}

ff_status train_monitor_args_check(const train_monitor_args *a) {
    if (strcmp(a->when, "auto") != 0 && strcmp(a->when, "on") != 0 && strcmp(a->when, "off") != 0)
        return FF_FAIL(FF_ERR_INPUT, "--monitor '%s': expected auto, on or off", a->when);
    if (strcmp(a->on_hot, "pause") != 0 && strcmp(a->on_hot, "stop") != 0)
        return FF_FAIL(FF_ERR_INPUT, "--on-hot '%s': expected pause (wait until the GPU cools) or stop", a->on_hot);
    if (a->interval_ms < FF_MONITOR_INTERVAL_MS_MIN || a->interval_ms > FF_MONITOR_INTERVAL_MS_MAX)
        return FF_FAIL(FF_ERR_INPUT, "--monitor-interval %d: expected %d..%d milliseconds", a->interval_ms,
                       FF_MONITOR_INTERVAL_MS_MIN, FF_MONITOR_INTERVAL_MS_MAX);
    if (!(a->max_temp_c >= FF_MONITOR_MAX_TEMP_C_MIN && a->max_temp_c <= FF_MONITOR_MAX_TEMP_C_MAX))
        return FF_FAIL(FF_ERR_INPUT, "--max-temp %g: expected %g..%g degrees C", a->max_temp_c,
                       FF_MONITOR_MAX_TEMP_C_MIN, FF_MONITOR_MAX_TEMP_C_MAX);
    if (!(a->pause_limit_s > 0 && a->pause_limit_s <= FF_MONITOR_PAUSE_LIMIT_S_MAX))
        return FF_FAIL(FF_ERR_INPUT, "--pause-limit %g: expected (0, %g] seconds", a->pause_limit_s,
                       FF_MONITOR_PAUSE_LIMIT_S_MAX);
    return FF_OK;
}

// Rank 0's sampler over every GPU CUDA sees (by PCI bus id), or fake GPU 0.
static ff_status start_sampler(ff_monitor **out, const train_monitor_args *a, double slice_s) {
    ff_monitor_options o;
    ff_monitor_options_default(&o);
    o.interval_ms = a->interval_ms;
    o.max_temp_c = a->max_temp_c;
    o.temp_action = strcmp(a->on_hot, "stop") == 0 ? FF_TEMP_STOP : FF_TEMP_PAUSE;
    o.pause_limit_s = slice_s;  // one slice; train_monitor_check strings slices up to --pause-limit
    int gpus[FF_MONITOR_MAX_GPUS];
    char ids[FF_MONITOR_MAX_GPUS][32];
    const char *id_ptr[FF_MONITOR_MAX_GPUS];
    const char *fake = getenv("FF_FAKE_SENSORS");
    int n = 1;
    gpus[0] = 0;
    if (!fake || !*fake) {
        FF_TRY(ff_gpu_device_count(&n));
        if (n > FF_MONITOR_MAX_GPUS) n = FF_MONITOR_MAX_GPUS;
        for (int i = 0; i < n; i++) {
            gpus[i] = i;
            FF_TRY(ff_gpu_pci_bus_id(i, ids[i], sizeof ids[i]));
            id_ptr[i] = ids[i];
        }
        o.pci_bus_ids = id_ptr;
    }
    o.gpus = gpus;
    o.n_gpus = n;
    return ff_monitor_start(out, &o);
}

// The pause is cut into slices shorter than the communication deadline: the other ranks wait for
// rank 0's verdict in a collective that must not time out while it waits for the GPU.
static double slice_of(const train_monitor_args *a, double comm_timeout_s) {
    double s = comm_timeout_s > 0 ? comm_timeout_s / 2 : 10.0;  // < 0: the comm's default (30 s)
    if (s > 10.0) s = 10.0;
    if (s > a->pause_limit_s) s = a->pause_limit_s;
    return s < 0.5 ? 0.5 : s;
}

ff_status train_monitor_start(train_monitor **out, const train_monitor_args *a, bool gpu_mode, ff_comm *comm,
                              FILE *note) {
    *out = NULL;
    const int rank = comm ? ff_comm_rank(comm) : 0;
    const char *fake = getenv("FF_FAKE_SENSORS");
    const bool want = strcmp(a->when, "on") == 0 || (strcmp(a->when, "auto") == 0 && (gpu_mode || (fake && *fake)));
    int64_t active = 0;
    ff_monitor *mon = NULL;
    ff_status st = FF_OK;
    if (want && rank == 0) {
        st = start_sampler(&mon, a, slice_of(a, -1));
        if (st == FF_OK) {
            active = 1;
        } else if (strcmp(a->when, "auto") == 0) {  // a GPU run without NVML still trains
            if (note) fprintf(note, "monitor: off (%s; --monitor on makes this an error)\n", ff_last_error());
            st = FF_OK;
        } else {
            st = ff_fail_context(st, "--monitor on: no GPU can be watched");
        }
    }
    // Every rank learns whether rank 0 watches (and whether it failed), in one broadcast.
    int64_t word[2] = {active, (int64_t)st};
    if (comm && ff_comm_size(comm) > 1) {
        ff_status bs = ff_comm_bcast(comm, word, sizeof word, 0);
        if (bs != FF_OK) {
            ff_monitor_destroy(mon);
            return bs;
        }
    }
    if (word[1] != FF_OK) {
        ff_monitor_destroy(mon);
        return rank == 0 ? st : FF_FAIL((ff_status)word[1], "rank 0 could not start the GPU monitor");
    }
    if (!word[0]) return FF_OK;
    train_monitor *m = calloc(1, sizeof *m);
    if (!m) {
        ff_monitor_destroy(mon);
        return FF_FAIL(FF_ERR_OOM, "the GPU monitor");
    }
    m->mon = mon;
    m->a = *a;
    *out = m;
    return FF_OK;
}

void train_monitor_destroy(train_monitor *m) {
    if (!m) return;
    ff_monitor_destroy(m->mon);
    free(m);
}

void train_monitor_line(const train_monitor *m, char *buf, size_t cap) {
    if (cap) buf[0] = 0;
    if (!m || !m->mon || cap < 4) return;
    ff_gpu_sample s[FF_MONITOR_MAX_GPUS];
    int n = 0;
    ff_monitor_latest(s, &n, m->mon, FF_MONITOR_MAX_GPUS);
    if (!n) return;
    snprintf(buf, cap, " | ");
    ff_monitor_format(buf + 3, cap - 3, s, n);
}

static void print_warning(void *ctx, const char *warning) {
    (void)ctx;
    printf("%s\n", warning);  // the monitor words it ("warning: GPU0 is at ...")
    fflush(stdout);
}

// Verdicts rank 0 broadcasts after each check.
enum { GO_ON = 0, STILL_HOT = 1, STOP = 2 };

ff_status train_monitor_check(train_monitor *m, ff_comm *comm, double comm_timeout_s, bool *follower) {
    if (!m) return FF_OK;
    const int rank = comm ? ff_comm_rank(comm) : 0;
    const bool several = comm && ff_comm_size(comm) > 1;
    const double slice = several ? slice_of(&m->a, comm_timeout_s) : m->a.pause_limit_s;
    for (;;) {
        ff_status st = FF_OK;
        int64_t verdict = GO_ON;
        if (rank == 0) {
            ff_temp_check tc;
            st = ff_monitor_check_temperature(&tc, m->mon, print_warning, NULL);
            m->waited_s += tc.paused_s;
            if (st != FF_OK) {
                // A pause slice that ended hot goes on while --pause-limit allows; a stop does not.
                const bool pausing = strcmp(m->a.on_hot, "pause") == 0;
                if (pausing && m->waited_s + 1e-9 < m->a.pause_limit_s) {
                    verdict = STILL_HOT;
                    st = FF_OK;
                } else {
                    verdict = STOP;
                    if (pausing)
                        st = FF_FAIL(FF_ERR_CUDA,
                                     "GPU %d still at %.0f C after pausing %.0f s (--pause-limit %g s, --max-temp %g "
                                     "C): training stopped",
                                     tc.hot_gpu, tc.hot_temp_c, m->waited_s, m->a.pause_limit_s, m->a.max_temp_c);
                }
            } else {
                if (tc.paused_s > 0) {
                    printf("monitor: resumed after %.1f s: the GPUs are at or below %.0f C\n", m->waited_s,
                           m->a.max_temp_c - FF_MONITOR_COOL_MARGIN_C);
                    fflush(stdout);
                }
                m->waited_s = 0;
            }
        }
        if (several) {
            int64_t word[2] = {verdict, (int64_t)st};
            ff_status bs = ff_comm_bcast(comm, word, sizeof word, 0);
            if (bs != FF_OK) return bs;
            verdict = word[0];
            if (rank != 0 && verdict == STOP) {
                *follower = true;
                return FF_FAIL((ff_status)word[1], "rank 0 stopped training: a GPU is too hot");
            }
        }
        if (verdict == GO_ON) return FF_OK;
        if (verdict == STOP) return st;
        if (rank != 0) m->waited_s += slice;  // the others count the same slices
    }
}

void train_monitor_json(train_monitor *m, ff_json *j) {
    if (m && m->mon) ff_monitor_write_json(j, "monitor", m->mon);
}

void train_monitor_summary(train_monitor *m, FILE *f) {
    if (!m || !m->mon) return;
    ff_monitor_stop(m->mon);
    ff_monitor_overhead ov;
    ff_monitor_overhead_get(&ov, m->mon);
    fprintf(f,
            "monitor: %lld samples of %d GPU%s (%s, every %d ms), sampling %.3f %% of the run on its own thread; "
            "%lld pause%s (%.1f s)\n",
            (long long)ff_monitor_sample_count(m->mon), ff_monitor_gpu_count(m->mon),
            ff_monitor_gpu_count(m->mon) == 1 ? "" : "s", ff_monitor_source(m->mon), m->a.interval_ms,
            100.0 * ov.fraction, (long long)ov.pauses, ov.pauses == 1 ? "" : "s", ov.paused_s);
}
