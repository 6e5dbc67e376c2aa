// Model parameters: one contiguous float32 buffer (so a GPU mode uploads it with one copy), with
// per-layer views. Made by the deterministic generator (rng.h) or loaded from HDF5
// (/weights/<layer>/w, /weights/<layer>/b; shapes validated before any allocation).
#pragma once
#include <stdint.h>

#include "fivefold/model.h"
#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float *data;  // (n_total): for each parameterised layer in model order, w then b
    int64_t n_total;
    float *w[FF_MAX_LAYERS];  // indexed by layer index; NULL for layers without parameters
    float *b[FF_MAX_LAYERS];  // conv: w (K, C, R, S), b (K); linear: w (out, in), b (out)
} ff_weights;

// Allocates storage for m's parameters (contents undefined). Free with ff_weights_free.
ff_status ff_weights_alloc(ff_weights *wt, const ff_model *m);
void ff_weights_free(ff_weights *wt);

// Generator weights (rng.h): layer with param index p gets
//   w: tensor id 2p,   scale sqrt(6 / fan_in)   (He-uniform: keeps activations O(1) through relu)
//   b: tensor id 2p+1, scale 1 / sqrt(fan_in)
// where scale is computed in double and rounded once to float.
void ff_weights_generate(ff_weights *wt, const ff_model *m, uint64_t seed);
float ff_weight_scale(const ff_layer *L);
float ff_bias_scale(const ff_layer *L);

// Generated input: (n, C, H, W) uniform in [-1, 1) from tensor id FF_TENSOR_ID_INPUT; image i is
// the same whatever n is (element index counts from image 0).
void ff_input_generate(float *x, const ff_model *m, int64_t n, uint64_t seed);

// Attribute on each weight dataset (/weights/<layer>/w and /b): the FNV-1a-64 digest of the tensor's
// little-endian float32 values (digest.h), as 16 lowercase hex digits. fivefold writes it with
// every weights file; golden/export_torch.py writes it too.
#define FF_WEIGHTS_DIGEST_ATTR "fnv1a64"

// HDF5 weight files. Load validates that every parameterised layer has w and b datasets of
// float32 with exactly the model's shapes; a missing group, wrong rank or extent, or wrong type
// is FF_ERR_INPUT naming the dataset, the shape found and the shape expected. A tensor with a
// FF_WEIGHTS_DIGEST_ATTR attribute must have that digest (FF_ERR_INTEGRITY naming the tensor and
// both digests); files without the attribute load unchecked. A NaN or infinity is FF_ERR_INPUT
// naming the tensor and the first bad index.
ff_status ff_weights_load_h5(ff_weights *wt, const ff_model *m, const char *path);
// Same, and *digests_checked (may be NULL) = how many tensors had a recorded digest.
ff_status ff_weights_load_h5_checked(ff_weights *wt, int *digests_checked, const ff_model *m, const char *path);
// Writes every tensor with its digest attribute.
ff_status ff_weights_save_h5(const ff_weights *wt, const ff_model *m, const char *path);
// Same, into an already open HDF5 file/group id (used by golden files and checkpoints).
ff_status ff_weights_read_group(ff_weights *wt, const ff_model *m, int64_t loc_id);
ff_status ff_weights_read_group_checked(ff_weights *wt, int *digests_checked, const ff_model *m, int64_t loc_id);
ff_status ff_weights_write_group(const ff_weights *wt, const ff_model *m, int64_t loc_id);

// FNV-1a-64 over all parameters in layer order (w then b), as `weights digest:` prints it.
uint64_t ff_weights_digest(const ff_weights *wt);

#ifdef __cplusplus
}
#endif
