// Phase timers (see trace.h).
#include "fivefold/trace.h"

#include <string.h>
#include <time.h>

const char *ff_phase_name(ff_phase p) {
    static const char *names[FF_N_PHASES] = {"compute", "h2d", "d2h", "comm", "host"};
    return (unsigned)p < FF_N_PHASES ? names[p] : "?";
}

double ff_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ff_trace_reset(ff_trace *t) {
    memset(t, 0, sizeof *t);
}

double ff_trace_phase_total(const ff_trace *t, ff_phase p) {
    double s = 0;
    for (int l = 0; l <= FF_MAX_LAYERS; l++) s += t->seconds[l][p];
    return s;
}
