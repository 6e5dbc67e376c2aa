// GPU monitoring (issue 16) without a GPU: the fake sensor source replays scripted readings, so
// the series, the progress line, the JSON and the temperature limit (warn, pause until cool, stop,
// pause limit) are checked against exact values; a bad fake file and a missing NVML give clear
// statuses. About 3 s in all (two scripted pauses of ~1 s and ~0.3 s).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fivefold/json.h"
#include "fivefold/monitor.h"
#include "fivefold/status.h"

static const int64_t MIB = 1048576;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

// Writes text into a new temporary file; path gets its name.
static void write_file(char path[64], const char *text) {
    snprintf(path, 64, "/tmp/ff_monitor_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void contains(const char *haystack, const char *needle) {
    if (!strstr(haystack, needle)) fail_msg("expected '%s' in: %s", needle, haystack);
}

static ff_monitor_options fake_options(const int *gpus, int n, const char *path, int interval_ms) {
    ff_monitor_options o;
    ff_monitor_options_default(&o);
    o.gpus = gpus;
    o.n_gpus = n;
    o.fake_sensors = path;
    o.interval_ms = interval_ms;
    return o;
}

// Line 1 at t = 0, line 2 from t = 0.4 s: the latest reading, the progress line and the series.
// Selected through the environment variable (the test hook the trainer's tests use).
static void replays_fake_readings(void **state) {
    (void)state;
    char path[64];
    write_file(path,
               "# t gpu temp power used_mib total_mib util sm_mhz throttle mem_util\n"
               "0   0  64 412.4 23654 144384 98 1980 0x24 41\n"
               "\n"
               "0.4 0  70 500   30000 144384 100 1755 0   # cooler clocks, no throttling\n");
    assert_int_equal(setenv("FF_FAKE_SENSORS", path, 1), 0);
    const int gpus[] = {0};
    ff_monitor_options o = fake_options(gpus, 1, NULL, 50);
    ff_monitor *m = NULL;
    assert_int_equal(ff_monitor_start(&m, &o), FF_OK);
    assert_string_equal(ff_monitor_source(m), "fake");
    assert_string_equal(ff_monitor_gpu_name(m, 0), "fake GPU 0");

    ff_gpu_sample s[2];
    int n = -1;
    ff_monitor_latest(s, &n, m, 2);
    assert_int_equal(n, 1);
    assert_int_equal(s[0].gpu, 0);
    assert_true(s[0].temp_c == 64 && s[0].power_w == 412.4 && s[0].util_pct == 98 && s[0].mem_util_pct == 41 &&
                s[0].sm_clock_mhz == 1980);
    assert_int_equal(s[0].mem_used_bytes, 23654 * MIB);
    assert_int_equal(s[0].mem_total_bytes, 144384 * MIB);
    assert_int_equal(s[0].throttle, 0x24);
    char line[256];
    ff_monitor_format(line, sizeof line, s, n);
    assert_string_equal(line, "GPU0 64C 412W 23.1/141.0GiB 98% 1980MHz throttled: sw-power-cap,sw-thermal");

    sleep_s(0.7);
    ff_monitor_latest(s, &n, m, 2);
    assert_int_equal(n, 1);
    assert_true(s[0].temp_c == 70 && s[0].power_w == 500 && isnan(s[0].mem_util_pct));
    assert_int_equal(s[0].throttle, 0);
    ff_monitor_format(line, sizeof line, s, n);
    assert_string_equal(line, "GPU0 70C 500W 29.3/141.0GiB 100% 1755MHz");

    ff_monitor_stop(m);
    ff_monitor_overhead ov;
    ff_monitor_overhead_get(&ov, m);
    const int64_t count = ff_monitor_sample_count(m);
    // One round at start, then one per 50 ms: never more than the grid allows, and not far fewer.
    assert_int_equal(count, ov.rounds);
    assert_true(ov.elapsed_s >= 0.7);
    assert_true((double)count <= 1 + ov.elapsed_s / 0.05 + 1e-6);
    assert_true((double)count >= 0.4 * ov.elapsed_s / 0.05);
    assert_true(ov.sample_s_total >= 0 && ov.sample_s_max <= ov.sample_s_total && ov.fraction < 0.5);
    ff_gpu_sample first, last;
    assert_int_equal(ff_monitor_sample(&first, m, 0), FF_OK);
    assert_int_equal(ff_monitor_sample(&last, m, count - 1), FF_OK);
    assert_true(first.t_s < 0.05 && first.temp_c == 64);
    assert_true(last.t_s >= 0.4 && last.temp_c == 70);
    double prev = -1;
    for (int64_t k = 0; k < count; k++) {
        ff_gpu_sample x;
        assert_int_equal(ff_monitor_sample(&x, m, k), FF_OK);
        assert_true(x.t_s >= prev);
        assert_true(x.temp_c == (x.t_s < 0.4 ? 64 : 70));
        prev = x.t_s;
    }
    const double mean_gap = (last.t_s - first.t_s) / (double)(count - 1);
    assert_true(mean_gap >= 0.045 && mean_gap <= 0.15);
    assert_int_equal(ff_monitor_sample(&first, m, count), FF_ERR_INPUT);
    sleep_s(0.12);  // stopped: the series no longer grows
    assert_int_equal(ff_monitor_sample_count(m), count);
    ff_monitor_destroy(m);
    unsetenv("FF_FAKE_SENSORS");
    unlink(path);
}

// The progress line with several GPUs, unreported values and throttle bits outside the main eight.
static void formats_progress_line(void **state) {
    (void)state;
    ff_gpu_sample s[2] = {
        {.gpu = 3,
         .temp_c = 81.4,
         .power_w = 699.6,
         .mem_used_bytes = 1 << 30,
         .mem_total_bytes = 80LL << 30,
         .util_pct = 7,
         .sm_clock_mhz = 1410,
         .throttle = 0x141},
        {.gpu = 4,
         .temp_c = NAN,
         .power_w = NAN,
         .mem_used_bytes = -1,
         .mem_total_bytes = -1,
         .util_pct = NAN,
         .sm_clock_mhz = NAN,
         .throttle = -1},
    };
    char line[256];
    int len = ff_monitor_format(line, sizeof line, s, 2);
    const char *want =
        "GPU3 81C 700W 1.0/80.0GiB 7% 1410MHz throttled: idle,hw-thermal,0x100 | GPU4 -C -W -/-GiB -% -MHz";
    assert_string_equal(line, want);
    assert_int_equal(len, (int)strlen(want));
    char small[10];
    assert_int_equal(ff_monitor_format(small, sizeof small, s, 2), len);  // snprintf-like: the length needed
    assert_string_equal(small, "GPU3 81C ");
    assert_int_equal(ff_monitor_throttle_names(line, sizeof line, 0xff),
                     (int)strlen("idle,app-clocks,sw-power-cap,hw-slowdown,sync-boost,sw-thermal,hw-thermal,"
                                 "hw-power-brake"));
    assert_string_equal(line,
                        "idle,app-clocks,sw-power-cap,hw-slowdown,sync-boost,sw-thermal,hw-thermal,hw-power-brake");
    ff_monitor_throttle_names(line, sizeof line, 0);
    assert_string_equal(line, "");
}

// The JSON object: every key, exact values from the file, one entry per sample in every column,
// and (where python3 is found) a document json.load accepts.
static void writes_json_series(void **state) {
    (void)state;
    char path[64];
    write_file(path,
               "0 0 50 100.5 1024 2048 10 1500 0x0 5\n"
               "0 1 60 200 nan 4096 20 1600 0x8\n");
    const int gpus[] = {1, 0};
    ff_monitor_options o = fake_options(gpus, 2, path, 20);
    ff_monitor *m = NULL;
    assert_int_equal(ff_monitor_start(&m, &o), FF_OK);
    sleep_s(0.1);
    ff_temp_check tc;
    assert_int_equal(ff_monitor_check_temperature(&tc, m, NULL, NULL), FF_OK);
    ff_monitor_stop(m);
    const int64_t count = ff_monitor_sample_count(m);
    assert_true(count >= 4 && count % 2 == 0);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ff_json j;
    ff_json_init(&j, f);
    j.pretty = false;
    ff_monitor_write_json(&j, NULL, m);
    fclose(f);
    contains(buf,
             "{\"interval_ms\":20,\"source\":\"fake\",\"max_temp_c\":85,\"temp_action\":\"pause\","
             "\"pause_limit_s\":600,");
    contains(buf, "\"gpus\":[{\"index\":1,\"name\":\"fake GPU 1\"},{\"index\":0,\"name\":\"fake GPU 0\"}]");
    // Samples in watch order (GPU 1 first), unreported memory as null.
    contains(buf, "\"samples\":{\"t\":[0,0,");
    contains(buf, "\"gpu\":[1,0,1,0,");
    contains(buf, "\"temp_c\":[60,50,60,50,");
    contains(buf, "\"power_w\":[200,100.5,");
    contains(buf, "\"mem_used_bytes\":[null,1073741824,null,1073741824,");
    contains(buf, "\"mem_total_bytes\":[4294967296,2147483648,");
    contains(buf, "\"util_pct\":[20,10,");
    contains(buf, "\"mem_util_pct\":[null,5,");
    contains(buf, "\"sm_clock_mhz\":[1600,1500,");
    contains(buf, "\"throttle\":[8,0,8,0");
    contains(buf, "\"overhead\":{\"rounds\":");
    contains(buf, "\"check_calls\":1,");
    contains(buf, "\"read_errors\":0,\"dropped\":0}");
    contains(buf, "\"temperature\":{\"pauses\":0,\"paused_s\":0,\"warnings\":0}}");
    // Every column has exactly count entries.
    const char *cols[] = {"\"t\":[", "\"temp_c\":[", "\"throttle\":["};
    for (size_t c = 0; c < 3; c++) {
        const char *p = strstr(buf, cols[c]);
        assert_non_null(p);
        int64_t commas = 0;
        for (p += strlen(cols[c]); *p && *p != ']'; p++) commas += *p == ',';
        assert_int_equal(commas + 1, count);
    }

    char jpath[64];
    write_file(jpath, buf);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d[\"samples\"]; "
             "sys.exit(0 if all(len(v)==%lld for v in s.values()) and len(s)==10 else 1)' %s 2>/dev/null",
             (long long)count, jpath);
    int rc = system(cmd);
    if (rc != -1 && WEXITSTATUS(rc) != 127) assert_int_equal(WEXITSTATUS(rc), 0);  // 127: no python3 here
    unlink(jpath);
    free(buf);
    ff_monitor_destroy(m);
    unlink(path);
}

static int notified;
static char notified_text[256];
static void on_warning(void *ctx, const char *warning) {
    assert_ptr_equal(ctx, &notified);
    notified++;
    snprintf(notified_text, sizeof notified_text, "%s", warning);
}

// Hot (90 C) for 0.6 s, then 83 C (under the limit but above the resume mark 80 C), cool from
// 1.0 s: the pause must last until 1.0 s, warn exactly once, and the next check passes at once.
static void pauses_until_cool(void **state) {
    (void)state;
    char path[64];
    write_file(path,
               "0   0 90 700 1000 80000 100 1980 0x40\n"
               "0.6 0 83 300 1000 80000 0   1980 0x0\n"
               "1.0 0 70 100 1000 80000 0   1980 0x0\n");
    const int gpus[] = {0};
    ff_monitor_options o = fake_options(gpus, 1, path, 20);
    o.pause_limit_s = 5;  // a broken pause fails in seconds, not in the default 10 minutes
    ff_monitor *m = NULL;
    const double t0 = now_s();
    assert_int_equal(ff_monitor_start(&m, &o), FF_OK);
    ff_temp_check tc;
    notified = 0;
    assert_int_equal(ff_monitor_check_temperature(&tc, m, on_warning, &notified), FF_OK);
    const double waited = now_s() - t0;
    assert_true(tc.warned);
    assert_int_equal(notified, 1);
    assert_string_equal(notified_text, tc.warning);
    contains(tc.warning, "GPU0 is at 90C, over --max-temp 85C: pausing until it cools to 80C");
    assert_int_equal(tc.hot_gpu, 0);
    assert_true(tc.hot_temp_c == 90);
    assert_true(waited >= 1.0 && waited < 3.0);
    assert_true(tc.paused_s >= 0.9 && tc.paused_s < 3.0);

    assert_int_equal(ff_monitor_check_temperature(&tc, m, on_warning, &notified), FF_OK);
    assert_false(tc.warned);
    assert_string_equal(tc.warning, "");
    assert_true(tc.paused_s == 0 && tc.hot_gpu == -1);
    assert_int_equal(notified, 1);
    ff_monitor_overhead ov;
    ff_monitor_overhead_get(&ov, m);
    assert_int_equal(ov.pauses, 1);
    assert_int_equal(ov.check_calls, 2);
    assert_true(ov.paused_s >= 0.9);
    assert_true(ov.check_s_total < 0.5);  // the pause is not counted as check overhead
    ff_monitor_destroy(m);
    unlink(path);
}

// Action stop: an error at once naming the hot GPU (not the first watched), its temperature and
// the flag; a cool GPU passes.
static void stop_action_names_gpu(void **state) {
    (void)state;
    char path[64];
    write_file(path,
               "0 0 40 100 1 2 3 1000 0x0\n"
               "0 2 91 100 1 2 3 1000 0x0\n");
    const int gpus[] = {0, 2};
    ff_monitor_options o = fake_options(gpus, 2, path, 20);
    o.temp_action = FF_TEMP_STOP;
    o.max_temp_c = 85;
    o.pause_limit_s = 2;
    ff_monitor *m = NULL;
    assert_int_equal(ff_monitor_start(&m, &o), FF_OK);
    ff_temp_check tc;
    const double t0 = now_s();
    assert_int_equal(ff_monitor_check_temperature(&tc, m, NULL, NULL), FF_ERR_CUDA);
    assert_true(now_s() - t0 < 0.5);
    contains(ff_last_error(), "GPU2 is at 91C, over --max-temp 85C (temperature action stop)");
    assert_int_equal(tc.hot_gpu, 2);
    ff_monitor_destroy(m);

    o.max_temp_c = 95;  // the same readings under a higher limit: fine
    assert_int_equal(ff_monitor_start(&m, &o), FF_OK);
    assert_int_equal(ff_monitor_check_temperature(&tc, m, NULL, NULL), FF_OK);
    assert_int_equal(tc.hot_gpu, -1);
    ff_monitor_destroy(m);
    unlink(path);
}

// A GPU that never cools: the pause ends at its limit with an error naming GPU, temperature, limit.
static void pause_limit_exceeded(void **state) {
    (void)state;
    char path[64];
    write_file(path, "0 0 95 700 1 2 100 1980 0x40\n");
    const int gpus[] = {0};
    ff_monitor_options o = fake_options(gpus, 1, path, 20);
    o.pause_limit_s = 0.3;
    ff_monitor *m = NULL;
    assert_int_equal(ff_monitor_start(&m, &o), FF_OK);
    ff_temp_check tc;
    const double t0 = now_s();
    assert_int_equal(ff_monitor_check_temperature(&tc, m, NULL, NULL), FF_ERR_CUDA);
    const double waited = now_s() - t0;
    assert_true(waited >= 0.3 && waited < 2.0);
    assert_true(tc.warned);
    contains(ff_last_error(), "GPU0 is still at 95C after pausing");
    contains(ff_last_error(), "(the pause limit): it did not cool to 80C");
    // Still the same episode: no second warning, and the same limit applies again.
    assert_int_equal(ff_monitor_check_temperature(&tc, m, NULL, NULL), FF_ERR_CUDA);
    assert_false(tc.warned);
    assert_true(tc.paused_s >= 0.3);
    ff_monitor_overhead ov;
    ff_monitor_overhead_get(&ov, m);
    assert_int_equal(ov.pauses, 2);
    ff_monitor_destroy(m);
    unlink(path);
}

// Each bad file is refused with FF_ERR_INPUT (FF_ERR_IO when missing) naming file, line and field.
static void bad_fake_file(void **state) {
    (void)state;
    const struct {
        const char *text, *want;
    } cases[] = {
        {"# header\n0 0 64 412 1 2 98 1980 0x0\n0.5 0 abc 412 1 2 98 1980 0x0\n",
         "line 3: field 3 (temp_c) = 'abc': expected a number or nan"},
        {"0 0 64 412 1 2 98 1980\n", "line 1: 8 fields: expected 9 or 10"},
        {"0 0 64 412 1 2 98 1980 0x0 1 2\n", "line 1: more than 10 fields"},
        {"0 0 64 412 1 2 101 1980 0x0\n", "line 1: field 7 (util_pct) = '101': expected 0..100"},
        {"0 0 64 412 1 2 98 1980 0xZZ\n", "line 1: field 9 (throttle_hex) = '0xZZ'"},
        {"nan 0 64 412 1 2 98 1980 0x0\n", "line 1: field 1 (t_seconds) = 'nan': expected a number"},
        {"0 0.5 64 412 1 2 98 1980 0x0\n", "line 1: field 2 (gpu) = '0.5': expected an integer"},
        {"1 0 64 412 1 2 98 1980 0x0\n0.5 0 64 412 1 2 98 1980 0x0\n",
         "line 2: field 1 (t_seconds) = 0.5: earlier than GPU 0's previous line (1)"},
        {"0 1 64 412 1 2 98 1980 0x0\n", "no line for watched GPU 0"},
    };
    const int gpus[] = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[64];
        write_file(path, cases[c].text);
        ff_monitor_options o = fake_options(gpus, 1, path, 50);
        ff_monitor *m = (ff_monitor *)&o;  // must come back NULL
        assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_INPUT);
        assert_null(m);
        contains(ff_last_error(), path);
        contains(ff_last_error(), cases[c].want);
        unlink(path);
    }
    ff_monitor_options o = fake_options(gpus, 1, "/nonexistent/sensors.txt", 50);
    ff_monitor *m = NULL;
    assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_IO);
    contains(ff_last_error(), "cannot open fake sensor file '/nonexistent/sensors.txt'");
    // Through the environment variable the message says where the path came from.
    assert_int_equal(setenv("FF_FAKE_SENSORS", "/nonexistent/env.txt", 1), 0);
    o.fake_sensors = NULL;
    assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_IO);
    contains(ff_last_error(), "FF_FAKE_SENSORS: cannot open fake sensor file '/nonexistent/env.txt'");
    unsetenv("FF_FAKE_SENSORS");
}

// Options out of range are refused by name before any source is opened.
static void bad_options(void **state) {
    (void)state;
    const int gpus[] = {0, 0};
    ff_monitor *m = NULL;
    ff_monitor_options o = fake_options(gpus, 1, "/nonexistent", 5);
    assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_INPUT);
    contains(ff_last_error(), "sampling interval 5 ms: expected 10..60000 ms");
    o = fake_options(gpus, 1, "/nonexistent", 500);
    o.max_temp_c = 200;
    assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_INPUT);
    contains(ff_last_error(), "--max-temp 200 C: expected 20..150 C");
    o = fake_options(gpus, 1, "/nonexistent", 500);
    o.pause_limit_s = 0;
    assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_INPUT);
    contains(ff_last_error(), "pause limit 0 s");
    o = fake_options(gpus, 2, "/nonexistent", 500);
    assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_INPUT);
    contains(ff_last_error(), "GPU 0 listed twice");
    o = fake_options(gpus, 0, "/nonexistent", 500);
    assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_INPUT);
    contains(ff_last_error(), "0 GPUs to watch: expected 1..16");
    assert_null(m);
}

// No driver: a status naming the library, never a crash or an exit. A library that is not NVML
// is named with the missing symbol. With the real default library: where the driver is missing
// (this CPU machine) the same clear status; on a GPU machine a real reading.
static void nvml_missing(void **state) {
    (void)state;
    unsetenv("FF_FAKE_SENSORS");
    const int gpus[] = {0};
    ff_monitor_options o;
    ff_monitor_options_default(&o);
    o.gpus = gpus;
    o.n_gpus = 1;
    o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
    ff_monitor *m = (ff_monitor *)&o;
    assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_NO_CUDA);
    assert_null(m);
    contains(ff_last_error(), "GPU monitoring needs NVML: cannot load /nonexistent/libnvidia-ml.so.1");

    o.nvml_library = "libm.so.6";
    assert_int_equal(ff_monitor_start(&m, &o), FF_ERR_NO_CUDA);
    contains(ff_last_error(), "libm.so.6 has no nvmlInit_v2");

    o.nvml_library = NULL;
    ff_status st = ff_monitor_start(&m, &o);
    if (st == FF_OK) {
        ff_gpu_sample s;
        int n = 0;
        ff_monitor_latest(&s, &n, m, 1);
        assert_int_equal(n, 1);
        assert_true(s.temp_c > 0 && s.temp_c < 150);
        assert_true(s.mem_total_bytes > 0);
        assert_string_equal(ff_monitor_source(m), "nvml");
        ff_monitor_destroy(m);
    } else {
        assert_int_equal(st, FF_ERR_NO_CUDA);
        assert_null(m);
        const char *e = ff_last_error();
        if (!strstr(e, "cannot load libnvidia-ml.so.1") && !strstr(e, "nvmlInit_v2 failed") &&
            !strstr(e, "NVML sees no GPU"))
            fail_msg("unexpected message: %s", e);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replays_fake_readings), cmocka_unit_test(formats_progress_line),
        cmocka_unit_test(writes_json_series),    cmocka_unit_test(pauses_until_cool),
        cmocka_unit_test(stop_action_names_gpu), cmocka_unit_test(pause_limit_exceeded),
        cmocka_unit_test(bad_fake_file),         cmocka_unit_test(bad_options),
        cmocka_unit_test(nvml_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
