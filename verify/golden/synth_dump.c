// Dumps synthetic samples (core/include/fivefold/synthetic.h) as raw little-endian bytes for
// verify/golden/test_synthetic_port.py, which compares them with golden/synthetic.py bit for bit:
//   synth_dump SEED SPLIT DIM CLASSES FIRST COUNT STRIDE
// writes to stdout, for samples i = FIRST + k * STRIDE (k < COUNT), first every sample's DIM
// float32 features, then every sample's int32 label, then every sample's CLASSES float32 logits.
//   synth_dump fma
// reads float32 triples (a, b, c) from stdin and writes fmaf(a, b, c) for each, the operation
// synthetic.h's teacher chains (its port emulates it through float64).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/synthetic.h"

static int fma_filter(void) {
    float t[3];
    while (fread(t, sizeof t, 1, stdin) == 1) {
        const float r = __builtin_fmaf(t[0], t[1], t[2]);
        fwrite(&r, sizeof r, 1, stdout);
    }
    return ferror(stdin) || fflush(stdout) != 0 ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "fma") == 0) return fma_filter();
    if (argc != 8) {
        fprintf(stderr, "usage: %s SEED SPLIT DIM CLASSES FIRST COUNT STRIDE\n", argv[0]);
        return 2;
    }
    const uint64_t seed = strtoull(argv[1], NULL, 0);
    const int split = atoi(argv[2]);
    const int64_t dim = strtoll(argv[3], NULL, 0), classes = strtoll(argv[4], NULL, 0);
    const int64_t first = strtoll(argv[5], NULL, 0), count = strtoll(argv[6], NULL, 0);
    const int64_t stride = strtoll(argv[7], NULL, 0);
    ff_synth s;
    ff_synth_init(&s, seed, split, dim, classes);
    for (int64_t k = 0; k < count; k++)
        for (int64_t j = 0; j < dim; j++) {
            const float x = ff_synth_x(&s, first + k * stride, j);
            fwrite(&x, sizeof x, 1, stdout);
        }
    for (int64_t k = 0; k < count; k++) {
        const int32_t y = ff_synth_label(&s, first + k * stride);
        fwrite(&y, sizeof y, 1, stdout);
    }
    for (int64_t k = 0; k < count; k++)
        for (int64_t c = 0; c < classes; c++) {
            const float z = ff_synth_logit(&s, first + k * stride, c);
            fwrite(&z, sizeof z, 1, stdout);
        }
    return fflush(stdout) == 0 ? 0 : 1;
}
