// `fivefold bench --loader`: samples/s of fivefold's IDX loader (shuffle + gather + normalise,
// data_idx.h) against PyTorch's DataLoader with 0 and 4 workers doing the same per-item
// normalisation (bench/peer_pytorch.py --task loader), in the same run on the same machine.
// Issue 7's goal: >= 100 x the 4-worker DataLoader.
//
// What is timed, on both sides: whole epochs over the training images in a fresh shuffled order,
// batch by batch, producing normalised float32 batches and labels; reading and decompressing the
// IDX files is done once before (reported separately for fivefold).
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "fivefold/data_idx.h"
#include "fivefold/json.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// "samples_per_s" of the run whose "workers" is w in the peer's JSON line; < 0 if absent.
static double peer_rate(const char *text, int w) {
    char pat[32];
    snprintf(pat, sizeof pat, "\"workers\": %d,", w);
    const char *p = strstr(text, pat);
    if (!p) return -1;
    const char *q = strstr(p, "\"samples_per_s\":");
    if (!q) return -1;
    return strtod(q + strlen("\"samples_per_s\":"), NULL);
}

int ff_loader_bench(int argc, char **argv) {
    const char *data = "/usr/share/datasets/fashion-mnist", *json = NULL, *peer = NULL;
    int64_t batch = 64, limit = 0, epochs = 3;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        ff_status st = FF_OK;
        if (!strcmp(f, "--loader")) continue;
        if (!strcmp(f, "--help")) {
            printf(
                "usage: fivefold bench --loader [--data DIR] [--batch B] [--train-limit N] [--epochs E]\n"
                "                       [--peer pytorch] [--json OUT.json]\n"
                "  samples/s of fivefold's IDX loader (shuffle, gather, normalise) over E epochs,\n"
                "  and with --peer pytorch PyTorch's DataLoader (0 and 4 workers) in the same run\n"
                "  (python from $FF_PYTHON, default: the python3 with torch that CMake found). Goal: >= 100 x the "
                "4-worker DataLoader.\n");
            return FF_EXIT_OK;
        }
        if (!v) return ff_cli_usage("bench", "%s needs a value", f);
        if ((st = ff_cli_value(f, v)) != FF_OK) return ff_cli_fail("bench", st);
        if (!strcmp(f, "--data"))
            data = v;
        else if (!strcmp(f, "--json"))
            json = v;
        else if (!strcmp(f, "--peer"))
            peer = v;
        else if (!strcmp(f, "--batch"))
            st = ff_cli_parse_i64(&batch, f, v, 1, 1 << 20);
        else if (!strcmp(f, "--train-limit"))
            st = ff_cli_parse_i64(&limit, f, v, 0, 1LL << 40);
        else if (!strcmp(f, "--epochs"))
            st = ff_cli_parse_i64(&epochs, f, v, 1, 1000);
        else
            return ff_cli_usage("bench", "--loader: unknown option '%s'", f);
        if (st != FF_OK) return ff_cli_fail("bench", st);
        i++;
    }
    if (peer && strcmp(peer, "pytorch") != 0) return ff_cli_usage("bench", "--peer '%s': expected pytorch", peer);

    ff_dataset ds;
    double t0 = now_s();
    ff_status st = ff_dataset_load_dir(&ds, data, "train", limit);
    if (st != FF_OK) return ff_cli_fail("bench", st);
    const double t_load = now_s() - t0;
    const int64_t n = ds.n, per = ds.rows * ds.cols;
    float *x = malloc((size_t)(batch * per) * sizeof(float));
    int32_t *labels = malloc((size_t)batch * sizeof(int32_t));
    int64_t *order = malloc((size_t)n * sizeof(int64_t));
    if (!x || !labels || !order) {
        free(x);
        free(labels);
        free(order);
        ff_dataset_free(&ds);
        return ff_cli_fail("bench", FF_FAIL(FF_ERR_OOM, "loader bench: buffers"));
    }
    // One untimed epoch warms the caches and the OpenMP team, then the timed epochs.
    double best = 0, total = 0;
    volatile float sink = 0;
    for (int64_t e = -1; e < epochs; e++) {
        double t = now_s();
        ff_shuffle_order(order, n, 1, e < 0 ? 0 : e);
        for (int64_t s = 0; s < n; s += batch) {
            int64_t b = s + batch <= n ? batch : n - s;
            ff_dataset_batch(x, labels, &ds, order, s, b);
            sink += x[0];
        }
        double dt = now_s() - t;
        if (e < 0) continue;
        total += dt;
        double rate = (double)n / dt;
        if (rate > best) best = rate;
    }
    (void)sink;
    const double ours = (double)(n * epochs) / total;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("loader: %lld images %lldx%lld from %s (read + gunzip + validate %.3f s)\n", (long long)n,
           (long long)ds.rows, (long long)ds.cols, data, t_load);
    printf("loader: fivefold   %12.0f samples/s  (%lld epochs, batch %lld, %d OpenMP threads, best epoch %.0f/s)\n",
           ours, (long long)epochs, (long long)batch, threads, best);
    double p0 = -1, p4 = -1;
    char torch_ver[64] = "";
    if (peer) {
        const char *py = getenv("FF_PYTHON");
        if (!py || !*py) py = FF_DEFAULT_PYTHON[0] ? FF_DEFAULT_PYTHON : "python3";  // the one CMake found
        char cmd[2048], lim[48] = "";
        if (limit > 0) snprintf(lim, sizeof lim, " --train-limit %lld", (long long)limit);
        snprintf(cmd, sizeof cmd,
                 "%s %s/bench/peer_pytorch.py --task loader --data '%s' --workers 0,4 "
                 "--batch %lld%s 2>/dev/null",
                 py, FF_SOURCE_DIR, data, (long long)batch, lim);
        FILE *p = popen(cmd, "r");
        char text[8192] = "";
        size_t len = p ? fread(text, 1, sizeof text - 1, p) : 0;
        text[len] = 0;
        int rc = p ? pclose(p) : -1;
        p0 = peer_rate(text, 0);
        p4 = peer_rate(text, 4);
        const char *tv = strstr(text, "\"torch\": \"");
        if (tv) sscanf(tv + 10, "%63[^\"]", torch_ver);
        if (rc != 0 || p0 <= 0 || p4 <= 0) {
            free(x);
            free(labels);
            free(order);
            ff_dataset_free(&ds);
            return ff_cli_fail("bench", FF_FAIL(FF_ERR_INPUT,
                                                "the PyTorch loader peer failed (exit %d): %s\n"
                                                "  hint: set FF_PYTHON to a python3 that has torch",
                                                rc, cmd));
        }
        printf("loader: PyTorch DataLoader workers=0 %12.0f samples/s  -> fivefold is %.0f x\n", p0, ours / p0);
        printf("loader: PyTorch DataLoader workers=4 %12.0f samples/s  -> fivefold is %.0f x (goal >= 100 x: %s)\n", p4,
               ours / p4, ours / p4 >= 100.0 ? "met" : "NOT met");
    }
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            free(x);
            free(labels);
            free(order);
            ff_dataset_free(&ds);
            return ff_cli_fail("bench", FF_FAIL(FF_ERR_IO, "--json '%s': cannot write", json));
        }
        ff_json j;
        ff_json_init(&j, f);
        ff_json_begin_object(&j, NULL);
        ff_json_str(&j, "schema", "fivefold-loader-bench/1");
        ff_json_str(&j, "data", data);
        ff_json_int(&j, "images", n);
        ff_json_int(&j, "batch", batch);
        ff_json_int(&j, "epochs", epochs);
        ff_json_int(&j, "threads", threads);
        ff_json_num(&j, "load_seconds", t_load);
        ff_json_num(&j, "fivefold_samples_per_s", ours);
        if (peer) {
            ff_json_str(&j, "torch", torch_ver);
            ff_json_num(&j, "pytorch_workers0_samples_per_s", p0);
            ff_json_num(&j, "pytorch_workers4_samples_per_s", p4);
            ff_json_num(&j, "ratio_vs_workers4", ours / p4);
        }
        ff_json_end_object(&j);
        fputc('\n', f);
        fclose(f);
        printf("loader: results written to %s\n", json);
    }
    free(x);
    free(labels);
    free(order);
    ff_dataset_free(&ds);
    return FF_EXIT_OK;
}
