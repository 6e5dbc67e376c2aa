// Training checkpoints (README.md, "Train"): HDF5 files holding the weights, the momentum buffers, the
// position in training (step, epoch, step within the epoch), the data-order seed, the training
// options a bit-identical resume depends on, and the format version.
//
// Layout (format "fivefold-checkpoint", version FF_CKPT_VERSION):
//   /weights/<layer>/w, /weights/<layer>/b     float32, the model's shapes (the same layout as a
//                                              weights file: a checkpoint loads with --weights)
//   /momentum/<layer>/w, /momentum/<layer>/b   float32, same shapes
//   attributes on "/": format, format_version, model, step, epoch, step_in_epoch, seed, batch,
//     microbatch, train_limit, lr_bits, momentum_bits, weight_decay_bits (float32 bit patterns,
//     exact), loss_digest, lr/momentum/weight_decay (readable copies), digest.
//   digest = FNV-1a-64, 16 hex digits, over: the bytes of every integer field above in that order
//   (int64 little-endian), the model name, then all weights and all momentum values (float32 LE).
//   Loading recomputes it and refuses the file on any difference (FF_ERR_INTEGRITY), so a
//   corrupted or half-written checkpoint is never used.
//
// Atomic write: the file is written as "<path>.tmp.<pid>" in the same directory, closed, fsync'ed,
// renamed over <path>, and the directory is fsync'ed: <path> is always either the previous
// complete checkpoint or the new complete one. The background writer takes a snapshot (copies of
// weights, momentum and the metadata) and writes it on its own thread, so training continues.
//
// Test hook: environment variable FF_TEST_CRASH_IN_CHECKPOINT_WRITE=1 kills the process (SIGKILL)
// in the middle of writing the temporary file (after the weights, before the momentum), to show
// that the previous checkpoint survives such a crash.
#pragma once
#include <stdint.h>

#include "fivefold/model.h"
#include "fivefold/status.h"
#include "fivefold/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_CKPT_VERSION 1
#define FF_CKPT_FILE "checkpoint.h5"  // name inside --checkpoint-dir

typedef struct {
    int64_t step;           // SGD steps completed since the start of training
    int64_t epoch;          // epoch the next step belongs to (0-based)
    int64_t step_in_epoch;  // steps of that epoch already done
    uint64_t seed;          // data-order (and weight generator) seed
    int64_t batch, microbatch, train_limit;
    float lr, momentum, weight_decay;
    uint64_t loss_digest;  // FNV-1a over the float64 losses of steps 1..step (the CLI's running
                           // 'loss digest', so a resumed run reports the whole trajectory's)
} ff_ckpt_meta;

// Synchronous atomic write (what the background writer runs).
ff_status ff_checkpoint_save(const char *path, const ff_model *m, const ff_weights *w, const ff_weights *mom,
                             const ff_ckpt_meta *meta);
// Loads and verifies a checkpoint into already allocated w and mom (ff_weights_alloc for m).
// FF_ERR_IO if it does not exist; FF_ERR_INTEGRITY if it is not a readable HDF5 file (truncated),
// has the wrong format/version, or its digest does not match its contents. FF_ERR_INPUT (an
// intact file that no run can continue: its digest may have been recomputed after an edit) for
// another model, any field outside its range (ff_checkpoint_check_meta) or a weight or momentum
// value that is NaN or infinite (naming the tensor and the first bad index).
ff_status ff_checkpoint_load(ff_weights *w, ff_weights *mom, ff_ckpt_meta *meta, const ff_model *m, const char *path);

// The ranges of every field, whatever run resumes it: step >= 0, epoch >= 0, 0 <= step_in_epoch,
// step >= epoch + step_in_epoch (every epoch has at least one step), batch >= 1, microbatch in
// 1..batch, train_limit >= 0 and, when it is > 0, step_in_epoch < ceil(train_limit / batch), lr,
// momentum and weight decay within ff_train_options_check's ranges (seed: any value). FF_ERR_INPUT
// naming `path`, the field, its value and the range.
ff_status ff_checkpoint_check_meta(const ff_ckpt_meta *meta, const char *path);

// Whether meta's position fits the run that resumes it, whose epochs have steps_per_epoch steps
// (ff_train_plan): step_in_epoch < steps_per_epoch (it indexes that epoch's data order) and
// step == epoch * steps_per_epoch + step_in_epoch (computed without overflow). FF_ERR_INPUT
// naming the fields, both values and what was expected (a checkpoint of another data set or
// --train-limit, or an edited one).
ff_status ff_checkpoint_check_run(const ff_ckpt_meta *meta, int64_t steps_per_epoch, const char *path);

// Makes dir ready for checkpoints before training starts: creates it when missing (one level,
// like mkdir), refuses anything that is not a writable directory (FF_ERR_INPUT naming
// --checkpoint-dir: a regular file is found here, not after the first epoch), and removes stale
// temporary files "checkpoint.h5.tmp.<pid>" left by writes that crashed: those whose pid is no
// live process on this machine (kill(pid, 0) fails with ESRCH; the checkpoint directory is assumed
// not to be shared with a run on another host). *removed gets how many were removed (the caller
// may report it). Call it on the one process that writes checkpoints.
ff_status ff_checkpoint_dir_prepare(int *removed, const char *dir);

// The content digest described above.
uint64_t ff_checkpoint_digest(const ff_model *m, const ff_weights *w, const ff_weights *mom, const ff_ckpt_meta *meta);

// Background writer: one write in flight at a time.
typedef struct ff_ckpt_writer ff_ckpt_writer;
ff_status ff_ckpt_writer_create(ff_ckpt_writer **out, const ff_model *m);
// Waits for the previous write (returning its failure if it failed), snapshots w, mom and meta,
// and starts writing them to path on the writer's thread. Returns as soon as the snapshot is taken.
ff_status ff_ckpt_writer_submit(ff_ckpt_writer *wr, const char *path, const ff_weights *w, const ff_weights *mom,
                                const ff_ckpt_meta *meta);
// Waits for the write in flight, if any; returns its status (with its message).
ff_status ff_ckpt_writer_wait(ff_ckpt_writer *wr);
void ff_ckpt_writer_destroy(ff_ckpt_writer *wr);  // waits, then frees

#ifdef __cplusplus
}
#endif
