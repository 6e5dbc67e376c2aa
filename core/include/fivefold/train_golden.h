// The training golden check (issue 7 §3, issue 16): fivefold's backward and SGD trajectory against
// PyTorch's golden/data/train-<model>.h5 (made by golden/make_golden_train.py; layout in its
// docstring): train-mnist-cnn.h5 (Fashion-MNIST, batch 16, isolation on 1 image) and
// train-mlp-small.h5 (synthetic teacher data, batch 64, isolation on 8 samples).
// Rows are ff_verify_row (verify.h), so `fivefold verify` prints them with the inference rows.
//
// Rows and their rules (case strings start with the model's name):
//   train weights        generator weights' FNV-1a digest == the golden's initial_weights_digest
//   train data           synthetic goldens: the stored sample indices are the first K*B of
//                        ff_shuffle_order(seed, 0) over the golden's train_n, and the stored
//                        features (float32) and labels (int32) are bit for bit what the C
//                        generator (synthetic.h) computes for them: proves golden/synthetic.py
//   train iso <layer> dw/db/dx   each layer's backward in isolation, from the golden's float32 x and
//                        dy, against its float64 result. Dot-product gradients (conv, linear) use
//                        the derived bound of tolerance.h: |ours - ref64| <= ff_tol_dot_bound(A, K)
//                        with A = sum |terms| (float64) and K = number of terms of that element;
//                        relu and maxpool must be exact; softmax cross-entropy within
//                        gamma_{classes+6} (p + [c == y]) * scale (expf, logf, sum, division).
//   train step1 <layer> w/b      the reduced gradient of step 1 (batch B, micro-batches of 8)
//                        against PyTorch's float64 gradient of the same step;
//   train loss trajectory        the 10 losses before each update; and
//   train final <layer> w/b      the weights after 10 steps, against PyTorch's float64 run.
//                        These three compare whole chains, where no useful a-priori bound exists;
//                        their documented tolerance is relative to PyTorch's own float32 run:
//                        |ours - ref64| <= FF_TRAIN_GOLDEN_FACTOR * max|torch32 - ref64| (over the
//                        tensor) + 2^-24 |ref64|, i.e. fivefold's float32 trainer must be as close
//                        to the float64 trajectory as PyTorch's float32 one is, within a factor 8
//                        (both sum in different, equally valid orders). Gradients through relu
//                        and maxpool are discontinuous: an activation within rounding of 0 (relu)
//                        or of a tie (max) can route differently in two correct float32
//                        implementations (measured: 34 of conv2's 18432 step-1 gradients, from
//                        3 pre-relu values within 1e-6 of 0 in the golden batch; 9 of conv1.w
//                        through conv2's data gradient). So up to
//                        max(FF_TRAIN_GOLDEN_FLIPS, 0.5 %) elements of a tensor may exceed that
//                        tolerance, each still within FF_TRAIN_GOLDEN_FLIP_FRAC of the tensor's
//                        largest |ref|; the row's note gives the counts.
// Large layers' weight-shaped tensors are stored (and checked) for some rows only (size budget):
// mnist-cnn's fc1 for /fc1_rows, mlp-small's fc1..fc4 for /rows/<layer>.
//
// The step-1, loss and final rows run through the trainer of `mode` (train.h) with communicator
// `comm`: mnist-cnn from its stored images; a synthetic golden from the C generator's training set
// (each rank loading its own micro-batches). The cpu modes' bits do not depend on the rank count,
// so serial and mpi at any P give the same rows; likewise the GPU modes among themselves.
#pragma once
#include <stdbool.h>
#include <stdio.h>

#include "fivefold/comm.h"
#include "fivefold/executor.h"
#include "fivefold/status.h"
#include "fivefold/verify.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_TRAIN_GOLDEN_FILE "train-mnist-cnn.h5"
#define FF_TRAIN_GOLDEN_FACTOR 8.0
#define FF_TRAIN_GOLDEN_FLIPS 16
#define FF_TRAIN_GOLDEN_FLIP_FRAC 0.02

typedef struct {
    const char *model;            // NULL: "mnist-cnn"; or "mlp-small"
    const char *golden;           // NULL: <source dir>/golden/data/train-<model>.h5 (or ./golden/data/)
    bool trust;                   // accept a golden not listed in the manifest
    const char *manifest;         // NULL: the default manifest for the golden's path
    bool inject_fault;            // test hook: perturb our dw of the second parameterised layer (isolation;
                                  // mnist-cnn conv2, mlp-small fc2), step-1 b[0] and final w[0] of the
                                  // last one (fc2, fc6), the last loss beyond their tolerances, and fail
                                  // the data row: those rows must FAIL
    FILE *progress;               // rows printed as they are made (NULL: silent)
    ff_mode mode;                 // where the step-1 gradient, loss trajectory and final weights are computed:
                                  // serial (0, the default), cuda (rows then read "mnist-cnn train[cuda] ..."),
                                  // or a multi-rank mode with comm ("mlp-small train[mpi,P=3] ...");
                                  // the iso rows always check the CPU reference layers
    ff_comm *comm;                // multi-rank modes: the communicator (collective: every rank calls this
                                  // with the same config; only rank 0 should pass a progress stream); NULL:
                                  // one process
    const ff_exec_options *exec;  // NULL: defaults; else the GPU index, direct mode's transport and
                                  // the communication deadline are taken from it (not its plan)
} ff_train_golden_config;

// Appends the rows to rep (rows, n_rows, cap, passed, failed; pass is set to "every row passed").
// FF_OK when the checks ran; FF_ERR_INTEGRITY when the golden fails its SHA-256 or is malformed.
ff_status ff_train_verify_golden(ff_verify_report *rep, const ff_train_golden_config *cfg);

#ifdef __cplusplus
}
#endif
