// Layer tables for the models (docs/ARCHITECTURE.md §2) and everything derived from them.
#include "fivefold/model.h"

#include <string.h>

#define CONV(nm, k, r, st, pd) \
    { .name = nm, .op = FF_OP_CONV2D, .out_c = k, .kh = r, .kw = r, .stride = st, .pad = pd }
#define POOL(nm, r, st) \
    { .name = nm, .op = FF_OP_MAXPOOL, .kh = r, .kw = r, .stride = st, .pad = 0 }
#define RELU(nm) \
    { .name = nm, .op = FF_OP_RELU }
#define FC(nm, n) \
    { .name = nm, .op = FF_OP_LINEAR, .out_c = n }

// AlexNet as the seed tabulates it (no channel groups), LRN after pool2 with PyTorch's definition.
static const ff_layer alexnet_table[] = {
    CONV("conv1", 96, 11, 4, 0),
    RELU("relu1"),
    POOL("pool1", 3, 2),
    CONV("conv2", 256, 5, 1, 2),
    RELU("relu2"),
    POOL("pool2", 3, 2),
    {.name = "lrn2", .op = FF_OP_LRN, .lrn_size = 5, .lrn_alpha = 1e-4f, .lrn_beta = 0.75f, .lrn_k = 2.0f},
    CONV("conv3", 384, 3, 1, 1),
    RELU("relu3"),
    CONV("conv4", 384, 3, 1, 1),
    RELU("relu4"),
    CONV("conv5", 256, 3, 1, 1),
    RELU("relu5"),
    POOL("pool5", 3, 2),
    {.name = "flatten", .op = FF_OP_FLATTEN},
    FC("fc6", 4096),
    RELU("relu6"),
    FC("fc7", 4096),
    RELU("relu7"),
    FC("fc8", 1000),
    {.name = "softmax", .op = FF_OP_SOFTMAX},
};

// PyTorch's classic MNIST example without dropout.
static const ff_layer mnist_table[] = {
    CONV("conv1", 32, 3, 1, 0),
    RELU("relu1"),
    CONV("conv2", 64, 3, 1, 0),
    RELU("relu2"),
    POOL("pool1", 2, 2),
    {.name = "flatten", .op = FF_OP_FLATTEN},
    FC("fc1", 128),
    RELU("relu3"),
    FC("fc2", 10),
    {.name = "softmax", .op = FF_OP_SOFTMAX},
};

// The seed's data-parallel MLP (issue 16): 4096 -> 8192 -> 6144 -> 4096 -> 2048 -> 1024 -> 512,
// relu between layers, softmax over 512 classes; about 120 M parameters.
static const ff_layer mlp_table[] = {
    FC("fc1", 8192), RELU("relu1"), FC("fc2", 6144), RELU("relu2"),
    FC("fc3", 4096), RELU("relu3"), FC("fc4", 2048), RELU("relu4"),
    FC("fc5", 1024), RELU("relu5"), FC("fc6", 512),  {.name = "softmax", .op = FF_OP_SOFTMAX},
};

// Its small twin for tests and goldens: every width / 16 (256 -> 512 -> ... -> 32).
static const ff_layer mlp_small_table[] = {
    FC("fc1", 512), RELU("relu1"), FC("fc2", 384), RELU("relu2"),
    FC("fc3", 256), RELU("relu3"), FC("fc4", 128), RELU("relu4"),
    FC("fc5", 64),  RELU("relu5"), FC("fc6", 32),  {.name = "softmax", .op = FF_OP_SOFTMAX},
};

typedef struct {
    const char *name;
    ff_shape input;
    const ff_layer *table;
    int n;
} model_def;

static const model_def models[] = {
    {"alexnet", {3, 227, 227}, alexnet_table, (int)(sizeof alexnet_table / sizeof alexnet_table[0])},
    {"mnist-cnn", {1, 28, 28}, mnist_table, (int)(sizeof mnist_table / sizeof mnist_table[0])},
    {"mlp", {4096, 1, 1}, mlp_table, (int)(sizeof mlp_table / sizeof mlp_table[0])},
    {"mlp-small", {256, 1, 1}, mlp_small_table, (int)(sizeof mlp_small_table / sizeof mlp_small_table[0])},
};

const char *ff_model_names(void) {
    return "alexnet, mnist-cnn, mlp, mlp-small";
}

const char *ff_op_name(ff_op op) {
    switch (op) {
        case FF_OP_CONV2D: return "conv2d";
        case FF_OP_RELU: return "relu";
        case FF_OP_MAXPOOL: return "maxpool";
        case FF_OP_LRN: return "lrn";
        case FF_OP_FLATTEN: return "flatten";
        case FF_OP_LINEAR: return "linear";
        case FF_OP_SOFTMAX: return "softmax";
    }
    return "?";
}

// Output extent of a sliding window: floor((in + 2 pad - k) / stride) + 1 (PyTorch, ceil_mode off).
static int64_t window_out(int64_t in, int k, int stride, int pad) {
    return (in + 2 * (int64_t)pad - k) / stride + 1;
}

static ff_status derive(ff_model *m) {
    ff_shape s = m->input;
    m->n_params = 0;
    m->n_weights_total = 0;
    m->flops_total = 0;
    m->max_act = ff_shape_numel(s);
    for (int i = 0; i < m->n_layers; i++) {
        ff_layer *L = &m->layers[i];
        L->in = s;
        L->param_index = -1;
        L->n_weight = L->n_bias = L->fan_in = L->flops = 0;
        switch (L->op) {
            case FF_OP_CONV2D:
            case FF_OP_MAXPOOL: {
                if (s.h + 2 * L->pad < L->kh || s.w + 2 * L->pad < L->kw)
                    return FF_FAIL(FF_ERR_INTERNAL, "%s: %dx%d window larger than padded input %lldx%lld", L->name,
                                   L->kh, L->kw, (long long)s.h, (long long)s.w);
                ff_shape o = {L->op == FF_OP_CONV2D ? L->out_c : s.c, window_out(s.h, L->kh, L->stride, L->pad),
                              window_out(s.w, L->kw, L->stride, L->pad)};
                if (L->op == FF_OP_CONV2D) {
                    L->fan_in = s.c * L->kh * L->kw;
                    L->n_weight = L->out_c * L->fan_in;
                    L->n_bias = L->out_c;
                    L->flops = 2 * L->n_weight * o.h * o.w;
                }
                s = o;
                break;
            }
            case FF_OP_FLATTEN: s = (ff_shape){ff_shape_numel(s), 1, 1}; break;
            case FF_OP_LINEAR:
                if (s.h != 1 || s.w != 1)
                    return FF_FAIL(FF_ERR_INTERNAL, "%s: linear layer needs a flat input, got %lldx%lldx%lld", L->name,
                                   (long long)s.c, (long long)s.h, (long long)s.w);
                L->fan_in = s.c;
                L->n_weight = L->out_c * s.c;
                L->n_bias = L->out_c;
                L->flops = 2 * L->n_weight;
                s = (ff_shape){L->out_c, 1, 1};
                break;
            case FF_OP_RELU:
            case FF_OP_LRN:
            case FF_OP_SOFTMAX: break;
        }
        L->out = s;
        if (L->n_weight) {
            L->param_index = m->n_params++;
            m->n_weights_total += L->n_weight + L->n_bias;
        }
        m->flops_total += L->flops;
        if (ff_shape_numel(s) > m->max_act) m->max_act = ff_shape_numel(s);
    }
    m->classes = ff_shape_numel(s);
    return FF_OK;
}

ff_status ff_model_init(ff_model *m, const char *name) {
    memset(m, 0, sizeof *m);
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        if (name && strcmp(name, models[i].name) == 0) {
            m->name = models[i].name;
            m->input = models[i].input;
            m->n_layers = models[i].n;
            memcpy(m->layers, models[i].table, (size_t)models[i].n * sizeof(ff_layer));
            return derive(m);
        }
    }
    return FF_FAIL(FF_ERR_INPUT, "unknown model '%s': expected one of %s", name ? name : "(none)", ff_model_names());
}

int ff_model_find_layer(const ff_model *m, const char *name) {
    for (int i = 0; i < m->n_layers; i++)
        if (strcmp(m->layers[i].name, name) == 0) return i;
    return -1;
}

bool ff_layer_is_windowed(const ff_layer *L) {
    return L->op == FF_OP_CONV2D || L->op == FF_OP_MAXPOOL;
}

bool ff_layer_is_spatial(const ff_layer *L) {
    return ff_layer_is_windowed(L) || L->op == FF_OP_RELU || L->op == FF_OP_LRN;
}

ff_range ff_layer_input_rows(const ff_layer *L, int64_t o0, int64_t o1) {
    ff_range r = {0, 0};
    if (o1 <= o0) return r;
    if (!ff_layer_is_windowed(L)) {
        r.lo = o0;
        r.hi = o1;
        return r;
    }
    int64_t lo = o0 * L->stride - L->pad;
    int64_t hi = (o1 - 1) * L->stride - L->pad + L->kh;
    r.lo = lo < 0 ? 0 : lo;
    r.hi = hi > L->in.h ? L->in.h : hi;
    if (r.hi < r.lo) r.hi = r.lo;
    return r;
}

ff_layer ff_linear_features(const ff_layer *L, int64_t f_lo, int64_t f_hi) {
    const int64_t nf = f_hi - f_lo, in_el = ff_shape_numel(L->in);
    ff_layer sub = *L;
    sub.out_c = nf;
    sub.out.c = nf;
    sub.n_weight = nf * in_el;
    sub.n_bias = nf;
    sub.flops = 2 * nf * in_el;
    return sub;
}
