// Reading (and --record writing) golden reference files (layout in golden/README.md).
//
// Integrity first: the file is read into memory once, its SHA-256 is compared with the entry for
// its name in golden/MANIFEST.sha256, and only then are those same bytes handed to HDF5 (opened as
// an in-memory image, so what was checked is what is parsed). A file that is not listed is refused
// with FF_ERR_INTEGRITY unless `trust` is set (users' own goldens, e.g. from export_torch.py).
// Every dataset's rank, extents and element type are validated against the model before anything
// is allocated for it.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fivefold/model.h"
#include "fivefold/status.h"
#include "fivefold/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_GOLDEN_FORMAT_VERSION 1

// Where a recorded digest lives: one per layer, plus the two end-to-end outputs.
#define FF_GOLDEN_E2E_LOGITS FF_MAX_LAYERS
#define FF_GOLDEN_E2E_OUTPUT (FF_MAX_LAYERS + 1)
#define FF_GOLDEN_N_SLOTS (FF_MAX_LAYERS + 2)

// Digest classes (docs/ARCHITECTURE.md §5): the bits one device computes under one plan, named by
// the plan (plan.h: "cpu" for the CPU reference, "gpu" for the default GPU plan, "gpu-direct",
// "gpu-wg2", "gpu-wg4-nos2d", ...). A golden records each class it was --record'ed with in
// /expected/<class>; a class it has no record of is compared by tolerance alone.
#define FF_DIGEST_CLASS_MAX 32    // bytes of a class name, its NUL included (ff_plan.digest_class)
#define FF_GOLDEN_MAX_CLASSES 32  // classes one golden may record (more: refused as malformed)

// A class name is 1..31 characters of a-z, A-Z, 0-9, '-', '_', '.' (it names an HDF5 group):
// FF_ERR_INPUT naming it otherwise.
ff_status ff_digest_class_check(const char *name);

typedef struct {
    char name[FF_DIGEST_CLASS_MAX];
    uint64_t digest[FF_GOLDEN_N_SLOTS];  // recorded digest per slot (layer index, FF_GOLDEN_E2E_*)
    bool has[FF_GOLDEN_N_SLOTS];         // the slot is recorded
} ff_golden_class;

typedef struct {
    float *in_f32;        // (n, layer in): PyTorch's float32 input of the layer
    float *out_f32;       // (n, layer out): PyTorch's float32 output
    double *out_f64;      // (n, layer out): float64 output from the same float32 input
    uint64_t out_digest;  // FNV-1a of out_f32 as the file records it (checked on load)
} ff_golden_layer;

typedef struct {
    char path[1024];
    char sha256[65];
    bool trusted;  // loaded without a manifest entry (--trust)
    int64_t format_version;
    char model[32];
    char weights_source[32];  // "generator" or "state_dict"
    char generator[64], torch_version[32], created[32];
    uint64_t seed;
    int64_t n;     // images in the file (all arrays below hold n images)
    float *input;  // (n, C, H, W)
    int n_layers;
    ff_golden_layer layers[FF_MAX_LAYERS];
    int logits_layer;    // index of the layer whose output is the logits (last linear)
    double *logits_f64;  // (n, classes of logits_layer): the float64 chain from the float32 input
    double *probs_f64;   // (n, classes): same, through softmax
    int64_t *top5;       // (n, 5): PyTorch's float32 top-5 (from its float32 logits)
    // Weight digests as recorded (FNV-1a-64 of each tensor, and of all parameters in order).
    uint64_t w_digest[FF_MAX_LAYERS], b_digest[FF_MAX_LAYERS], weights_digest;
    bool weights_stored;  // /weights/<layer>/w and b are in the file
    int64_t file;         // the HDF5 file (an in-memory image of the checked bytes), open until free
    // Recorded digests of fivefold's own outputs (verify --record): one entry per group of
    // /expected, in the file's (name) order.
    int n_classes;
    ff_golden_class classes[FF_GOLDEN_MAX_CLASSES];
} ff_golden;

typedef struct {
    bool trust;            // accept a file the manifest does not list
    const char *manifest;  // NULL: golden/MANIFEST.sha256 next to the file's directory, then the
                           // source tree's (FF_SOURCE_DIR), then ./golden/
} ff_golden_options;

// The default golden path for a model: <source dir>/golden/data/<model>.h5 if it exists, else
// golden/data/<model>.h5 relative to the current directory.
void ff_golden_default_path(char *out, size_t cap, const char *model);

// Verifies integrity, then loads everything for model m (whose name must match /meta model).
ff_status ff_golden_load(ff_golden *g, const ff_model *m, const char *path, const ff_golden_options *o);
void ff_golden_free(ff_golden *g);

// The recorded digests of class `name` ("cpu", "gpu", "gpu-direct", ...); NULL when the golden
// records none for it (or name is NULL or empty: no digest class).
const ff_golden_class *ff_golden_find_class(const ff_golden *g, const char *name);

// The weights the golden was made with: read from the file when stored, else regenerated from the
// seed; either way every tensor's FNV-1a digest must equal the recorded one (FF_ERR_INTEGRITY
// naming the tensor otherwise). wt must be allocated for m (ff_weights_alloc).
ff_status ff_golden_weights(ff_weights *wt, const ff_golden *g, const ff_model *m);
// Checks given weights against the recorded digests (used by the above; exposed for tests).
ff_status ff_golden_check_weights(const ff_golden *g, const ff_model *m, const ff_weights *wt);

// Manifest: the SHA-256 listed for `name` (a path relative to golden/, matched by its last
// component) in a sha256sum-format file. FF_ERR_INTEGRITY if not listed.
ff_status ff_manifest_lookup(char hex[65], const char *manifest, const char *name);
// Replaces (or appends) the entry for data/<basename of path> with the file's current SHA-256.
ff_status ff_manifest_update(const char *manifest, const char *path, char old_hex[65], char new_hex[65]);
// The manifest that governs `path` (the first of the candidates in ff_golden_options that exists).
void ff_manifest_default(char *out, size_t cap, const char *path);

// --record: writes digests[slot] for the slots with set[slot] into /expected/<cls> of the file at
// g->path (attributes named after the layer, "end_to_end_logits", "end_to_end_output"; the group
// is created for a class the golden has no record of), updates the manifest entry, and prints one
// line per digest that changed (old -> new) to stdout. Returns the number of changed digests in
// *changed. FF_ERR_INPUT for a class name ff_digest_class_check refuses.
ff_status ff_golden_record(const ff_golden *g, const ff_model *m, const char *cls, const uint64_t *digests,
                           const bool *set, const char *manifest, int *changed);

#ifdef __cplusplus
}
#endif
