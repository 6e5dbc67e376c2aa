// The execution plan (plan.h): per layer, the algorithm and how a band of it is computed.
#include "fivefold/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fivefold/gpu.h"
#include "fivefold/winograd.h"

const char *ff_precision_name(ff_precision p) {
    return p == FF_PRECISION_TF32 ? "tf32" : p == FF_PRECISION_TF32X3 ? "tf32x3" : "fp32";
}

const char *ff_device_kind_name(ff_device_kind k) {
    return k == FF_DEVICE_CUDA ? "cuda" : "cpu";
}

ff_status ff_plan_options_default(ff_plan_options *o) {
    memset(o, 0, sizeof *o);
    o->conv = FF_CONV_WINOGRAD;
    o->winograd_m = 4;
    o->s2d = true;
    o->short_conv = false;  // (opt-in until a GPU run has timed it: gpu.h)
    o->backend = FF_BACKEND_OWN;
    o->precision = FF_PRECISION_FP32;
    // The environment only sets defaults; the flags (--conv, --winograd-m, --s2d) override them.
    const char *conv = getenv("FF_CUDA_CONV");
    if (conv && *conv) {
        if (strcmp(conv, "direct") == 0)
            o->conv = FF_CONV_DIRECT;
        else if (strcmp(conv, "winograd") != 0)
            return FF_FAIL(FF_ERR_INPUT, "FF_CUDA_CONV=%s: expected direct or winograd", conv);
    }
    const char *ms = getenv("FF_WINOGRAD_M");
    if (ms && *ms) {
        if (strcmp(ms, "2") != 0 && strcmp(ms, "4") != 0)
            return FF_FAIL(FF_ERR_INPUT, "FF_WINOGRAD_M=%s: expected 2 or 4", ms);
        o->winograd_m = atoi(ms);
    }
    const char *sc = getenv("FF_CUDA_SHORT_CONV");
    if (sc && *sc) {
        if (strcmp(sc, "0") != 0 && strcmp(sc, "1") != 0)
            return FF_FAIL(FF_ERR_INPUT,
                           "FF_CUDA_SHORT_CONV=%s: expected 0 (every conv on the GEMM or tf32x3 tiles, the default) or "
                           "1 (convs of short chains on their own kernel)",
                           sc);
        o->short_conv = strcmp(sc, "1") == 0;
    }
    const char *s2d = getenv("FF_CUDA_S2D");
    if (s2d && *s2d) {
        if (strcmp(s2d, "0") != 0 && strcmp(s2d, "1") != 0)
            return FF_FAIL(FF_ERR_INPUT, "FF_CUDA_S2D=%s: expected 0 or 1", s2d);
        o->s2d = strcmp(s2d, "1") == 0;
    }
    return FF_OK;
}

static bool has_params(const ff_layer *L) {
    return L->op == FF_OP_CONV2D || L->op == FF_OP_LINEAR;
}

ff_status ff_plan_build(ff_plan *out, const ff_model *m, ff_device_kind device, const ff_plan_options *o) {
    memset(out, 0, sizeof *out);
    if (o->winograd_m != 2 && o->winograd_m != 4)
        return FF_FAIL(FF_ERR_INPUT, "--winograd-m %d: expected 2 or 4", o->winograd_m);
    if (o->precision == FF_PRECISION_TF32 && o->backend != FF_BACKEND_VENDOR)
        return FF_FAIL(FF_ERR_INPUT,
                       "--precision tf32 needs --backend vendor: fivefold's own kernels run fp32 or tf32x3");
    if (device == FF_DEVICE_CPU && o->backend == FF_BACKEND_VENDOR)
        return FF_FAIL(FF_ERR_INPUT, "--backend vendor: the cpu device has no vendor library (expected --backend own)");
    if (o->precision == FF_PRECISION_TF32X3) {
        if (device == FF_DEVICE_CPU)
            return FF_FAIL(FF_ERR_INPUT, "--precision tf32x3: the cpu device computes in fp32 only (expected fp32)");
        if (o->backend != FF_BACKEND_OWN)
            return FF_FAIL(FF_ERR_INPUT,
                           "--precision tf32x3 runs fivefold's own conv kernels (expected --backend own)");
        if (o->conv != FF_CONV_DIRECT)
            return FF_FAIL(FF_ERR_INPUT,
                           "--precision tf32x3 runs the direct convolutions on tensor cores (expected --conv direct)");
    }
    out->device = device;
    out->opt = *o;
    out->n_layers = m->n_layers;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        ff_layer_plan *lp = &out->layer[i];
        lp->alg = FF_CONV_DIRECT;
        lp->band = ff_layer_is_spatial(L) ? FF_BAND_ROWS : FF_BAND_NONE;
        snprintf(lp->name, sizeof lp->name, "direct");
        // Fusion is a GPU whole-range choice: one kernel writes relu(conv); values are unchanged.
        lp->fuse_relu =
            device == FF_DEVICE_CUDA && has_params(L) && i + 1 < m->n_layers && m->layers[i + 1].op == FF_OP_RELU;
        if (device == FF_DEVICE_CUDA && L->op == FF_OP_LINEAR && o->backend == FF_BACKEND_VENDOR)
            snprintf(lp->name, sizeof lp->name, "vendor");
        if (device != FF_DEVICE_CUDA || L->op != FF_OP_CONV2D || o->conv != FF_CONV_WINOGRAD) continue;
        if (L->stride > 1 && !o->s2d) continue;
        const int wm = ff_winograd_m(L, o->winograd_m);
        if (!wm) continue;
        lp->alg = FF_CONV_WINOGRAD;
        lp->wg_m = wm;
        lp->s2d = L->stride > 1;
        // The space-to-depth rewrite runs on the whole input only (winograd.h).
        if (lp->s2d) lp->band = FF_BAND_WHOLE;
        snprintf(lp->name, sizeof lp->name, "winograd-%d%s", wm, lp->s2d ? "-s2d" : "");
    }
    // The digest class: the CPU reference's bits, or the GPU plan's. The default GPU plan keeps the
    // name the committed goldens record ("gpu"); another plan is its own class. The short-conv
    // kernel's chains are the fp32 tiles' (gpu.h): switched on, only tf32x3's bits change, and only
    // for a model with such a conv (mnist's conv1; AlexNet has none), forward or as the data
    // gradient that training runs through the forward conv (out_c R S terms a chain).
    bool short_convs = false;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        short_convs |= L->op == FF_OP_CONV2D && (L->in.c * L->kh * L->kw <= FF_GPU_SHORT_CONV_KD ||
                                                 (i > 0 && L->out_c * L->kh * L->kw <= FF_GPU_SHORT_CONV_KD));
    }
    if (o->backend == FF_BACKEND_OWN && o->precision == FF_PRECISION_TF32X3)
        snprintf(out->digest_class, sizeof out->digest_class, "gpu-direct-tf32x3%s",
                 o->short_conv && short_convs ? "-short" : "");
    else if (o->backend != FF_BACKEND_OWN || o->precision != FF_PRECISION_FP32)
        out->digest_class[0] = 0;
    else if (device == FF_DEVICE_CPU)
        snprintf(out->digest_class, sizeof out->digest_class, "cpu");
    else if (o->conv == FF_CONV_DIRECT)
        snprintf(out->digest_class, sizeof out->digest_class, "gpu-direct");
    else if (o->winograd_m == 4 && o->s2d)
        snprintf(out->digest_class, sizeof out->digest_class, "gpu");
    else
        snprintf(out->digest_class, sizeof out->digest_class, "gpu-wg%d%s", o->winograd_m, o->s2d ? "" : "-nos2d");
    return FF_OK;
}

ff_range ff_plan_input_rows(const ff_plan *p, const ff_model *m, int layer, int64_t out_lo, int64_t out_hi) {
    const ff_layer *L = &m->layers[layer];
    const ff_layer_plan *lp = p ? &p->layer[layer] : NULL;
    if (lp && lp->alg == FF_CONV_WINOGRAD) {
        // (a space-to-depth layer: the whole input for any band; winograd.h)
        return ff_winograd_input_rows(L, lp->wg_m, out_lo, out_hi);
    }
    return ff_layer_input_rows(L, out_lo, out_hi);
}

static const char *band_name(ff_band_kind b) {
    return b == FF_BAND_ROWS ? "rows" : b == FF_BAND_WHOLE ? "whole layer" : "-";
}

void ff_plan_print(FILE *f, const ff_plan *p, const ff_model *m) {
    fprintf(f, "plan (%s device, digest class %s):\n", ff_device_kind_name(p->device),
            p->digest_class[0] ? p->digest_class : "none (tolerance only)");
    fprintf(f, "  %-3s %-8s %-16s %-10s %s\n", "#", "layer", "algorithm", "relu", "band");
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer_plan *lp = &p->layer[i];
        fprintf(f, "  %-3d %-8s %-16s %-10s %s\n", i, m->layers[i].name, lp->name, lp->fuse_relu ? "fused" : "-",
                band_name(lp->band));
    }
}
