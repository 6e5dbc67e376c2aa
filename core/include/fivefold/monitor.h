// GPU monitoring and the temperature safety limit (issue 16). A background thread samples the
// watched GPUs every interval — temperature, power, memory, utilisation, SM clock, clock-throttle
// reasons — into a growing time series that the trainer prints on its progress line, embeds in
// its --json file under "monitor", and consults between steps (ff_monitor_check_temperature) to
// pause or stop a GPU that runs too hot.
//
// Sensor sources:
//   nvml  libnvidia-ml.so.1, opened with dlopen when the monitor starts, so the binary runs (and
//         every other mode works) on a machine without an NVIDIA driver: there ff_monitor_start
//         returns FF_ERR_NO_CUDA naming the library. Not nvidia-smi: one sample costs microseconds
//         of library calls, not a process start.
//   fake  test hook: the environment variable FF_FAKE_SENSORS=PATH (or options.fake_sensors) names
//         a text file; '#' starts a comment, blank lines are skipped, every other line is
//             t_seconds gpu temp_c power_w mem_used_mib mem_total_mib util_pct sm_clock_mhz throttle_hex
//         with an optional 10th field mem_util_pct. A sensor value may be "nan" (not reported). For
//         each GPU the source returns the last line whose t_seconds <= the time since
//         ff_monitor_start, so a file can script "hot for 1 s, then cool". t_seconds must not
//         decrease between lines of one GPU, and every watched GPU needs at least one line (a GPU
//         has no reading before its first line's time). A bad line is refused (FF_ERR_INPUT)
//         naming the file, the line number and the field.
//
// GPU indices: options.gpus are NVML's indices (nvidia-smi's order: PCI bus order), which are not
// CUDA's device numbers under CUDA_VISIBLE_DEVICES or CUDA's default fastest-first order. A caller
// that knows its CUDA device passes its PCI bus id (cudaDeviceGetPCIBusId) in options.pci_bus_ids;
// gpus[] then only labels the GPU in lines and JSON.
//
// Thread safety: every function taking an ff_monitor may be called from any thread while the
// sampler runs (one mutex guards the series). Errors are returned as ff_status with a message
// (status.h); the library never prints.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fivefold/json.h"
#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_MONITOR_MAX_GPUS 16
#define FF_MONITOR_INTERVAL_MS_DEFAULT 500
#define FF_MONITOR_INTERVAL_MS_MIN 10
#define FF_MONITOR_INTERVAL_MS_MAX 60000
#define FF_MONITOR_MAX_TEMP_C_DEFAULT 85.0
#define FF_MONITOR_MAX_TEMP_C_MIN 20.0
#define FF_MONITOR_MAX_TEMP_C_MAX 150.0
#define FF_MONITOR_COOL_MARGIN_C 5.0  // a paused GPU resumes at or below max_temp_c - this
#define FF_MONITOR_PAUSE_LIMIT_S_DEFAULT 600.0
#define FF_MONITOR_PAUSE_LIMIT_S_MAX 86400.0

// Clock-throttle reason bits (NVML's nvmlClocksThrottleReason*, the same values).
#define FF_THROTTLE_IDLE 0x1ull
#define FF_THROTTLE_APP_CLOCKS 0x2ull
#define FF_THROTTLE_SW_POWER_CAP 0x4ull
#define FF_THROTTLE_HW_SLOWDOWN 0x8ull
#define FF_THROTTLE_SYNC_BOOST 0x10ull
#define FF_THROTTLE_SW_THERMAL 0x20ull
#define FF_THROTTLE_HW_THERMAL 0x40ull
#define FF_THROTTLE_HW_POWER_BRAKE 0x80ull

// What ff_monitor_check_temperature does when a watched GPU is over max_temp_c.
typedef enum {
    FF_TEMP_PAUSE = 0,  // warn, then block until every hot GPU is at or below max - 5 C (or the pause limit)
    FF_TEMP_STOP,       // return an error naming the GPU, its temperature and --max-temp
} ff_temp_action;

typedef struct {
    const int *gpus;                 // [n_gpus] NVML indices to watch (this rank's GPUs), distinct, >= 0
    int n_gpus;                      // 1..FF_MONITOR_MAX_GPUS
    const char *const *pci_bus_ids;  // [n_gpus] or NULL: look the GPUs up by PCI bus id instead (header)
    int interval_ms;                 // sampling period, FF_MONITOR_INTERVAL_MS_MIN..MAX (default 500)
    double max_temp_c;               // limit in C, FF_MONITOR_MAX_TEMP_C_MIN..MAX (default 85)
    ff_temp_action temp_action;      // default FF_TEMP_PAUSE
    double pause_limit_s;            // longest one pause may last, (0, 86400] s (default 600)
    const char *fake_sensors;        // fake-source file, or NULL: $FF_FAKE_SENSORS if set and non-empty
    const char *nvml_library;        // NULL: "libnvidia-ml.so.1" (tests point it at a missing file)
} ff_monitor_options;

// One reading of one GPU. Values a sensor did not report are NaN (doubles) or -1 (integers).
typedef struct {
    double t_s;               // seconds since ff_monitor_start (monotonic clock)
    int gpu;                  // the GPU's label: options.gpus[i]
    double temp_c;            // core temperature, C
    double power_w;           // board power draw, W
    int64_t mem_used_bytes;   // device memory in use, bytes
    int64_t mem_total_bytes;  // device memory, bytes
    double util_pct;          // % of the last sample period a kernel was running
    double mem_util_pct;      // % of that period device memory was read or written
    double sm_clock_mhz;      // current SM clock, MHz
    int64_t throttle;         // FF_THROTTLE_* bits, 0 when nothing limits the clocks
} ff_gpu_sample;

// What the sampler thread cost, so a run can report monitoring overhead as a fraction of its time.
typedef struct {
    int64_t rounds;         // sampling rounds (one reading of every watched GPU each)
    double sample_s_total;  // wall seconds spent reading sensors, summed over rounds
    double sample_s_max;    // the slowest round, s
    double elapsed_s;       // seconds since ff_monitor_start (until ff_monitor_stop once stopped)
    double fraction;        // sample_s_total / elapsed_s (0 when elapsed is 0)
    int64_t check_calls;    // ff_monitor_check_temperature calls
    double check_s_total;   // their wall seconds on the caller's thread, pauses excluded
    int64_t read_errors;    // sensor reads that failed (value recorded as NaN / -1), "not supported" excluded
    int64_t dropped;        // samples not stored because the series could not grow (out of memory)
    int64_t pauses;         // temperature pauses so far
    double paused_s;        // seconds spent in them
} ff_monitor_overhead;

// Result of one ff_monitor_check_temperature call.
typedef struct {
    bool warned;        // warning[] holds a new warning (the first check of an episode of overheating)
    char warning[256];  // "" unless warned; print it once
    double paused_s;    // how long this call blocked waiting for the GPUs to cool (0: no pause)
    int hot_gpu;        // the GPU that was over the limit, -1 if none
    double hot_temp_c;  // its temperature, NaN if none
} ff_temp_check;

// Called with the warning before a pause begins (so the user learns why training stopped moving).
typedef void (*ff_monitor_notify)(void *ctx, const char *warning);

typedef struct ff_monitor ff_monitor;

void ff_monitor_options_default(ff_monitor_options *o);  // all defaults; gpus/n_gpus still to set

// Validates the options (FF_ERR_INPUT naming the field), opens the source (FF_ERR_NO_CUDA naming
// libnvidia-ml.so.1 or the failing NVML call when there is no usable driver; FF_ERR_INPUT/IO for a
// bad fake file), takes the first sample synchronously (ff_monitor_latest has readings at once)
// and starts the sampler thread. *out is NULL on failure.
ff_status ff_monitor_start(ff_monitor **out, const ff_monitor_options *o);
// Stops and joins the sampler; the series stays readable. Idempotent.
void ff_monitor_stop(ff_monitor *m);
// Stops if needed, closes the source (nvmlShutdown, dlclose) and frees. NULL is fine.
void ff_monitor_destroy(ff_monitor *m);

int ff_monitor_gpu_count(const ff_monitor *m);       // options.n_gpus
const char *ff_monitor_source(const ff_monitor *m);  // "nvml" or "fake"
// The GPU's name ("NVIDIA H200", "fake GPU 0") for watched GPU i (0 <= i < n_gpus).
const char *ff_monitor_gpu_name(const ff_monitor *m, int i);
int64_t ff_monitor_sample_count(ff_monitor *m);  // samples stored so far (all GPUs)
// Copies sample k (0 <= k < count, oldest first) into *out; FF_ERR_INPUT when out of range.
ff_status ff_monitor_sample(ff_gpu_sample *out, ff_monitor *m, int64_t k);

// The newest reading of each watched GPU, in options.gpus order: out[cap] gets *n <= cap entries
// (a GPU without a reading yet is left out).
void ff_monitor_latest(ff_gpu_sample *out, int *n, ff_monitor *m, int cap);

// Progress-line text, snprintf-like (returns the length it needed; buf is always terminated):
//   "GPU0 64C 412W 23.1/141.0GiB 98% 1980MHz throttled: sw-power-cap,sw-thermal"
// one such group per sample, separated by " | "; GiB = 2^30 bytes; unreported values print "-".
int ff_monitor_format(char *buf, size_t cap, const ff_gpu_sample *s, int n);
// The names of the FF_THROTTLE_* bits in mask, comma-separated ("" for 0; unknown bits as hex).
int ff_monitor_throttle_names(char *buf, size_t cap, uint64_t mask);

// The temperature limit, for the trainer to call between steps: FF_OK when no watched GPU is over
// max_temp_c. When one is: the first check of that episode fills out->warning (warned = true)
// and passes it to notify (may be NULL) at once; then
//   FF_TEMP_STOP: returns FF_ERR_CUDA naming the GPU, its temperature and --max-temp;
//   FF_TEMP_PAUSE: blocks, watching new samples, until every GPU that was over is at or below
//     max_temp_c - FF_MONITOR_COOL_MARGIN_C (FF_OK, out->paused_s set) or pause_limit_s has passed
//     (FF_ERR_CUDA naming the GPU, its temperature and the limit).
// Under MPI the other ranks wait in their next collective while one pauses: keep the pause limit
// below the communication timeout.
ff_status ff_monitor_check_temperature(ff_temp_check *out, ff_monitor *m, ff_monitor_notify notify, void *ctx);

void ff_monitor_overhead_get(ff_monitor_overhead *out, ff_monitor *m);

// Writes the monitor as one JSON object under key (NULL at the top level or inside an array):
//   {"interval_ms": 500, "source": "nvml"|"fake", "max_temp_c": 85, "temp_action": "pause"|"stop",
//    "pause_limit_s": 600, "gpus": [{"index": 0, "name": "..."}],
//    "samples": {"t": [s], "gpu": [index], "temp_c": [C], "power_w": [W], "mem_used_bytes": [],
//                "mem_total_bytes": [], "util_pct": [], "mem_util_pct": [], "sm_clock_mhz": [],
//                "throttle": [bitmask]},          (parallel arrays, one entry per sample; null = not reported)
//    "overhead": {"rounds", "sample_s_total", "sample_s_max", "elapsed_s", "fraction", "check_calls",
//                 "check_s_total", "read_errors", "dropped"},
//    "temperature": {"pauses", "paused_s", "warnings"}}
void ff_monitor_write_json(ff_json *j, const char *key, ff_monitor *m);

#ifdef __cplusplus
}
#endif
