// The execution plan (docs/ARCHITECTURE.md §1, §5): one record per layer saying how the layer is
// computed — algorithm, Winograd tile size, space-to-depth, relu fusion — and whether and how a
// band of its output rows can be computed (which input rows that band needs). It is built once
// from the options (command-line flags --conv, --winograd-m, --s2d; environment variables only set
// their defaults) and read by everything that depends on it: the device (which kernels run), the
// partition (halo rows per the plan, so a Winograd band fetches whole tiles), the decompositions,
// the verifier (comparison rule and digest class), `fivefold bench` and `fivefold info`.
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fivefold/model.h"
#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FF_DEVICE_CPU, FF_DEVICE_CUDA } ff_device_kind;
typedef enum { FF_BACKEND_OWN, FF_BACKEND_VENDOR } ff_backend;  // vendor: cuBLAS/cuDNN
// fp32: float32 FMA chains (own kernels) or fp32 math (vendor). tf32: the vendor's TF32 tensor cores.
// tf32x3: own direct convolutions on tensor cores with each factor split into two TF32 halves
// (fp32-class accuracy, its own digest class gpu-direct-tf32x3; linear layers stay fp32).
typedef enum { FF_PRECISION_FP32, FF_PRECISION_TF32, FF_PRECISION_TF32X3 } ff_precision;
const char *ff_precision_name(ff_precision p);  // "fp32", "tf32", "tf32x3"
typedef enum { FF_CONV_DIRECT, FF_CONV_WINOGRAD } ff_conv_alg;

const char *ff_device_kind_name(ff_device_kind k);  // "cpu", "cuda"

// What the user chose (flags); the plan applies it per layer where the layer allows it.
typedef struct {
    ff_conv_alg conv;    // --conv direct|winograd (GPU; the CPU device always runs direct)
    int winograd_m;      // --winograd-m 2|4: F(m x m, r x r)
    bool s2d;            // --s2d on|off: strided convs (AlexNet's conv1) through space-to-depth
    bool short_conv;     // GPU: convs of short chains on their own kernel (gpu.h; FF_CUDA_SHORT_CONV)
    ff_backend backend;  // --backend own|vendor
    ff_precision precision;
} ff_plan_options;

// The defaults: winograd, m = 4, s2d on, short convs off, own, fp32; FF_CUDA_CONV (direct|winograd),
// FF_WINOGRAD_M (2|4), FF_CUDA_S2D (0|1) and FF_CUDA_SHORT_CONV (0|1: the A/B switch of gpu.h's
// short-conv kernel) change them. FF_ERR_INPUT naming the variable for a bad value.
ff_status ff_plan_options_default(ff_plan_options *o);

typedef enum {
    FF_BAND_ROWS,   // any band of output rows can be computed from plan.input rows
    FF_BAND_WHOLE,  // computed whole only (a space-to-depth Winograd conv: its rewritten input is
                    // not banded); in a rows split it is a whole-layer step on the rank that holds
                    // the tensor, and the next spatial layer fetches its bands from there
    FF_BAND_NONE,   // not a spatial layer (flatten, linear, softmax)
} ff_band_kind;

typedef struct {
    ff_conv_alg alg;  // FF_CONV_DIRECT for every layer that is not a Winograd conv
    int wg_m;         // Winograd tile size m; 0 for direct
    bool s2d;         // Winograd through the space-to-depth rewrite (strided conv)
    bool fuse_relu;   // a whole-range run may compute this conv/linear and the next relu in one kernel
    ff_band_kind band;
    char name[24];  // "direct", "winograd-4", "winograd-4-s2d", "vendor"
} ff_layer_plan;

typedef struct {
    ff_device_kind device;
    ff_plan_options opt;
    int n_layers;
    ff_layer_plan layer[FF_MAX_LAYERS];
    char digest_class[32];  // "cpu"; "gpu" (the default GPU plan); "gpu-direct", "gpu-wg2", ...;
                            // "" where no digest class applies (vendor backend, tf32)
} ff_plan;

// Builds the plan of model m on a device of kind `device`. FF_ERR_INPUT for options the device
// cannot honour (tf32 with the own kernels, winograd_m not 2 or 4).
ff_status ff_plan_build(ff_plan *out, const ff_model *m, ff_device_kind device, const ff_plan_options *o);

// Input rows [lo, hi) of layer `layer` that output rows [out_lo, out_hi) need under the plan: the
// receptive field for the direct algorithm (ff_layer_input_rows), whole Winograd tiles for a
// Winograd layer (ff_winograd_input_rows), the same band for relu/lrn. Clamped to [0, in.h).
ff_range ff_plan_input_rows(const ff_plan *p, const ff_model *m, int layer, int64_t out_lo, int64_t out_hi);

// One line per layer: index, name, algorithm, fusion, band kind. `fivefold info` prints it.
void ff_plan_print(FILE *f, const ff_plan *p, const ff_model *m);

#ifdef __cplusplus
}
#endif
