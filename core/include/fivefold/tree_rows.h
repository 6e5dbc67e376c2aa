// What the deterministic exchange's fused last step adds (device.h ff_device_tree_sgd, gpu.h
// ff_gpu_tree_sgd): its own header because both the device interface and the CUDA kernels take it.
#ifndef FIVEFOLD_TREE_ROWS_H
#define FIVEFOLD_TREE_ROWS_H

#include <stdbool.h>
#include <stdint.h>

// The rows an exchange's finishing tree adds (ff_device_tree_sgd): n rows of the count floats,
// row j at at + j * stride, except row own (-1: none), which is read from own_at instead: a rank's
// own block sum stays where its backward wrote it and the all-to-all copies it nowhere (its place
// in the rows is not read; a device may use it as scratch).
// keep_sum: row 0 ends with the tree's sum (the rows otherwise scratch). Without it, nothing is
// written to the rows, so that the same tree can run on them again later (the trainer's sync), up
// to FF_TREE_UNKEPT_ROWS rows (more are refused).
#define FF_TREE_UNKEPT_ROWS 8
typedef struct {
    float *at;            // (n, stride)
    int64_t n, stride;    // stride >= count where n > 1
    int64_t own;          // -1, or a row in [0, n) read from own_at
    const float *own_at;  // (count): NULL unless own >= 0
    bool keep_sum;
} ff_tree_rows;

#endif
