// GPU monitoring (see monitor.h): NVML through dlopen or a scripted fake source, a sampler thread,
// the temperature limit and the JSON time series.
#include "fivefold/monitor.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---------------------------------------------------------------- NVML, declared locally
// The few declarations of nvml.h this file uses, with its ABI: the binary must build without the
// CUDA toolkit's headers and run without the driver, so the library is opened at run time.
// nvmlReturn_t and the sensor/clock enums are C enums (int-sized); nvmlDevice_t is an opaque pointer.
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;  // bytes
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory;  // percent of the last sample period
} nvmlUtilization_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_TEMPERATURE_GPU = 0,  // nvmlTemperatureSensors_t
    NVML_CLOCK_SM = 1,         // nvmlClockType_t
    NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96,
    NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32,
};

#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"

typedef struct {
    void *lib;
    bool initialised;  // nvmlInit_v2 succeeded: nvmlShutdown owed
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*get_count)(unsigned int *count);
    nvmlReturn_t (*by_index)(unsigned int index, nvmlDevice_t *dev);
    nvmlReturn_t (*by_pci)(const char *bus_id, nvmlDevice_t *dev);  // optional
    nvmlReturn_t (*name)(nvmlDevice_t dev, char *name, unsigned int length);
    nvmlReturn_t (*temperature)(nvmlDevice_t dev, int sensor, unsigned int *temp_c);
    // The rest are optional: an older or cut-down driver without one gives NaN / -1 for that value.
    nvmlReturn_t (*power)(nvmlDevice_t dev, unsigned int *milliwatts);
    nvmlReturn_t (*memory)(nvmlDevice_t dev, nvmlMemory_t *mem);
    nvmlReturn_t (*utilization)(nvmlDevice_t dev, nvmlUtilization_t *u);
    nvmlReturn_t (*clock)(nvmlDevice_t dev, int type, unsigned int *mhz);
    nvmlReturn_t (*throttle)(nvmlDevice_t dev, unsigned long long *reasons);
    nvmlDevice_t dev[FF_MONITOR_MAX_GPUS];
} nvml_source;

// ---------------------------------------------------------------- the fake source
typedef struct {
    int gpu;
    ff_gpu_sample v;  // t_s = the line's time
} fake_line;

typedef struct {
    char path[4096];
    fake_line *lines;  // [n] in file order
    int64_t n;
} fake_source;

// ---------------------------------------------------------------- the monitor
struct ff_monitor {
    ff_monitor_options o;  // gpus / pci_bus_ids / paths point into the copies below
    int gpus[FF_MONITOR_MAX_GPUS];
    char pci[FF_MONITOR_MAX_GPUS][NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
    const char *pci_ptr[FF_MONITOR_MAX_GPUS];
    char names[FF_MONITOR_MAX_GPUS][NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    bool fake;
    nvml_source nv;
    fake_source fk;
    double t0, t_stop;  // monotonic seconds: start, and stop (once stopped)

    pthread_mutex_t mu;         // guards everything below
    pthread_cond_t wake;        // the sampler sleeps on it; ff_monitor_stop signals it
    pthread_cond_t round_done;  // broadcast after every round (a pause waits on it)
    pthread_t thread;
    bool thread_started, stopping, running;
    ff_gpu_sample *s;  // [n] the series, cap allocated
    int64_t n, cap;
    ff_gpu_sample latest[FF_MONITOR_MAX_GPUS];
    bool has_latest[FF_MONITOR_MAX_GPUS];
    ff_monitor_overhead ov;  // elapsed_s and fraction are computed when read
    char read_error[256];    // the first failed sensor read, for the JSON
    int64_t warnings;
    bool episode;  // a GPU went over the limit and has not yet cooled: warn once per episode
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The monotonic clock's absolute time t (seconds) as a timespec, for pthread_cond_timedwait.
static struct timespec abs_time(double t) {
    struct timespec ts;
    double sec = floor(t);
    ts.tv_sec = (time_t)sec;
    ts.tv_nsec = (long)((t - sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    if (ts.tv_nsec < 0) ts.tv_nsec = 0;
    return ts;
}

void ff_monitor_options_default(ff_monitor_options *o) {
    memset(o, 0, sizeof *o);
    o->interval_ms = FF_MONITOR_INTERVAL_MS_DEFAULT;
    o->max_temp_c = FF_MONITOR_MAX_TEMP_C_DEFAULT;
    o->temp_action = FF_TEMP_PAUSE;
    o->pause_limit_s = FF_MONITOR_PAUSE_LIMIT_S_DEFAULT;
}

static ff_status check_options(const ff_monitor_options *o) {
    if (!o) return FF_FAIL(FF_ERR_INTERNAL, "monitor: no options");
    if (o->n_gpus < 1 || o->n_gpus > FF_MONITOR_MAX_GPUS)
        return FF_FAIL(FF_ERR_INPUT, "monitor: %d GPUs to watch: expected 1..%d", o->n_gpus, FF_MONITOR_MAX_GPUS);
    if (!o->gpus) return FF_FAIL(FF_ERR_INTERNAL, "monitor: no GPU list");
    for (int i = 0; i < o->n_gpus; i++) {
        if (o->gpus[i] < 0) return FF_FAIL(FF_ERR_INPUT, "monitor: GPU index %d: expected >= 0", o->gpus[i]);
        for (int k = 0; k < i; k++)
            if (o->gpus[k] == o->gpus[i])
                return FF_FAIL(FF_ERR_INPUT, "monitor: GPU %d listed twice: expected distinct GPUs", o->gpus[i]);
        if (o->pci_bus_ids && (!o->pci_bus_ids[i] || strlen(o->pci_bus_ids[i]) >= NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE))
            return FF_FAIL(FF_ERR_INPUT, "monitor: PCI bus id of GPU %d: expected a string of 1..%d characters",
                           o->gpus[i], NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE - 1);
    }
    if (o->interval_ms < FF_MONITOR_INTERVAL_MS_MIN || o->interval_ms > FF_MONITOR_INTERVAL_MS_MAX)
        return FF_FAIL(FF_ERR_INPUT, "monitor: sampling interval %d ms: expected %d..%d ms", o->interval_ms,
                       FF_MONITOR_INTERVAL_MS_MIN, FF_MONITOR_INTERVAL_MS_MAX);
    if (!(o->max_temp_c >= FF_MONITOR_MAX_TEMP_C_MIN && o->max_temp_c <= FF_MONITOR_MAX_TEMP_C_MAX))
        return FF_FAIL(FF_ERR_INPUT, "monitor: --max-temp %g C: expected %g..%g C", o->max_temp_c,
                       FF_MONITOR_MAX_TEMP_C_MIN, FF_MONITOR_MAX_TEMP_C_MAX);
    if (o->temp_action != FF_TEMP_PAUSE && o->temp_action != FF_TEMP_STOP)
        return FF_FAIL(FF_ERR_INPUT, "monitor: temperature action %d: expected pause or stop", (int)o->temp_action);
    if (!(o->pause_limit_s > 0 && o->pause_limit_s <= FF_MONITOR_PAUSE_LIMIT_S_MAX))
        return FF_FAIL(FF_ERR_INPUT, "monitor: pause limit %g s: expected more than 0 and at most %g s",
                       o->pause_limit_s, FF_MONITOR_PAUSE_LIMIT_S_MAX);
    return FF_OK;
}

// ---------------------------------------------------------------- fake source: parsing

static const char *const FAKE_FIELDS[] = {"t_seconds",     "gpu",      "temp_c",       "power_w",      "mem_used_mib",
                                          "mem_total_mib", "util_pct", "sm_clock_mhz", "throttle_hex", "mem_util_pct"};
#define FAKE_FORMAT \
    "t_seconds gpu temp_c power_w mem_used_mib mem_total_mib util_pct sm_clock_mhz throttle_hex [mem_util_pct]"
#define FAKE_MAX_GPU 1023

// A number (or "nan": not reported) within [lo, hi].
static ff_status fake_num(double *out, const char *path, int64_t line, int field, const char *tok, double lo, double hi,
                          bool nan_ok) {
    char *end = NULL;
    errno = 0;
    double v = strtod(tok, &end);
    if (end == tok || *end != '\0' || errno == ERANGE || isinf(v) || (isnan(v) && !nan_ok))
        return FF_FAIL(FF_ERR_INPUT, "fake sensor file '%s' line %lld: field %d (%s) = '%s': expected a number%s", path,
                       (long long)line, field + 1, FAKE_FIELDS[field], tok, nan_ok ? " or nan" : "");
    if (!isnan(v) && (v < lo || v > hi))
        return FF_FAIL(FF_ERR_INPUT, "fake sensor file '%s' line %lld: field %d (%s) = '%s': expected %g..%g", path,
                       (long long)line, field + 1, FAKE_FIELDS[field], tok, lo, hi);
    *out = v;
    return FF_OK;
}

// MiB as bytes; the bound keeps the product inside int64.
static int64_t mib_bytes(double mib) {
    return isnan(mib) ? -1 : (int64_t)llround(mib * 1048576.0);
}

static ff_status fake_parse_line(fake_line *out, const char *path, int64_t line, char *text) {
    char *tok[11];
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(text, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n == 11) break;
        tok[n++] = t;
    }
    if (n != 9 && n != 10)
        return FF_FAIL(FF_ERR_INPUT, "fake sensor file '%s' line %lld: %s%d fields: expected 9 or 10 (" FAKE_FORMAT ")",
                       path, (long long)line, n > 10 ? "more than " : "", n > 10 ? 10 : n);
    double v[10];
    const double mem_max = 8e12;  // MiB: 8e12 * 2^20 < 2^63
    FF_TRY(fake_num(&v[0], path, line, 0, tok[0], 0, 1e9, false));
    FF_TRY(fake_num(&v[1], path, line, 1, tok[1], 0, FAKE_MAX_GPU, false));
    if (v[1] != floor(v[1]))
        return FF_FAIL(FF_ERR_INPUT, "fake sensor file '%s' line %lld: field 2 (gpu) = '%s': expected an integer", path,
                       (long long)line, tok[1]);
    FF_TRY(fake_num(&v[2], path, line, 2, tok[2], -100, 300, true));
    FF_TRY(fake_num(&v[3], path, line, 3, tok[3], 0, 1e6, true));
    FF_TRY(fake_num(&v[4], path, line, 4, tok[4], 0, mem_max, true));
    FF_TRY(fake_num(&v[5], path, line, 5, tok[5], 0, mem_max, true));
    FF_TRY(fake_num(&v[6], path, line, 6, tok[6], 0, 100, true));
    FF_TRY(fake_num(&v[7], path, line, 7, tok[7], 0, 1e6, true));
    v[9] = NAN;
    if (n == 10) FF_TRY(fake_num(&v[9], path, line, 9, tok[9], 0, 100, true));
    int64_t throttle = -1;
    if (strcmp(tok[8], "nan") != 0) {
        const char *h = tok[8];
        if (h[0] == '0' && (h[1] == 'x' || h[1] == 'X')) h += 2;
        char *end = NULL;
        errno = 0;
        unsigned long long b = strtoull(h, &end, 16);
        if (*h == '\0' || *h == '-' || *h == '+' || *end != '\0' || errno == ERANGE ||
            b > (unsigned long long)INT64_MAX)
            return FF_FAIL(FF_ERR_INPUT,
                           "fake sensor file '%s' line %lld: field 9 (throttle_hex) = '%s': expected a hexadecimal "
                           "bitmask (0x24) or nan",
                           path, (long long)line, tok[8]);
        throttle = (int64_t)b;
    }
    out->gpu = (int)v[1];
    out->v = (ff_gpu_sample){.t_s = v[0],
                             .gpu = (int)v[1],
                             .temp_c = v[2],
                             .power_w = v[3],
                             .mem_used_bytes = mib_bytes(v[4]),
                             .mem_total_bytes = mib_bytes(v[5]),
                             .util_pct = v[6],
                             .mem_util_pct = v[9],
                             .sm_clock_mhz = v[7],
                             .throttle = throttle};
    return FF_OK;
}

static ff_status fake_open(fake_source *fk, const char *path, const char *origin, const ff_monitor_options *o) {
    if (snprintf(fk->path, sizeof fk->path, "%s", path) >= (int)sizeof fk->path)
        return FF_FAIL(FF_ERR_INPUT, "%s: fake sensor file path too long: '%s'", origin, path);
    FILE *f = fopen(path, "r");
    if (!f) return FF_FAIL(FF_ERR_IO, "%s: cannot open fake sensor file '%s': %s", origin, path, strerror(errno));
    char *buf = NULL;
    size_t bcap = 0;
    int64_t line = 0, cap = 0;
    ff_status st = FF_OK;
    double last_t[FAKE_MAX_GPU + 1];
    for (int g = 0; g <= FAKE_MAX_GPU; g++) last_t[g] = -1;
    while (st == FF_OK && getline(&buf, &bcap, f) >= 0) {
        line++;
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        if (strspn(buf, " \t\r\n") == strlen(buf)) continue;
        fake_line fl;
        st = fake_parse_line(&fl, fk->path, line, buf);
        if (st != FF_OK) break;
        if (fl.v.t_s < last_t[fl.gpu]) {
            st = FF_FAIL(FF_ERR_INPUT,
                         "fake sensor file '%s' line %lld: field 1 (t_seconds) = %g: earlier than GPU %d's previous "
                         "line (%g); each GPU's times must not decrease",
                         fk->path, (long long)line, fl.v.t_s, fl.gpu, last_t[fl.gpu]);
            break;
        }
        last_t[fl.gpu] = fl.v.t_s;
        if (fk->n == cap) {
            int64_t nc = cap ? 2 * cap : 64;
            fake_line *nl = realloc(fk->lines, (size_t)nc * sizeof *nl);
            if (!nl) {
                st = FF_FAIL(FF_ERR_OOM, "fake sensor file '%s': cannot allocate %lld lines", fk->path, (long long)nc);
                break;
            }
            fk->lines = nl;
            cap = nc;
        }
        fk->lines[fk->n++] = fl;
    }
    if (st == FF_OK && ferror(f)) st = FF_FAIL(FF_ERR_IO, "%s: reading fake sensor file '%s' failed", origin, fk->path);
    free(buf);
    fclose(f);
    for (int i = 0; st == FF_OK && i < o->n_gpus; i++)
        if (o->gpus[i] > FAKE_MAX_GPU || last_t[o->gpus[i]] < 0)
            st = FF_FAIL(FF_ERR_INPUT, "fake sensor file '%s' (%s): no line for watched GPU %d", fk->path, origin,
                         o->gpus[i]);
    return st;
}

// The last line of gpu whose time is <= t; false when the GPU has none yet.
static bool fake_read(ff_gpu_sample *out, const fake_source *fk, int gpu, double t) {
    const fake_line *hit = NULL;
    for (int64_t i = 0; i < fk->n; i++)
        if (fk->lines[i].gpu == gpu && fk->lines[i].v.t_s <= t) hit = &fk->lines[i];
    if (!hit) return false;
    *out = hit->v;
    return true;
}

// ---------------------------------------------------------------- NVML source

static const char *nvml_err(const nvml_source *nv, nvmlReturn_t rc) {
    const char *s = nv->error_string ? nv->error_string(rc) : NULL;
    return s ? s : "unknown error";
}

// Stores dlsym's answer into the function pointer at slot. memcpy, not a cast through void **:
// POSIX guarantees the representations match, C does not let the pointer types alias.
static bool load_sym(void *slot, void *lib, const char *name) {
    void *p = dlsym(lib, name);
    memcpy(slot, &p, sizeof p);
    return p != NULL;
}

static void nvml_close(nvml_source *nv) {
    if (nv->initialised && nv->shutdown) nv->shutdown();
    nv->initialised = false;
    if (nv->lib) dlclose(nv->lib);
    nv->lib = NULL;
}

#define NVML_SYM(field, name) load_sym(&nv->field, nv->lib, name)

static ff_status nvml_open(nvml_source *nv, char names[][NVML_DEVICE_NAME_V2_BUFFER_SIZE],
                           const ff_monitor_options *o) {
    const char *libname = o->nvml_library ? o->nvml_library : NVML_DEFAULT_LIBRARY;
    dlerror();
    nv->lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
    if (!nv->lib) {
        const char *why = dlerror();
        return FF_FAIL(FF_ERR_NO_CUDA,
                       "GPU monitoring needs NVML: cannot load %s (%s): no NVIDIA driver on this machine? "
                       "(FF_FAKE_SENSORS=FILE replays recorded readings instead)",
                       libname, why ? why : "dlopen failed");
    }
    struct {
        void *slot;
        const char *name;
    } req[] = {
        {&nv->init, "nvmlInit_v2"},
        {&nv->shutdown, "nvmlShutdown"},
        {&nv->error_string, "nvmlErrorString"},
        {&nv->get_count, "nvmlDeviceGetCount_v2"},
        {&nv->by_index, "nvmlDeviceGetHandleByIndex_v2"},
        {&nv->name, "nvmlDeviceGetName"},
        {&nv->temperature, "nvmlDeviceGetTemperature"},
    };
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        if (!load_sym(req[i].slot, nv->lib, req[i].name)) {
            nvml_close(nv);
            return FF_FAIL(FF_ERR_NO_CUDA, "GPU monitoring: %s has no %s (an NVIDIA driver older than NVML's v2 API?)",
                           libname, req[i].name);
        }
    }
    NVML_SYM(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    NVML_SYM(power, "nvmlDeviceGetPowerUsage");
    NVML_SYM(memory, "nvmlDeviceGetMemoryInfo");
    NVML_SYM(utilization, "nvmlDeviceGetUtilizationRates");
    NVML_SYM(clock, "nvmlDeviceGetClockInfo");
    NVML_SYM(throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
    // Drivers from R535 on name it "...EventReasons" (same signature); the old name may go one day.
    if (!nv->throttle) NVML_SYM(throttle, "nvmlDeviceGetCurrentClocksEventReasons");

    nvmlReturn_t rc = nv->init();
    if (rc != NVML_SUCCESS) {
        ff_status st =
            FF_FAIL(FF_ERR_NO_CUDA, "GPU monitoring: nvmlInit_v2 failed: %s (NVML error %d)", nvml_err(nv, rc), rc);
        nvml_close(nv);
        return st;
    }
    nv->initialised = true;
    unsigned int count = 0;
    rc = nv->get_count(&count);
    if (rc != NVML_SUCCESS) {
        ff_status st = FF_FAIL(FF_ERR_NO_CUDA, "GPU monitoring: nvmlDeviceGetCount_v2 failed: %s (NVML error %d)",
                               nvml_err(nv, rc), rc);
        nvml_close(nv);
        return st;
    }
    for (int i = 0; i < o->n_gpus; i++) {
        if (o->pci_bus_ids) {
            if (!nv->by_pci) {
                nvml_close(nv);
                return FF_FAIL(FF_ERR_NO_CUDA, "GPU monitoring: %s has no nvmlDeviceGetHandleByPciBusId_v2", libname);
            }
            rc = nv->by_pci(o->pci_bus_ids[i], &nv->dev[i]);
            if (rc != NVML_SUCCESS) {
                ff_status st = FF_FAIL(FF_ERR_NO_CUDA,
                                       "GPU monitoring: GPU %d (PCI bus id %s): nvmlDeviceGetHandleByPciBusId_v2 "
                                       "failed: %s (NVML error %d)",
                                       o->gpus[i], o->pci_bus_ids[i], nvml_err(nv, rc), rc);
                nvml_close(nv);
                return st;
            }
        } else {
            if ((unsigned int)o->gpus[i] >= count) {
                nvml_close(nv);
                if (count == 0) return FF_FAIL(FF_ERR_NO_CUDA, "GPU monitoring: NVML sees no GPU");
                return FF_FAIL(FF_ERR_INPUT, "GPU monitoring: GPU %d: NVML sees %u GPU(s), indices 0..%u", o->gpus[i],
                               count, count - 1);
            }
            rc = nv->by_index((unsigned int)o->gpus[i], &nv->dev[i]);
            if (rc != NVML_SUCCESS) {
                ff_status st = FF_FAIL(
                    FF_ERR_NO_CUDA, "GPU monitoring: GPU %d: nvmlDeviceGetHandleByIndex_v2 failed: %s (NVML error %d)",
                    o->gpus[i], nvml_err(nv, rc), rc);
                nvml_close(nv);
                return st;
            }
        }
        rc = nv->name(nv->dev[i], names[i], NVML_DEVICE_NAME_V2_BUFFER_SIZE);
        if (rc != NVML_SUCCESS) snprintf(names[i], NVML_DEVICE_NAME_V2_BUFFER_SIZE, "GPU %d", o->gpus[i]);
        names[i][NVML_DEVICE_NAME_V2_BUFFER_SIZE - 1] = '\0';
    }
    return FF_OK;
}

// A failed read leaves the value unreported; "not supported" (a GeForce without power readings, a
// MIG slice) is the device's answer, not an error.
static void nvml_note(ff_monitor *m, int64_t *errors, char *first, size_t cap, nvmlReturn_t rc, const char *call,
                      int gpu) {
    if (rc == NVML_SUCCESS || rc == NVML_ERROR_NOT_SUPPORTED) return;
    (*errors)++;
    if (!first[0]) snprintf(first, cap, "%s(GPU %d): %s (NVML error %d)", call, gpu, nvml_err(&m->nv, rc), rc);
}

static void nvml_read(ff_gpu_sample *s, ff_monitor *m, int i, int64_t *errors, char *first, size_t cap) {
    const nvml_source *nv = &m->nv;
    nvmlDevice_t d = nv->dev[i];
    int g = m->gpus[i];
    unsigned int u = 0;
    nvmlReturn_t rc = nv->temperature(d, NVML_TEMPERATURE_GPU, &u);
    if (rc == NVML_SUCCESS) s->temp_c = u;
    nvml_note(m, errors, first, cap, rc, "nvmlDeviceGetTemperature", g);
    if (nv->power) {
        rc = nv->power(d, &u);
        if (rc == NVML_SUCCESS) s->power_w = u / 1000.0;  // milliwatts
        nvml_note(m, errors, first, cap, rc, "nvmlDeviceGetPowerUsage", g);
    }
    if (nv->memory) {
        nvmlMemory_t mem;
        rc = nv->memory(d, &mem);
        if (rc == NVML_SUCCESS && mem.total <= (unsigned long long)INT64_MAX) {
            s->mem_used_bytes = (int64_t)mem.used;
            s->mem_total_bytes = (int64_t)mem.total;
        }
        nvml_note(m, errors, first, cap, rc, "nvmlDeviceGetMemoryInfo", g);
    }
    if (nv->utilization) {
        nvmlUtilization_t ut;
        rc = nv->utilization(d, &ut);
        if (rc == NVML_SUCCESS) {
            s->util_pct = ut.gpu;
            s->mem_util_pct = ut.memory;
        }
        nvml_note(m, errors, first, cap, rc, "nvmlDeviceGetUtilizationRates", g);
    }
    if (nv->clock) {
        rc = nv->clock(d, NVML_CLOCK_SM, &u);
        if (rc == NVML_SUCCESS) s->sm_clock_mhz = u;
        nvml_note(m, errors, first, cap, rc, "nvmlDeviceGetClockInfo", g);
    }
    if (nv->throttle) {
        unsigned long long r = 0;
        rc = nv->throttle(d, &r);
        if (rc == NVML_SUCCESS) s->throttle = (int64_t)(r & (unsigned long long)INT64_MAX);
        nvml_note(m, errors, first, cap, rc, "nvmlDeviceGetCurrentClocksThrottleReasons", g);
    }
}

// ---------------------------------------------------------------- sampling

// One round: read every watched GPU (outside the lock: NVML calls take tens of microseconds each),
// then append to the series and wake anyone waiting for new readings.
static void take_round(ff_monitor *m, double start) {
    double t = start - m->t0;
    ff_gpu_sample got[FF_MONITOR_MAX_GPUS];
    bool ok[FF_MONITOR_MAX_GPUS];
    int64_t errors = 0;
    char first[256] = "";
    for (int i = 0; i < m->o.n_gpus; i++) {
        ff_gpu_sample *s = &got[i];
        *s = (ff_gpu_sample){.t_s = t,
                             .gpu = m->gpus[i],
                             .temp_c = NAN,
                             .power_w = NAN,
                             .mem_used_bytes = -1,
                             .mem_total_bytes = -1,
                             .util_pct = NAN,
                             .mem_util_pct = NAN,
                             .sm_clock_mhz = NAN,
                             .throttle = -1};
        if (m->fake) {
            ok[i] = fake_read(s, &m->fk, m->gpus[i], t);
            s->t_s = t;
        } else {
            nvml_read(s, m, i, &errors, first, sizeof first);
            ok[i] = true;
        }
    }
    double took = now_s() - start;

    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->o.n_gpus; i++) {
        if (!ok[i]) continue;
        m->latest[i] = got[i];
        m->has_latest[i] = true;
        if (m->n == m->cap) {
            int64_t nc = m->cap ? 2 * m->cap : 256;
            ff_gpu_sample *ns = realloc(m->s, (size_t)nc * sizeof *ns);
            if (!ns) {
                m->ov.dropped++;  // keep monitoring (latest, the limit) even when the history cannot grow
                continue;
            }
            m->s = ns;
            m->cap = nc;
        }
        m->s[m->n++] = got[i];
    }
    m->ov.rounds++;
    m->ov.sample_s_total += took;
    if (took > m->ov.sample_s_max) m->ov.sample_s_max = took;
    m->ov.read_errors += errors;
    if (first[0] && !m->read_error[0]) snprintf(m->read_error, sizeof m->read_error, "%s", first);
    pthread_cond_broadcast(&m->round_done);
    pthread_mutex_unlock(&m->mu);
}

static void *sampler_main(void *arg) {
    ff_monitor *m = arg;
    const double interval = m->o.interval_ms / 1000.0;
    double next = m->t0 + interval;  // round 0 was taken by ff_monitor_start
    pthread_mutex_lock(&m->mu);
    while (!m->stopping) {
        struct timespec ts = abs_time(next);
        while (!m->stopping && now_s() < next) {
            int rc = pthread_cond_timedwait(&m->wake, &m->mu, &ts);
            if (rc != 0 && rc != ETIMEDOUT && rc != EINTR) break;
        }
        if (m->stopping) break;
        pthread_mutex_unlock(&m->mu);
        take_round(m, now_s());
        pthread_mutex_lock(&m->mu);
        // A fixed grid (no drift); after a stall (a suspended process, an overloaded machine) it
        // resumes one interval from now instead of taking the missed rounds back to back.
        next += interval;
        double t = now_s();
        if (next < t) next = t + interval;
    }
    m->running = false;
    pthread_cond_broadcast(&m->round_done);  // a pause waiting for readings learns there will be none
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

static void release(ff_monitor *m) {
    if (m->fake)
        free(m->fk.lines);
    else
        nvml_close(&m->nv);
    free(m->s);
    pthread_cond_destroy(&m->round_done);
    pthread_cond_destroy(&m->wake);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

ff_status ff_monitor_start(ff_monitor **out, const ff_monitor_options *o) {
    *out = NULL;
    FF_TRY(check_options(o));
    ff_monitor *m = calloc(1, sizeof *m);
    if (!m) return FF_FAIL(FF_ERR_OOM, "monitor: cannot allocate %zu bytes", sizeof *m);
    m->o = *o;
    for (int i = 0; i < o->n_gpus; i++) {
        m->gpus[i] = o->gpus[i];
        if (o->pci_bus_ids) {
            snprintf(m->pci[i], sizeof m->pci[i], "%s", o->pci_bus_ids[i]);
            m->pci_ptr[i] = m->pci[i];
        }
    }
    m->o.gpus = m->gpus;
    m->o.pci_bus_ids = o->pci_bus_ids ? m->pci_ptr : NULL;
    m->o.fake_sensors = NULL;  // the caller's strings need not outlive this call
    m->o.nvml_library = NULL;

    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);  // deadlines from now_s(), immune to clock changes
    pthread_cond_init(&m->wake, &ca);
    pthread_cond_init(&m->round_done, &ca);
    pthread_condattr_destroy(&ca);

    const char *env = getenv("FF_FAKE_SENSORS");
    const char *fake = o->fake_sensors ? o->fake_sensors : (env && env[0] ? env : NULL);
    ff_status st;
    if (fake) {
        m->fake = true;
        st = fake_open(&m->fk, fake, o->fake_sensors ? "monitor" : "FF_FAKE_SENSORS", o);
        for (int i = 0; i < o->n_gpus; i++) snprintf(m->names[i], sizeof m->names[i], "fake GPU %d", o->gpus[i]);
    } else {
        st = nvml_open(&m->nv, m->names, o);
    }
    if (st != FF_OK) {
        release(m);
        return st;
    }
    m->t0 = now_s();
    take_round(m, m->t0);  // readings from the first moment (t = 0 exactly)
    m->running = true;
    int rc = pthread_create(&m->thread, NULL, sampler_main, m);
    if (rc != 0) {
        release(m);
        return FF_FAIL(FF_ERR_INTERNAL, "monitor: cannot start the sampling thread: %s", strerror(rc));
    }
    m->thread_started = true;
    *out = m;
    return FF_OK;
}

void ff_monitor_stop(ff_monitor *m) {
    if (!m || !m->thread_started) return;
    pthread_mutex_lock(&m->mu);
    m->stopping = true;
    pthread_cond_broadcast(&m->wake);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
    m->thread_started = false;
    pthread_mutex_lock(&m->mu);
    m->t_stop = now_s();
    pthread_mutex_unlock(&m->mu);
}

void ff_monitor_destroy(ff_monitor *m) {
    if (!m) return;
    ff_monitor_stop(m);
    release(m);
}

int ff_monitor_gpu_count(const ff_monitor *m) {
    return m->o.n_gpus;
}

const char *ff_monitor_source(const ff_monitor *m) {
    return m->fake ? "fake" : "nvml";
}

const char *ff_monitor_gpu_name(const ff_monitor *m, int i) {
    return i >= 0 && i < m->o.n_gpus ? m->names[i] : "";
}

int64_t ff_monitor_sample_count(ff_monitor *m) {
    pthread_mutex_lock(&m->mu);
    int64_t n = m->n;
    pthread_mutex_unlock(&m->mu);
    return n;
}

ff_status ff_monitor_sample(ff_gpu_sample *out, ff_monitor *m, int64_t k) {
    pthread_mutex_lock(&m->mu);
    int64_t n = m->n;
    if (k >= 0 && k < n) *out = m->s[k];
    pthread_mutex_unlock(&m->mu);
    if (k < 0 || k >= n)
        return FF_FAIL(FF_ERR_INPUT, "monitor: sample %lld: expected 0..%lld", (long long)k, (long long)n - 1);
    return FF_OK;
}

void ff_monitor_latest(ff_gpu_sample *out, int *n, ff_monitor *m, int cap) {
    *n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->o.n_gpus && *n < cap; i++)
        if (m->has_latest[i]) out[(*n)++] = m->latest[i];
    pthread_mutex_unlock(&m->mu);
}

// ---------------------------------------------------------------- text

typedef struct {
    char *buf;
    size_t cap, len;  // len: what the whole text needs, even past cap
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *dst = t->len < t->cap ? t->buf + t->len : NULL;
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int k = vsnprintf(dst, room, fmt, ap);
    va_end(ap);
    if (k > 0) t->len += (size_t)k;
}

static const struct {
    uint64_t bit;
    const char *name;
} THROTTLE_NAMES[] = {
    {FF_THROTTLE_IDLE, "idle"},
    {FF_THROTTLE_APP_CLOCKS, "app-clocks"},
    {FF_THROTTLE_SW_POWER_CAP, "sw-power-cap"},
    {FF_THROTTLE_HW_SLOWDOWN, "hw-slowdown"},
    {FF_THROTTLE_SYNC_BOOST, "sync-boost"},
    {FF_THROTTLE_SW_THERMAL, "sw-thermal"},
    {FF_THROTTLE_HW_THERMAL, "hw-thermal"},
    {FF_THROTTLE_HW_POWER_BRAKE, "hw-power-brake"},
};

static void throttle_text(text *t, uint64_t mask) {
    bool first = true;
    for (size_t i = 0; i < sizeof THROTTLE_NAMES / sizeof THROTTLE_NAMES[0]; i++) {
        if (!(mask & THROTTLE_NAMES[i].bit)) continue;
        put(t, "%s%s", first ? "" : ",", THROTTLE_NAMES[i].name);
        first = false;
        mask &= ~THROTTLE_NAMES[i].bit;
    }
    if (mask) put(t, "%s0x%llx", first ? "" : ",", (unsigned long long)mask);
}

int ff_monitor_throttle_names(char *buf, size_t cap, uint64_t mask) {
    text t = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    throttle_text(&t, mask);
    return (int)t.len;
}

int ff_monitor_format(char *buf, size_t cap, const ff_gpu_sample *s, int n) {
    text t = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    const double gib = 1024.0 * 1024.0 * 1024.0;
    for (int i = 0; i < n; i++) {
        const ff_gpu_sample *g = &s[i];
        put(&t, "%sGPU%d ", i ? " | " : "", g->gpu);
        if (isnan(g->temp_c))
            put(&t, "-C ");
        else
            put(&t, "%.0fC ", g->temp_c);
        if (isnan(g->power_w))
            put(&t, "-W ");
        else
            put(&t, "%.0fW ", g->power_w);
        if (g->mem_used_bytes < 0)
            put(&t, "-/");
        else
            put(&t, "%.1f/", g->mem_used_bytes / gib);
        if (g->mem_total_bytes < 0)
            put(&t, "-GiB ");
        else
            put(&t, "%.1fGiB ", g->mem_total_bytes / gib);
        if (isnan(g->util_pct))
            put(&t, "-%% ");
        else
            put(&t, "%.0f%% ", g->util_pct);
        if (isnan(g->sm_clock_mhz))
            put(&t, "-MHz");
        else
            put(&t, "%.0fMHz", g->sm_clock_mhz);
        if (g->throttle > 0) {
            put(&t, " throttled: ");
            throttle_text(&t, (uint64_t)g->throttle);
        }
    }
    return t.len > INT_MAX ? INT_MAX : (int)t.len;
}

// ---------------------------------------------------------------- the temperature limit

// The hottest watched GPU over the limit (index into gpus), or -1. Called with the lock held.
static int hottest_over(const ff_monitor *m, double limit) {
    int hot = -1;
    for (int i = 0; i < m->o.n_gpus; i++) {
        if (!m->has_latest[i] || !(m->latest[i].temp_c > limit)) continue;
        if (hot < 0 || m->latest[i].temp_c > m->latest[hot].temp_c) hot = i;
    }
    return hot;
}

ff_status ff_monitor_check_temperature(ff_temp_check *out, ff_monitor *m, ff_monitor_notify notify, void *ctx) {
    const double c0 = now_s();
    *out = (ff_temp_check){.warned = false, .warning = "", .paused_s = 0, .hot_gpu = -1, .hot_temp_c = NAN};
    const double max = m->o.max_temp_c, cool = max - FF_MONITOR_COOL_MARGIN_C;

    pthread_mutex_lock(&m->mu);
    m->ov.check_calls++;
    int hot = hottest_over(m, max);
    if (hot < 0) {
        // The episode ends only once every GPU is back under the resume mark: a GPU hovering just
        // under the limit does not earn a new warning each time it crosses it.
        if (hottest_over(m, cool) < 0) m->episode = false;
        m->ov.check_s_total += now_s() - c0;
        pthread_mutex_unlock(&m->mu);
        return FF_OK;
    }
    const int gpu = m->gpus[hot];
    const double temp = m->latest[hot].temp_c;
    out->hot_gpu = gpu;
    out->hot_temp_c = temp;
    if (m->o.temp_action == FF_TEMP_STOP) {
        m->episode = true;
        m->ov.check_s_total += now_s() - c0;
        pthread_mutex_unlock(&m->mu);
        return FF_FAIL(FF_ERR_CUDA,
                       "GPU%d is at %.0fC, over --max-temp %gC (temperature action stop): training stopped", gpu, temp,
                       max);
    }
    const bool first = !m->episode;
    m->episode = true;
    if (first) {
        m->warnings++;
        out->warned = true;
        snprintf(out->warning, sizeof out->warning,
                 "warning: GPU%d is at %.0fC, over --max-temp %gC: pausing until it cools to %gC (at most %g s)", gpu,
                 temp, max, cool, m->o.pause_limit_s);
    }
    m->ov.check_s_total += now_s() - c0;
    pthread_mutex_unlock(&m->mu);
    if (first && notify) notify(ctx, out->warning);

    // Wait for new rounds until every GPU that was over the limit is at or below the resume mark.
    const double p0 = now_s(), deadline = p0 + m->o.pause_limit_s;
    bool waiting[FF_MONITOR_MAX_GPUS] = {false};
    ff_status st = FF_OK;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        int still = -1;
        for (int i = 0; i < m->o.n_gpus; i++) {
            if (!m->has_latest[i]) continue;
            double t = m->latest[i].temp_c;
            if (t > max)
                waiting[i] = true;
            else if (waiting[i] && t <= cool)
                waiting[i] = false;
            if (waiting[i] && (still < 0 || !(m->latest[i].temp_c <= m->latest[still].temp_c))) still = i;
        }
        if (still < 0) break;
        double t_now = now_s();
        if (t_now >= deadline) {
            st = FF_FAIL(FF_ERR_CUDA,
                         "GPU%d is still at %.0fC after pausing %.0f s (the pause limit): it did not cool to %gC "
                         "(--max-temp %gC minus %gC)",
                         m->gpus[still], m->latest[still].temp_c, t_now - p0, cool, max, FF_MONITOR_COOL_MARGIN_C);
            break;
        }
        if (!m->running) {
            st = FF_FAIL(FF_ERR_INTERNAL, "monitor stopped while waiting for GPU%d (%.0fC) to cool to %gC",
                         m->gpus[still], m->latest[still].temp_c, cool);
            break;
        }
        struct timespec ts = abs_time(deadline);
        pthread_cond_timedwait(&m->round_done, &m->mu, &ts);
    }
    out->paused_s = now_s() - p0;
    m->ov.pauses++;
    m->ov.paused_s += out->paused_s;
    if (st == FF_OK) m->episode = false;
    pthread_mutex_unlock(&m->mu);
    return st;
}

// ---------------------------------------------------------------- overhead and JSON

// Called with the lock held.
static void overhead_locked(ff_monitor_overhead *out, const ff_monitor *m) {
    *out = m->ov;
    double end = m->t_stop > 0 ? m->t_stop : now_s();
    out->elapsed_s = end - m->t0;
    out->fraction = out->elapsed_s > 0 ? out->sample_s_total / out->elapsed_s : 0;
}

void ff_monitor_overhead_get(ff_monitor_overhead *out, ff_monitor *m) {
    pthread_mutex_lock(&m->mu);
    overhead_locked(out, m);
    pthread_mutex_unlock(&m->mu);
}

static void json_opt_int(ff_json *j, int64_t v) {
    if (v < 0)
        ff_json_str(j, NULL, NULL);  // null: not reported
    else
        ff_json_int(j, NULL, v);
}

void ff_monitor_write_json(ff_json *j, const char *key, ff_monitor *m) {
    pthread_mutex_lock(&m->mu);
    ff_json_begin_object(j, key);
    ff_json_int(j, "interval_ms", m->o.interval_ms);
    ff_json_str(j, "source", m->fake ? "fake" : "nvml");
    ff_json_num(j, "max_temp_c", m->o.max_temp_c);
    ff_json_str(j, "temp_action", m->o.temp_action == FF_TEMP_STOP ? "stop" : "pause");
    ff_json_num(j, "pause_limit_s", m->o.pause_limit_s);
    ff_json_begin_array(j, "gpus");
    for (int i = 0; i < m->o.n_gpus; i++) {
        ff_json_begin_object(j, NULL);
        ff_json_int(j, "index", m->gpus[i]);
        ff_json_str(j, "name", m->names[i]);
        if (m->o.pci_bus_ids) ff_json_str(j, "pci_bus_id", m->pci[i]);
        ff_json_end_object(j);
    }
    ff_json_end_array(j);

    // Parallel arrays rather than one object per sample: a ten-hour run at 500 ms is ~72,000
    // samples per GPU, and plot scripts read columns.
    ff_json_begin_object(j, "samples");
#define COLUMN(name, expr)                     \
    do {                                       \
        ff_json_begin_array(j, name);          \
        for (int64_t k = 0; k < m->n; k++) {   \
            const ff_gpu_sample *s = &m->s[k]; \
            expr;                              \
        }                                      \
        ff_json_end_array(j);                  \
    } while (0)
    COLUMN("t", ff_json_num(j, NULL, s->t_s));
    COLUMN("gpu", ff_json_int(j, NULL, s->gpu));
    COLUMN("temp_c", ff_json_num(j, NULL, s->temp_c));
    COLUMN("power_w", ff_json_num(j, NULL, s->power_w));
    COLUMN("mem_used_bytes", json_opt_int(j, s->mem_used_bytes));
    COLUMN("mem_total_bytes", json_opt_int(j, s->mem_total_bytes));
    COLUMN("util_pct", ff_json_num(j, NULL, s->util_pct));
    COLUMN("mem_util_pct", ff_json_num(j, NULL, s->mem_util_pct));
    COLUMN("sm_clock_mhz", ff_json_num(j, NULL, s->sm_clock_mhz));
    COLUMN("throttle", json_opt_int(j, s->throttle));
#undef COLUMN
    ff_json_end_object(j);

    ff_monitor_overhead ov;
    overhead_locked(&ov, m);
    ff_json_begin_object(j, "overhead");
    ff_json_int(j, "rounds", ov.rounds);
    ff_json_num(j, "sample_s_total", ov.sample_s_total);
    ff_json_num(j, "sample_s_max", ov.sample_s_max);
    ff_json_num(j, "elapsed_s", ov.elapsed_s);
    ff_json_num(j, "fraction", ov.fraction);
    ff_json_int(j, "check_calls", ov.check_calls);
    ff_json_num(j, "check_s_total", ov.check_s_total);
    ff_json_int(j, "read_errors", ov.read_errors);
    if (m->read_error[0]) ff_json_str(j, "first_read_error", m->read_error);
    ff_json_int(j, "dropped", ov.dropped);
    ff_json_end_object(j);

    ff_json_begin_object(j, "temperature");
    ff_json_int(j, "pauses", ov.pauses);
    ff_json_num(j, "paused_s", ov.paused_s);
    ff_json_int(j, "warnings", m->warnings);
    ff_json_end_object(j);
    ff_json_end_object(j);
    pthread_mutex_unlock(&m->mu);
}
