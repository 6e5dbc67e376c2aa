// IDX data sets (MNIST and Fashion-MNIST format; README.md, "Train"): reader, normalisation, shuffling.
//
// File format (big-endian): bytes 0-1 are zero, byte 2 is the element type (0x08 = unsigned byte,
// the only one accepted), byte 3 the number of dimensions d, then d uint32 extents, then the
// elements in row-major order. Images are d = 3 (count, rows, cols), labels d = 1 (count).
// Files may be gzip-compressed (detected by the 1f 8b magic) or raw. The reader checks the magic,
// the rank, every extent (> 0) and that the header plus prod(extents) equals the file length
// exactly (after decompression): a truncated or padded file is refused, never half read.
//
// Normalisation: x_float = (x / 255 - mean) / std with Fashion-MNIST's standard statistics
// mean 0.2860, std 0.3530 (those of its 60000 training images; torchvision examples use the same),
// evaluated in float32 exactly as  ((float)x / 255.0f - 0.2860f) / 0.3530f  — so a 256-entry table
// gives the same bits as computing each pixel, and PyTorch's peer computes the same values.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fivefold/status.h"
#include "fivefold/synthetic.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_IDX_MEAN 0.2860f
#define FF_IDX_STD 0.3530f
// Upper bound on an uncompressed IDX file we accept (guards against decompression bombs).
#define FF_IDX_MAX_BYTES ((size_t)1 << 31)

#define FF_IDX_PATH_MAX 1024

// A data set: IDX images (pixels, normalised when a batch is taken) or a synthetic set (synthetic.h:
// its features are computed when a batch is taken, on the host or on a GPU; pixels is NULL).
typedef struct {
    uint8_t *pixels;        // (n, rows, cols) raw bytes, row-major; NULL for a synthetic set
    int32_t *labels;        // (n) class indices in [0, classes)
    int64_t n, rows, cols;  // a synthetic set: rows = 1, cols = its features
    int64_t classes;        // 1 + largest label among the n kept (10 for (Fashion-)MNIST)
    bool synthetic;
    ff_synth synth;  // the generator of a synthetic set
    // The files it came from, for messages ("" for a data set built in memory).
    char images_path[FF_IDX_PATH_MAX], labels_path[FF_IDX_PATH_MAX];
} ff_dataset;

// Reads one IDX file (gzip or raw) expecting `ndims` dimensions: *data (malloc'd, caller frees)
// receives the elements, dims the extents. Errors: FF_ERR_IO (cannot open / read / gzip stream
// damaged), FF_ERR_INPUT (bad magic, wrong element type, wrong rank, zero extent, length that does
// not match the header), each naming the path, the value found and the value expected.
ff_status ff_idx_read(uint8_t **data, int64_t *dims, const char *path, int ndims);

// The validation ff_idx_read applies, on bytes already in memory (the fuzz target): on success
// *offset is the header size and dims (ndims of them, 1..3) the extents, with
// len == *offset + prod(dims) exactly. `path` is only used in messages.
ff_status ff_idx_parse(size_t *offset, int64_t *dims, const uint8_t *buf, size_t len, const char *path, int ndims);

// Loads images + labels from two files and checks they agree (same count, labels < 256 classes).
// Whether they fit a model (rows, cols, labels < its classes) is ff_train_check_dataset's job.
ff_status ff_dataset_load(ff_dataset *ds, const char *images_path, const char *labels_path);
// Loads DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (the .gz name first, then the raw
// name). `split` is "train" or "t10k". limit > 0 keeps only the first `limit` samples (classes
// is then recomputed over those). limit < 0 is refused.
ff_status ff_dataset_load_dir(ff_dataset *ds, const char *dir, const char *split, int64_t limit);
void ff_dataset_free(ff_dataset *ds);

// A synthetic teacher set (synthetic.h) of n samples for a model with `dim` input features and
// `classes` outputs: labels computed here (OpenMP), features when batches are taken. split 0 is
// the training set, 1 the test set (other inputs, the same teacher). n < 1, dim < 1 or classes
// outside [2, 2^31) are refused naming the value.
ff_status ff_dataset_synthetic(ff_dataset *ds, uint64_t seed, int split, int64_t n, int64_t dim, int64_t classes);

// The 256 normalised values: table[v] = ((float)v / 255.0f - FF_IDX_MEAN) / FF_IDX_STD.
void ff_idx_norm_table(float table[256]);

// Decode + normalise the whole set: out (n, 1, rows, cols) float32 (a synthetic set: its
// features). OpenMP over images.
void ff_dataset_normalize(float *out, const ff_dataset *ds);

// Gathers and normalises a batch: out (count, 1, rows, cols), labels (count) as int32, taking
// samples order[first .. first+count). OpenMP over the images of the batch.
void ff_dataset_batch(float *out, int32_t *labels, const ff_dataset *ds, const int64_t *order, int64_t first,
                      int64_t count);

// Deterministic shuffle: order (n) becomes a permutation of 0..n-1 that depends only on (seed,
// epoch, n): Fisher-Yates from i = n-1 down to 1, swapping i with j = (bits(i) * (i+1)) >> 64 where
// bits(i) is the rng.h counter hash of key ff_rng_key(seed, 0x5348554646 ^ epoch) (128-bit
// multiply-high, no modulo bias).
void ff_shuffle_order(int64_t *order, int64_t n, uint64_t seed, int64_t epoch);

#ifdef __cplusplus
}
#endif
