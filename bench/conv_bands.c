// Micro-benchmark (not a test): ff_cpu_conv2d on alexnet's conv layers, full maps vs the row bands
// of P = 1, 2, 4, 8 ranks (equal splits of the output rows, each with its ff_layer_input_rows input
// band). Prints ns per multiply-add (valid taps only), the minimum over `reps` runs, summed over
// the P bands (so it is the serial cost of computing the whole map band by band). It also checks
// that the bands give the same bits as the full map (the determinism rule in README.md). Why: the
// rows split's efficiency. Built by CMake only on request (EXCLUDE_FROM_ALL):
//   cmake --build build --target conv_bands && build/bench/conv_bands [n=4] [reps=3] [layer ...]
// The CTest test bench_conv_bands_smoke builds it and runs it on one small layer. On a shared
// machine pin it (taskset -c 1) and compare minima of several runs. The printed full-map FNV-1a
// lets two builds be compared bit for bit. Exit 0: bands identical; 1: they differ (or out of
// memory); 2: bad arguments.
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fivefold/layers_cpu.h"
#include "fivefold/model.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

// Multiply-adds actually performed for output rows [o0, o1) (padding taps are skipped).
static double macs(const ff_layer *L, int64_t o0, int64_t o1, int64_t n) {
    double m = 0;
    for (int64_t oh = o0; oh < o1; oh++)
        for (int r = 0; r < L->kh; r++) {
            int64_t ih = oh * L->stride - L->pad + r;
            if (ih < 0 || ih >= L->in.h) continue;
            for (int64_t ow = 0; ow < L->out.w; ow++)
                for (int s = 0; s < L->kw; s++) {
                    int64_t iw = ow * L->stride - L->pad + s;
                    if (iw >= 0 && iw < L->in.w) m += 1;
                }
        }
    return m * (double)L->out.c * (double)L->in.c * (double)n;
}

// Parses argv[i] as an integer in [lo, hi] into *out; names the argument and the value otherwise.
static bool parse_arg(long long *out, const char *what, const char *text, long long lo, long long hi) {
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "conv_bands: %s = '%s': expected an integer in %lld..%lld\n", what, text, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

int main(int argc, char **argv) {
    long long n_arg = 4, reps_arg = 3;
    if (argc > 1 && !parse_arg(&n_arg, "n (images, argument 1)", argv[1], 1, 256)) return 2;
    if (argc > 2 && !parse_arg(&reps_arg, "reps (argument 2)", argv[2], 1, 1000)) return 2;
    const int64_t n = n_arg;
    const int reps = (int)reps_arg;
    ff_model m;
    if (ff_model_init(&m, "alexnet") != FF_OK) {
        fprintf(stderr, "conv_bands: %s\n", ff_last_error());
        return 1;
    }
    for (int a = 3; a < argc; a++) {  // every layer named must exist: a typo must not measure nothing
        bool found = false;
        for (int li = 0; li < m.n_layers; li++)
            found |= m.layers[li].op == FF_OP_CONV2D && !strcmp(argv[a], m.layers[li].name);
        if (!found) {
            fprintf(stderr, "conv_bands: no conv layer named '%s' in alexnet (argument %d): expected conv1..conv5\n",
                    argv[a], a);
            return 2;
        }
    }
    int bad = 0;
    for (int li = 0; li < m.n_layers; li++) {
        const ff_layer *L = &m.layers[li];
        if (L->op != FF_OP_CONV2D) continue;
        if (argc > 3) {
            int want = 0;
            for (int a = 3; a < argc; a++) want |= !strcmp(argv[a], L->name);
            if (!want) continue;
        }
        const int64_t in_img = ff_shape_numel(L->in), out_img = ff_shape_numel(L->out);
        float *x = malloc(sizeof(float) * n * in_img), *w = malloc(sizeof(float) * L->n_weight);
        float *b = malloc(sizeof(float) * L->n_bias), *full = malloc(sizeof(float) * n * out_img);
        float *band_in = malloc(sizeof(float) * n * in_img), *band_out = malloc(sizeof(float) * n * out_img);
        if (!x || !w || !b || !full || !band_in || !band_out) {
            fprintf(stderr, "conv_bands: out of memory for %s with n = %lld\n", L->name, (long long)n);
            return 1;
        }
        uint32_t s = 12345;
        for (int64_t i = 0; i < n * in_img; i++)
            x[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        for (int64_t i = 0; i < L->n_weight; i++)
            w[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        for (int64_t i = 0; i < L->n_bias; i++) b[i] = (float)i * 0.01f;
        const int64_t Ho = L->out.h, Wo = L->out.w, K = L->out.c, C = L->in.c, H = L->in.h, W = L->in.w;
        printf("%s  C=%ld H=%ld W=%ld -> K=%ld Ho=%ld Wo=%ld  n=%ld\n", L->name, (long)C, (long)H, (long)W, (long)K,
               (long)Ho, (long)Wo, (long)n);
        ff_rows fr = ff_rows_full(L);
        ff_cpu_conv2d(full, x, w, b, L, &fr, n);
        uint64_t h = 1469598103934665603ull;  // FNV-1a of the full map's bytes, to compare builds
        for (size_t i = 0; i < sizeof(float) * (size_t)(n * out_img); i++)
            h = (h ^ ((const unsigned char *)full)[i]) * 1099511628211ull;
        printf("  full map FNV-1a %016llx\n", (unsigned long long)h);
        const int Ps[] = {1, 2, 4, 8};
        for (int pi = 0; pi < 4; pi++) {
            const int P = Ps[pi];
            double total = 0, total_macs = 0, worst = 0;
            for (int p = 0; p < P; p++) {
                // equal split, the first Ho % P ranks get one row more
                int64_t o0 = p * (Ho / P) + (p < Ho % P ? p : Ho % P);
                int64_t o1 = o0 + Ho / P + (p < Ho % P);
                ff_range ir = ff_layer_input_rows(L, o0, o1);
                ff_rows br = {ir.lo, ir.hi, o0, o1};
                for (int64_t i = 0; i < n; i++)
                    for (int64_t c = 0; c < C; c++)
                        memcpy(band_in + (i * C + c) * (ir.hi - ir.lo) * W, x + (i * C + c) * H * W + ir.lo * W,
                               sizeof(float) * (ir.hi - ir.lo) * W);
                double best = 1e30;
                for (int rep = 0; rep < reps; rep++) {
                    double t0 = now();
                    ff_cpu_conv2d(band_out, band_in, w, b, L, &br, n);
                    double t = now() - t0;
                    if (t < best) best = t;
                }
                for (int64_t i = 0; i < n; i++)
                    for (int64_t k = 0; k < K; k++)
                        if (memcmp(band_out + (i * K + k) * (o1 - o0) * Wo, full + (i * K + k) * Ho * Wo + o0 * Wo,
                                   sizeof(float) * (o1 - o0) * Wo))
                            bad = 1;
                double mc = macs(L, o0, o1, n);
                total += best, total_macs += mc;
                if (best > worst) worst = best;
            }
            printf("  P=%d  bands of %ld..%ld rows: %.3f ns/MAC (sum %.1f ms, slowest band %.1f ms)\n", P,
                   (long)(Ho / P), (long)(Ho / P + (Ho % P != 0)), 1e9 * total / total_macs, 1e3 * total, 1e3 * worst);
        }
        free(x), free(w), free(b), free(full), free(band_in), free(band_out);
    }
    printf(bad ? "BANDS DIFFER FROM FULL MAP\n" : "bands bit-identical to full map\n");
    return bad;
}
