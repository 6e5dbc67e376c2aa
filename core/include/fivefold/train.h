// Data-parallel SGD training on the CPU with a deterministic gradient reduction (README.md, "Train").
//
// The reduction. A global batch of b images is cut into nmb = ceil(b / M) micro-batches of M
// consecutive images (the last may be shorter). Micro-batch j's gradient g_j is computed by one
// rank, with the fixed summation orders of layers_cpu_backward.h (images ascending inside it).
// Rank r of P owns micro-batches [floor(nmb*S_r/S), floor(nmb*S_{r+1}/S)), where S_r is the sum of
// the shares of ranks below r and S of all (--shares; equal shares by default, which is
// [floor(nmb*r/P), floor(nmb*(r+1)/P))): a faster GPU may take more of the batch. Ownership
// decides only who computes a micro-batch, never the order of any sum, so shares change no bit. The g_j are then
// combined element by element in one fixed binary tree that depends only on nmb:
//     for (s = 1; s < nmb; s *= 2) for (j = 0; j + s < nmb; j += 2s) g_j += g_{j+s};
// With P > 1 each rank first sums the dyadic blocks of its range (aligned power-of-two runs of
// micro-batches: whole subtrees of that tree, summed in its order), then a reduce-scatter by
// parameter slices (alltoallv: rank q receives slice q of every block's sum, in j order, and
// finishes the tree on them: the additions left are exactly those between blocks) is followed by
// an allgatherv of the reduced slices. With equal shares and power-of-two counts a rank sends one
// row: as many bytes as a ring all-reduce moves. Every element's value therefore depends only on (weights, batch, M),
// never on P or on which rank computed what: losses and weight digests are identical for serial and mpi P = 1, 2, 3,
// ... (tested). The loss of a step is (sum over images ascending, in double, of each image's float32 loss) / b.
//
// `--reduce allreduce` (FF_REDUCE_ALLREDUCE) instead sums each rank's own micro-batches with the
// same tree and then calls the communicator's float all-reduce: faster, but its bits depend on P
// and the MPI library, so it is checked against the deterministic path by tolerance only.
//
// With P > 1 the deterministic exchange updates by slices: rank q applies the SGD step below to
// its slice of each bucket only (it holds the reduced gradient of that slice alone) and the
// updated weights are all-gathered, so the weights are whole on every rank after each step and
// the momentum (and the reduced gradient) after ff_trainer_sync. The rule is element-wise: the
// bits are those of a whole update.
//
// The update is PyTorch's SGD (dampening 0, no Nesterov): g = grad + wd * w (when wd != 0);
// on the first step buf = g, afterwards buf = momentum * buf + g; w = w - lr * buf (float32,
// no FMA). The gradient is that of the mean loss over the global batch.
#pragma once
#include <stdint.h>

#include "fivefold/comm.h"
#include "fivefold/data_idx.h"
#include "fivefold/executor.h"
#include "fivefold/model.h"
#include "fivefold/status.h"
#include "fivefold/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FF_MAX_RANKS_TRAIN 256                     // rank count a trainer supports (fixed-size count arrays)
#define FF_MAX_MICROBATCHES 1024                   // micro-batches per global batch (ceil(B / M))
#define FF_TRAIN_SHARE_MAX 1000                    // a rank's --shares value: 1..this
#define FF_TRAIN_BUCKET_FLOATS ((int64_t)1 << 22)  // the default gradient bucket: 16 MiB of floats
// The direct mode's default bucket: 2 MiB, so a large model's buckets are its layers and the last
// one exchanged, the one nothing in the step overlaps, is its smallest top layer (the MLP's fc6,
// 2 MB): the two-GPU step took 14.40 ms against 14.47 with 16 MiB (four H200s, run 8 of
// bench/results/issue16-s19). Its collectives are queued on the GPU, so more buckets cost no host
// round trips.
#define FF_TRAIN_DIRECT_BUCKET_FLOATS ((int64_t)1 << 19)

typedef enum { FF_REDUCE_DETERMINISTIC, FF_REDUCE_ALLREDUCE } ff_reduce;
ff_status ff_reduce_parse(ff_reduce *out, const char *s);  // "deterministic" | "allreduce"
const char *ff_reduce_name(ff_reduce r);

// Whether a step's exchange may run on beside the next step's forward (ff_train_options.overlap_steps,
// CLI --overlap on|steps|auto).
typedef enum {
    FF_OVERLAP_STEPS_OFF = 0,  // --overlap on (or off): every step ends with its exchange joined
    FF_OVERLAP_STEPS_ON,       // --overlap steps
    FF_OVERLAP_STEPS_AUTO,     // the default: ff_train_overlaps_steps decides from P and the model's size
} ff_overlap_steps;

// AUTO's rule: steps overlap from FF_TRAIN_STEPS_AUTO_RANKS ranks on, for models of at least
// FF_TRAIN_STEPS_AUTO_FLOATS parameters. A rank sends and receives (P - 1) / P of the gradients
// and of the weights while it computes 1 / P of the batch, so from three ranks on a large model's
// exchange outlasts the backward and the next forward is what can hide it (the MLP on four H100s:
// 8.13 ms a step against 8.80, on two 14.71 against 14.58; bench/results/issue16-s19). A small
// model's step is bound by launches and needs its CUDA graph, which overlapping steps gives up.
#define FF_TRAIN_STEPS_AUTO_RANKS 3
#define FF_TRAIN_STEPS_AUTO_FLOATS ((int64_t)1 << 24)  // 64 MiB of float32 gradients

typedef struct {
    int64_t batch;       // global batch size B (largest b a step is called with)
    int64_t microbatch;  // M: images per micro-batch (the unit of the deterministic reduction)
    float lr, momentum, weight_decay;
    ff_reduce reduce;
    // Overlap the gradient exchange with the backward (P > 1 on a device that queues work, a GPU):
    // the gradients go in buckets (runs of layers, ARCHITECTURE §9), each exchanged while the
    // layers below it are still backing up. Changes no bit (the same additions in the same order).
    // Default on; off exchanges after the whole backward, in the same buckets.
    bool overlap;
    // With overlap and the exchange queued on the device (NCCL): the next step's forward starts
    // without waiting for the whole exchange, each bucket's layers once that bucket's weights are
    // gathered, so the exchange of the last buckets (which nothing in the step overlaps) runs
    // beside it (CLI --overlap steps). The steps then run eagerly: a CUDA graph must end joined.
    // The same bits. Default FF_OVERLAP_STEPS_AUTO: where ff_train_overlaps_steps says it pays.
    ff_overlap_steps overlap_steps;
    // A bucket closes once it holds this many gradient floats (CLI --bucket-mb): larger buckets move
    // more bytes per collective, smaller ones start sooner. 0 (the default): 4 Mi floats (16 MiB);
    // in the direct mode FF_TRAIN_DIRECT_BUCKET_FLOATS (2 MiB), or a quarter of the parameters
    // where that is less, so that a small model's exchange also runs during its backward (its
    // collectives are queued and captured there, so more buckets cost no host round trips).
    int64_t bucket_floats;
    // Relative batch shares per rank (--shares 3,1): n_shares 0 = equal; otherwise one per rank,
    // each >= 1 (ff_trainer_create checks the count against the ranks).
    int n_shares;
    int32_t shares[FF_MAX_RANKS_TRAIN];
    // Where the step runs: the executor's options (executor.h; the CLI fills them with the shared
    // parser of infer/verify/bench): mode, GPU, transport, communication deadline, plan. The
    // trainer sets split (batch: micro-batches by rank), max_batch and comm itself. The plan's convs
    // must be direct (the update rewrites the weights every step; Winograd's transformed copies
    // would go stale): the default here.
    ff_exec_options exec;
} ff_train_options;

// B 64, M 8, lr 0.01, momentum 0.9, wd 0, deterministic; exec: serial, plan defaults but conv direct.
void ff_train_options_default(ff_train_options *o);

// Whether the trainer lets steps overlap for these options on P ranks and a model of `params`
// parameters, where the device and the comm can (a GPU, the exchange queued on NCCL): ON yes, OFF
// no, AUTO by the rule above. overlap off implies no.
bool ff_train_overlaps_steps(const ff_train_options *o, int P, int64_t params);

// The bucket size (floats) the trainer takes for bucket_floats = 0 in `mode` for a model of
// `params` parameters (bucket_floats' comment above).
int64_t ff_train_default_bucket_floats(ff_mode mode, int64_t params);

// The ranges ff_train_options_check accepts. lr > 10 or momentum >= 1 make SGD diverge at once
// (momentum 1 never forgets a gradient; > 1 amplifies them); lr 0 would "train" without changing
// a weight; weight decay >= 1 would shrink every weight to 0 or flip its sign each step. NaN and
// infinities are refused everywhere.
#define FF_TRAIN_LR_MAX 10.0f  // lr in (0, FF_TRAIN_LR_MAX]
// momentum in [0, 1), weight decay in [0, 1)

// Checks the options (ff_trainer_create calls it): batch >= 1, microbatch 1..batch, at most
// FF_MAX_MICROBATCHES micro-batches, lr/momentum/weight decay finite and in the ranges above.
// FF_ERR_INPUT naming the flag the user typed (--lr, --momentum, --weight-decay, --batch,
// --microbatch), the value and the range.
ff_status ff_train_options_check(const ff_train_options *o);

// Whether data set ds fits model m: at least one sample, rows x cols equal to the model's input
// (1 channel), every label of the n kept samples below the model's class count. FF_ERR_INPUT
// naming the file (ds->images_path / labels_path), the value found and the one expected. The CLI
// calls it right after loading each set, so a wrong test set is refused before any step;
// ff_train_evaluate checks again.
ff_status ff_train_check_dataset(const ff_model *m, const ff_dataset *ds);

// How many steps a run takes: steps_per_epoch = ceil(n / batch) (the last batch may be short),
// total = epochs * steps_per_epoch, or max_steps when 0 < max_steps < that. FF_ERR_INPUT when
// n, batch or epochs is < 1, max_steps < 0, or epochs * steps_per_epoch does not fit in int64
// (the message names --epochs, the steps per epoch and the largest --epochs that fits).
typedef struct {
    int64_t steps_per_epoch;
    int64_t total;
} ff_train_plan;
ff_status ff_train_plan_make(ff_train_plan *out, int64_t n, int64_t batch, int64_t epochs, int64_t max_steps);

// The fixed reduction tree of the header comment, on its own: rows[0][i] becomes the sum of
// rows[0..nrows)[i] for every i < len, added in the tree that depends only on nrows:
//     for (s = 1; s < nrows; s *= 2) for (j = 0; j + s < nrows; j += 2s) rows[j] += rows[j + s];
// e.g. nrows = 3: (r0 + r1) + r2; nrows = 4: (r0 + r1) + (r2 + r3); nrows = 5: ((r0 + r1) +
// (r2 + r3)) + r4. The other rows are overwritten with partial sums. The caller owns the nrows
// rows of len floats (nrows >= 1; nrows = 1 leaves rows[0] unchanged). Elements are split among
// OpenMP threads; the bits do not depend on the thread count. The trainer reduces its micro-batch
// gradients with it.
void ff_tree_reduce(float *const *rows, int64_t nrows, int64_t len);

typedef struct ff_trainer ff_trainer;

// Creates a trainer for o->mode: it builds that mode's executor (executor.h) and runs every step on
// its device (device.h, "training") and communicator. comm NULL: one process (serial, cuda);
// otherwise collective over comm (a single-process mode then means its multi-rank twin: serial ->
// mpi, cuda -> hybrid), and every rank must pass identical weights and options. The weights live
// on the device: ff_trainer_sync copies them (and the momentum) back into *w, ff_trainer_load
// uploads *w (after a resume changed it). The model must consist of conv2d, relu, maxpool, flatten
// and linear layers, optionally ending with softmax (training uses the logits before it with
// softmax cross-entropy). Bits: the cpu modes' (serial, mpi) depend only on (weights, data, B, M);
// the GPU modes' likewise, in the GPU's summation orders (gpu.h), equal across cuda, hybrid and
// direct at every rank count.
ff_status ff_trainer_create(ff_trainer **out, const ff_model *m, ff_weights *w, const ff_train_options *o,
                            ff_comm *comm);
void ff_trainer_destroy(ff_trainer *t);

// One SGD step on the global batch made of dataset samples idx[0..b) (b <= B). Every rank passes
// the same idx; each loads and normalises only the images of its own micro-batches. *loss gets
// the mean loss of the global batch (identical bits on every rank). Collective.
ff_status ff_train_step(ff_trainer *t, double *loss, const ff_dataset *ds, const int64_t *idx, int64_t b);
// ceil(n / B) consecutive steps: step j on samples idx[j*B .. min(n, (j+1)*B)) (the last may be
// short); losses[j] gets step j's loss. The same steps, bits and losses as that many
// ff_train_step calls; faster on a GPU with ds resident (ff_trainer_set_resident) and one
// process: several steps are queued (each a captured graph) before the host waits for one. A
// failing step's checks stop the run before it is enqueued; steps before it have been taken.
ff_status ff_train_steps(ff_trainer *t, double *losses, const ff_dataset *ds, const int64_t *idx, int64_t n);
// Same from an already normalised batch: x (b, C, H, W) and labels (b), valid on every rank.
ff_status ff_train_step_tensor(ff_trainer *t, double *loss, const float *x, const int32_t *labels, int64_t b);
// The reduced gradient of the last step before the update, as of the last ff_trainer_sync
// (n_total floats, weights layout: same offsets as ff_weights.data). For tests and the golden check.
const float *ff_trainer_grad(const ff_trainer *t);
// Device -> host: the weights into *w, the momentum into ff_trainer_momentum, the last gradient.
// Before reading any of them (digests, checkpoints, the end of a run). Collective: with P > 1 every
// rank calls it at the same point (the deterministic exchange leaves each rank only its slices of
// the momentum and gradient up to date, and this gathers them).
ff_status ff_trainer_sync(ff_trainer *t);
// Host -> device: *w and ff_trainer_momentum become the trainer's state (a resume sets them).
ff_status ff_trainer_load(ff_trainer *t);
// Keeps data set ds on the device (a GPU): uploaded once, normalised; steps on ds then gather
// their batch there from the indices alone. No-op on the cpu device. ds must outlive the trainer
// (or the next call).
ff_status ff_trainer_set_resident(ff_trainer *t, const ff_dataset *ds);

// Where the steps' time went on this rank (host wall time, seconds, summed over ff_train_step /
// ff_train_steps calls since creation, leaving out the first FF_TRAIN_WARMUP_STEPS steps: the
// eager first sight of a step, GEMM tuning, CUDA-graph capture, NCCL's connection set-up).
// Several ranks: compute = the forward and backward of its micro-batches (until the device has
// finished the backward), exchange = the gradient exchange after that (exposed: what the step
// waits for), exchange_total = all the time the host spent in the exchange's collectives (with
// overlap most of it runs during the backward), update = SGD and the losses' exchange. One
// process: all of it is compute (steps queued in chunks, never waited for one by one).
#define FF_TRAIN_WARMUP_STEPS 2
typedef struct {
    double compute_s, exchange_s, update_s, exchange_total_s;
    int64_t steps;          // steps counted (after the warm-up)
    bool overlapped;        // the exchange ran in buckets during the backward (ff_train_options.overlap, a GPU)
    bool overlapped_steps;  // ... and its last buckets beside the next step's forward (overlap_steps)
    bool queued;            // the exchange was queued on the device (NCCL): compute_s holds the whole step, the
                            // host cannot split it (exchange_s, update_s stay 0)
    double enqueue_s;       // queued: the host's time to enqueue the steps (near compute_s: the host bounds them)
    int buckets;            // gradient buckets (runs of layers) the exchange goes in
    int windows;            // buffers in the communicator's registered windows (comm.h ff_comm_alloc_window;
                            // NCCL: symmetric memory), the weights included; 0: plain device memory
    int fused_buckets;      // the most buckets of one step exchanged by the communicator's fused kernel (comm.h
                            // ff_comm_fused_tree_sgd: every rank one micro-batch, one node, NCCL 2.28)
} ff_train_phases;
ff_train_phases ff_trainer_phases(const ff_trainer *t);
// How the gradients move between ranks: the communicator's transport (comm.h,
// ff_comm_transport_name: "nccl (device buffers)", "mpi (staged through pinned host memory)", ...);
// NULL for one process.
const char *ff_trainer_transport(const ff_trainer *t);

// Momentum buffers (same layout as the weights) and the number of steps taken; checkpoints save
// and restore them. Setting them is how a resume continues bit-identically.
ff_weights *ff_trainer_momentum(ff_trainer *t);
int64_t ff_trainer_steps(const ff_trainer *t);
void ff_trainer_set_steps(ff_trainer *t, int64_t steps);
// Images trained on by this trainer since it was created (the sum of every step's b, so a short
// last batch counts what it holds; not restored by a resume): what a samples/s figure divides.
int64_t ff_trainer_samples(const ff_trainer *t);

// Classifies ds samples [0, n) with the current weights (argmax of the logits, first max wins);
// *correct gets how many match their label, summed over ranks (each rank does a slice). Collective.
// n > ds->n is clipped to ds->n; n < 0 and a data set that does not fit the model
// (ff_train_check_dataset) are refused with FF_ERR_INPUT.
ff_status ff_train_evaluate(ff_trainer *t, int64_t *correct, const ff_dataset *ds, int64_t n);

#ifdef __cplusplus
}
#endif
