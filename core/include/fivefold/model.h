// Models are tables of layer specs (docs/ARCHITECTURE.md §2): shapes, parameter counts, FLOPs and halos are
// derived from the table by ff_model_init, never typed in.
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FF_OP_CONV2D,
    FF_OP_RELU,
    FF_OP_MAXPOOL,
    FF_OP_LRN,
    FF_OP_FLATTEN,
    FF_OP_LINEAR,
    FF_OP_SOFTMAX,
} ff_op;

// Per-image activation shape; a flat vector is (c = features, h = 1, w = 1).
typedef struct {
    int64_t c, h, w;
} ff_shape;

static inline int64_t ff_shape_numel(ff_shape s) {
    return s.c * s.h * s.w;
}

typedef struct {
    const char *name;  // "conv1", "relu1", ... (also the HDF5 group name)
    ff_op op;
    // conv2d: out_c = K filters, kernel kh x kw, stride, pad (same on all four sides)
    // maxpool: kernel kh x kw, stride, pad (pad = 0 in both models)
    // linear: out_c = output features
    int64_t out_c;
    int kh, kw, stride, pad;
    // lrn (PyTorch's LocalResponseNorm): b_c = a_c / (k + alpha/size * sum_{c' in window} a_c'^2)^beta,
    // window = [c - size/2, c + (size-1)/2] clipped to the channels.
    int lrn_size;
    float lrn_alpha, lrn_beta, lrn_k;

    // ---- derived by ff_model_init ----
    ff_shape in, out;  // per-image shapes
    int param_index;   // index among parameterised layers (conv2d, linear), -1 otherwise
    int64_t n_weight;  // conv: K*C*R*S, linear: out*in; 0 otherwise
    int64_t n_bias;    // K or out; 0 otherwise
    int64_t fan_in;    // conv: C*R*S, linear: in
    int64_t flops;     // per image: 2*K*C*R*S*Ho*Wo (conv), 2*in*out (linear), 0 otherwise
} ff_layer;

#define FF_MAX_LAYERS 32

typedef struct {
    const char *name;  // "alexnet", "mnist-cnn"
    ff_shape input;    // per-image input shape
    int n_layers;
    ff_layer layers[FF_MAX_LAYERS];
    int n_params;             // number of parameterised layers
    int64_t n_weights_total;  // all weights + biases
    int64_t flops_total;      // per image
    int64_t max_act;          // largest per-image activation (elements) over every layer's in/out
    int64_t classes;          // numel of the last layer's output
} ff_model;

// Fills *m with the named model's table and derives everything. Unknown name: FF_ERR_INPUT
// naming the known models.
ff_status ff_model_init(ff_model *m, const char *name);
const char *ff_model_names(void);  // "alexnet, mnist-cnn"
const char *ff_op_name(ff_op op);

// Index of the layer called `name`, or -1.
int ff_model_find_layer(const ff_model *m, const char *name);

// ---- row geometry of a sliding-window layer (conv2d, maxpool) along H ----
// Output row o reads input rows [o*stride - pad, o*stride - pad + kh - 1] (rows outside [0, H) are
// padding). So output rows [o0, o1) need input rows [o0*stride - pad, (o1-1)*stride - pad + kh)
// clipped to [0, H). Element-wise and per-pixel layers (relu, lrn) need exactly their own rows.
typedef struct {
    int64_t lo, hi;  // half-open row range [lo, hi)
} ff_range;

// Input rows needed for output rows [o0, o1) of layer L (clipped to the input height);
// empty output range gives an empty input range.
ff_range ff_layer_input_rows(const ff_layer *L, int64_t o0, int64_t o1);
// True if the layer works on rows with a sliding window (conv2d, maxpool).
bool ff_layer_is_windowed(const ff_layer *L);
// True if the layer is computed per pixel / per element on (C, H, W) maps (relu, lrn, and
// windowed ones): such layers can be split by rows. flatten, linear and softmax cannot.
bool ff_layer_is_spatial(const ff_layer *L);
// A linear layer restricted to output features [f_lo, f_hi) (the rows split's FC layers): the
// same layer with out_features f_hi - f_lo; its weights are rows f_lo.. of L's, its bias from f_lo.
ff_layer ff_linear_features(const ff_layer *L, int64_t f_lo, int64_t f_hi);

#ifdef __cplusplus
}
#endif
