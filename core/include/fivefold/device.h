// The device interface (docs/ARCHITECTURE.md §1, §3): where tensors live and which kernels run.
// Implementations: cpu (core/device/cpu/device_cpu.c: host memory, the reference layers) and cuda
// (core/device/cuda/device_cuda.c: one GPU, its kernels, one stream). The decompositions
// (core/decomp/) are written once over this interface and comm.h; a mode is a device, a
// decomposition and a transport.
//
// Every float pointer handed to a device function is memory of that device ("device memory"; for
// the cpu device, ordinary host memory) unless its name says host. Work is enqueued in order on
// the device's one stream: a function may return before its work is done, and ff_device_sync
// waits for all of it. That includes upload and download: the host buffer must stay valid and
// unchanged until the next ff_device_sync (so a whole forward is upload, run, download, one
// sync). Callers own memory: buffers come from ff_device_alloc.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fivefold/layers_cpu.h"
#include "fivefold/model.h"
#include "fivefold/plan.h"
#include "fivefold/synthetic.h"
#include "fivefold/status.h"
#include "fivefold/trace.h"
#include "fivefold/tree_rows.h"
#include "fivefold/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ff_device ff_device;

typedef struct {
    int64_t max_batch;    // largest n any run will use (workspaces are sized once)
    int gpu;              // cuda: the device index to use; -1: local_rank % the GPUs present
    int local_rank;       // this rank's index among its node's ranks (0 for one process)
    bool borrow_weights;  // cpu: run on the caller's weight buffer in place instead of a copy (it
                          // must outlive the device; the trainer's SGD updates it between runs)
    bool train_only;      // only the training ops will run (the trainer owns their buffers): no
                          // buffers for ff_device_run, which then refuses; max_batch bounds the
                          // training ops' n, and a GPU sizes its scratch to the n they bring
} ff_device_options;

// One piece of a banded layer: output rows rows.out_* of n images into out, from input rows
// rows.in_* in `in` (the rows the plan's ff_plan_input_rows names, or more). The same record the
// CPU conv takes for its segments (layers_cpu.h).
typedef ff_conv_segment ff_band_job;

// Creates a device of kind p->device for model m: uploads the weights once (they need not outlive
// the call) and prepares what the plan needs (Winograd weights, workspaces). FF_ERR_NO_CUDA where
// the kind is cuda and no GPU (or no toolkit) is present.
ff_status ff_device_create(ff_device **out, const ff_model *m, const ff_weights *w, const ff_plan *p,
                           const ff_device_options *o);
void ff_device_destroy(ff_device *d);

ff_device_kind ff_device_kind_of(const ff_device *d);
const ff_plan *ff_device_plan(const ff_device *d);
// True when the device's memory is host memory (the cpu device): callers may then pass host
// buffers where device buffers are expected and skip uploads and downloads.
bool ff_device_is_host(const ff_device *d);

// ---- memory ----
// FF_ERR_OOM naming `what`, the bytes asked for (and free, on a GPU).
ff_status ff_device_alloc(ff_device *d, float **p, size_t floats, const char *what);
void ff_device_free(ff_device *d, float *p);
// Copies between the host and the device, enqueued (see above: done at the next ff_device_sync).
ff_status ff_device_upload(ff_device *d, float *dst, const float *src_host, size_t floats);
ff_status ff_device_download(ff_device *d, float *dst_host, const float *src, size_t floats);
// Copies rows [lo, hi) of n*C planes of width W from src, which holds rows [src_lo, src_lo +
// src_rows) of each plane, to dst, which holds rows [dst_lo, dst_lo + dst_rows). Pack, unpack and
// gather of bands all reduce to it (a (n, F) feature block is n planes of F rows of width 1).
ff_status ff_device_copy_rows(ff_device *d, float *dst, int64_t dst_lo, int64_t dst_rows, const float *src,
                              int64_t src_lo, int64_t src_rows, int64_t n, int64_t C, int64_t W, int64_t lo,
                              int64_t hi);
// Copy of any bytes between any two buffers of this device (or of another device of the same
// kind in this process: the loopback ranks sharing a GPU) or the host: the transports' copy.
// Synchronous: returns when the copy is done; it does not wait for the stream's pending work
// (ff_device_sync first).
ff_status ff_device_copy_bytes(ff_device *d, void *dst, const void *src, size_t bytes);
// Waits for every piece of work enqueued so far.
ff_status ff_device_sync(ff_device *d);
// A fence: ff_device_wait_fence waits for the work enqueued before the last ff_device_fence, not
// for what was enqueued after it. The rows split packs its halo rows, fences, enqueues the
// interior of the layer (rows that need no halo), waits for the fence and exchanges: the interior
// is computed while the halos travel. On the cpu device (synchronous) both return at once.
ff_status ff_device_fence(ff_device *d);
ff_status ff_device_wait_fence(ff_device *d);
// Numbered fences, for work that waits on several points of one queue (the trainer's gradient
// buckets, ARCHITECTURE §9): fence k marks the work enqueued so far, wait_fence_at(k) waits for
// it. k in [0, FF_DEVICE_FENCES); fence 0 is ff_device_fence's. Synchronous devices: no-ops.
#define FF_DEVICE_FENCES 65
ff_status ff_device_fence_at(ff_device *d, int k);
ff_status ff_device_wait_fence_at(ff_device *d, int k);
// A second queue beside the first (a GPU: a second stream): while `side` is on, work is enqueued
// there, and ff_device_sync and the fences wait for it alone. The trainer finishes one gradient
// bucket's exchange there while the backward of the layers below it still runs on the first.
// The caller keeps the two apart (no buffer written on one while the other uses it). A no-op on a
// synchronous device.
ff_status ff_device_side_lane(ff_device *d, bool side);
// Waits kept on the device (the host returns at once), for work queued across the two lanes
// without the host in between (the trainer's queued exchange, ARCHITECTURE §9):
// lane_wait_fence_at(k): what is enqueued next on the current lane runs after fence k's work;
// join_side: what is enqueued next on the main lane runs after everything enqueued so far on the
// side lane. No-ops on a synchronous device.
ff_status ff_device_lane_wait_fence_at(ff_device *d, int k);
ff_status ff_device_join_side(ff_device *d);
// The GPU stream the device enqueues on now (the side lane's while it is on), for a transport
// that queues its own work there (comm.h, ff_comm_set_queued); NULL on a host device.
struct ff_gpu_stream_s;
struct ff_gpu_stream_s *ff_device_gpu_stream(ff_device *d);
// Whether work returns before it is done (a GPU): only then is overlapping worth its extra steps.
bool ff_device_is_async(const ff_device *d);

// ---- compute ----
// Layers [first, last] on n whole images: `in` (n, layers[first].in) device memory; *out receives
// a device buffer owned by the device holding (n, layers[last].out), valid until the next run. The
// device may fuse per the plan and replay a captured graph (cuda: keyed by n, first, last, in,
// fault). fault_layer: the layer whose output element 0 is perturbed (ff_fault_value), -1 none.
// trace: per-layer compute (and, on a GPU, nothing else) seconds added; NULL: untimed.
ff_status ff_device_run(ff_device *d, const float **out, const float *in, int64_t n, int first, int last,
                        int fault_layer, ff_trace *trace);
// One layer on several bands (the rows split's image groups): job q computes its rows as a run of
// that layer alone would, bit for bit. A layer planned FF_BAND_WHOLE accepts full rows only.
ff_status ff_device_run_bands(ff_device *d, const ff_band_job *jobs, int n_jobs, int layer);
// A linear layer restricted to output features [f_lo, f_hi): out (n, f_hi - f_lo); in (n, in_features).
ff_status ff_device_run_features(ff_device *d, float *out, const float *in, int layer, int64_t f_lo, int64_t f_hi,
                                 int64_t n);
// x[0] = ff_fault_value(x[0]) (the --inject-fault hook).
ff_status ff_device_fault(ff_device *d, float *x);

// ---- device-resident timing (FF_ERR_INPUT "not supported" on the cpu device) ----
// Times `iters` replays of the whole model on the input of the last ff_device_run of the whole
// model with the same n, without host copies; ms_out (iters) receives each.
ff_status ff_device_time_resident(ff_device *d, int64_t n, int iters, double *ms_out);
// The output of the last resident replay, to host memory (n, classes).
ff_status ff_device_resident_output(ff_device *d, float *out_host, int64_t n);
// Page-locks a host buffer for fast copies (no-op on the cpu device); unpin before freeing it.
ff_status ff_device_pin_host(ff_device *d, void *p, size_t bytes);
void ff_device_unpin_host(ff_device *d, void *p);
// *dev: where this device's kernels read and write the pinned host buffer p themselves (the same
// memory, no copy node between them and the host), or NULL where they cannot (the cpu device: its
// callers copy as before).
ff_status ff_device_host_mapped(ff_device *d, void **dev, void *p);

// ---- training (train.h, docs/ARCHITECTURE.md §9) ----
// One trainer drives every mode's step through these: train_forward (the activations the backward reads),
// softmax_xent on the logits, train_backward (per-micro-batch parameter gradients), the tree
// reduction of train.h, the SGD update. Gradients come per group of `group` consecutive images
// (train.h's micro-batches): the sums of one group never mix with another's, so the trainer can
// hand groups to any rank. Bits: the cpu device runs layers_cpu_backward.h (its summation
// orders); the cuda device keeps the same orders with one fma chain per element (gpu.h), so its
// bits depend on the inputs and the group size only, never on the rank count or launch shapes.
// The device's plan must run every conv direct (train.h says why; ff_device_train_forward refuses
// others).

// The device's weights: n_total floats in ff_weights' layout (ff_weights.data offsets), what
// every run reads and the update writes.
float *ff_device_params(ff_device *d);
// The weights move into buf (n_total floats of the caller's device memory, such as a
// communicator's window, comm.h ff_comm_alloc_window, so that the all-gather of the updated
// weights lands in registered memory): copied there, and from then on ff_device_params is buf.
// The device frees its own copy and never frees buf, which must outlive the device's use of it.
// Before the first run (a captured forward holds the old addresses: FF_ERR_INPUT); GPUs only.
ff_status ff_device_adopt_params(ff_device *d, float *buf);

// Memory for other element types (labels, sample indices); freed with ff_device_free.
ff_status ff_device_alloc_bytes(ff_device *d, void **p, size_t bytes, const char *what);
// Enqueued host -> device copy of bytes (same rule as ff_device_upload).
ff_status ff_device_upload_bytes(ff_device *d, void *dst, const void *src_host, size_t bytes);

// x (n, per) and labels (n) of the batch made of samples idx[0..n) of a device-resident set:
// x[i] = images[idx[i]], labels[i] = all_labels[idx[i]]. images (count, per), all_labels (count),
// idx (n) int64 in [0, count): device memory.
ff_status ff_device_gather(ff_device *d, float *x, int32_t *labels, const float *images, const int32_t *all_labels,
                           const int64_t *idx, int64_t per, int64_t n);

// x (n, s->dim): the features of samples [first, first + n) of synthetic set s (synthetic.h),
// computed on the device (a GPU: a kernel; the bits are the host's): a synthetic training set
// made resident with no host copy. Device memory x.
ff_status ff_device_synth(ff_device *d, float *x, const ff_synth *s, int64_t first, int64_t n);

// Layers [first, last] on n whole images, keeping every output the backward reads: act[first] (n,
// layer first's input) is the input, act[l + 1] (n, layers[l].out) receives layer l's output
// (flatten's is act[l] itself: act[l + 1] may equal act[l]), except that a GPU device may leave the
// output of a conv/linear followed by a relu inside [first, last] unwritten (it writes the relu's
// output in the same kernel; no backward reads the pre-activation). Every act[l] is device memory of n images at least.
// The cpu device runs the groups of `group` images on its threads; the bits are those of ff_device_run, and the same
// whether the layers run in one call or in several consecutive ranges (the trainer's forward bucket by bucket,
// ARCHITECTURE §9). Layers conv2d, relu, maxpool, flatten, linear only; a conv planned other than direct is refused.
ff_status ff_device_train_forward(ff_device *d, float *const *act, int first, int last, int64_t n, int64_t group);

// Softmax cross-entropy (layers_cpu_backward.h's formulas): dz (n, classes) receives the gradient
// of scale * (sum of the n images' losses) w.r.t. the logits z (n, classes); loss (n) each
// image's loss (NULL: not needed). labels (n) in [0, classes).
ff_status ff_device_softmax_xent(ff_device *d, float *dz, float *loss, const float *z, const int32_t *labels,
                                 float scale, int64_t classes, int64_t n);

// Backward of layers [0, last] from dz (n, layers[last].out), the gradient of the logits, with the
// activations of the matching ff_device_train_forward. Group g's parameter gradients (images
// [g*group, min(n, (g+1)*group))) overwrite row g of grads ((ceil(n / group), grad_stride) floats,
// ff_weights' layout in each row). dz is overwritten (used as scratch).
ff_status ff_device_train_backward(ff_device *d, float *grads, int64_t grad_stride, float *dz, const float *const *act,
                                   int last, int64_t n, int64_t group);
// The same backward in two passes, so that gradient buckets can be exchanged while the device
// still computes (the trainer's overlap): first every data gradient, layers [0, last] top down from
// dz, the output gradients the parameter gradients need kept on the device (dz among them: leave it
// as it is until the second pass is done); then the parameter gradients of layers [lo, hi] (hi at
// most the data pass's last), in parts, in any order, each layer once. The data pass reads every
// weight and the second pass none, so once the data pass is queued the weights may be overwritten.
// Together they give the bits of one ff_device_train_backward. FF_ERR_INPUT "not supported" where
// a device cannot (ff_device_can_backward_in_passes); a parameter pass without a data pass of as
// many images in the same groups is refused.
ff_status ff_device_train_backward_data(ff_device *d, float *dz, const float *const *act, int last, int64_t n,
                                        int64_t group);
ff_status ff_device_train_backward_params(ff_device *d, float *grads, int64_t grad_stride, const float *const *act,
                                          int hi, int lo, int64_t n, int64_t group);
bool ff_device_can_backward_in_passes(const ff_device *d);
// The backward with its parameter gradients summed over the ceil(n / group) groups (at most
// FF_DEVICE_TREE_MAX_GROUPS, train.h's FF_MAX_MICROBATCHES) in train.h's fixed tree: grad[0, count) receives the bits
// of ff_device_train_backward followed by ff_device_tree_reduce(grad, grads, groups, grad_stride, count); grads is
// scratch. One process's step (nothing to exchange, so no row needs to outlive it). The cuda device's own linear
// kernels sum the groups of a weight gradient as they compute them (ff_gpu_linear_backward_weights_tree) instead of
// writing a row per group and reading it back: at batch 256, 150 MB of fc1's rows each way.
#define FF_DEVICE_TREE_MAX_GROUPS 1024
ff_status ff_device_train_backward_reduced(ff_device *d, float *grad, float *grads, int64_t grad_stride, float *dz,
                                           const float *const *act, int last, int64_t n, int64_t group, int64_t count);

// train.h's tree over rows (nrows, stride): out[0..len) becomes the sum of the nrows rows in the
// fixed tree that depends on nrows only (nrows 1: a copy). out may be rows (in place) or any
// buffer apart from them; the rows' contents afterwards are the device's (scratch).
ff_status ff_device_tree_reduce(ff_device *d, float *out, float *rows, int64_t nrows, int64_t stride, int64_t len);

// SGD with momentum, train.h's rule, element-wise on count floats: w, mom (momentum buffers),
// g (the reduced gradient). first: the first step (mom = g). Float32 without fma on every device,
// so the update's bits are the same everywhere.
ff_status ff_device_sgd(ff_device *d, float *w, float *mom, const float *g, int64_t count, float lr, float momentum,
                        float weight_decay, bool first);

// The last step of the deterministic exchange on this rank's slice (train.c exchange_bucket): the
// tree over the rows as ff_device_tree_reduce (its sum left in row 0 where keep_sum), then the SGD
// rule of ff_device_sgd on it, weights read from w and written to w_out (w_out may be w: the
// trainer updates the weights in place and all-gathers them from there), mom in place. The same
// bits as the tree followed by ff_device_sgd and a copy, in one pass over memory where those were
// three.
ff_status ff_device_tree_sgd(ff_device *d, float *w_out, const float *w, float *mom, const ff_tree_rows *rows,
                             int64_t count, float lr, float momentum, float weight_decay, bool first);

// Bytes of scratch the training backward of layers [0, last] allocates on the device for n images
// at once (a GPU's GEMM workspaces and its two data-gradient buffers, and with two_pass the output
// gradients the backward in two passes keeps; 0 on the cpu device).
size_t ff_device_train_work_bytes(const ff_device *d, int last, int64_t n, bool two_pass);

// Free and total bytes of the device's memory now (a GPU: cudaMemGetInfo); 0 and 0 on the host,
// where the operating system decides. What the trainer checks a batch against before it allocates.
ff_status ff_device_memory(const ff_device *d, size_t *free_bytes, size_t *total_bytes);

// ---- captured work (a GPU: CUDA graphs) ----
// Everything enqueued between ff_device_capture_begin and ff_device_capture_end is recorded, not
// run, and becomes one replayable graph: the trainer's step is dozens of small launches, which a
// replay issues as one. Host code between the two runs once, at capture time: only device work
// (kernels, copies from and to pinned host buffers, which a replay reads and writes anew) is
// recorded. FF_ERR_INPUT "not supported" on the cpu device. A failed op between the two must
// still be followed by capture_end (which then fails too) to leave the stream usable.
typedef struct ff_device_graph ff_device_graph;
bool ff_device_can_capture(const ff_device *d);
ff_status ff_device_capture_begin(ff_device *d);
ff_status ff_device_capture_end(ff_device *d, ff_device_graph **out);
ff_status ff_device_graph_launch(ff_device *d, ff_device_graph *g);
void ff_device_graph_destroy(ff_device *d, ff_device_graph *g);

#ifdef __cplusplus
}
#endif
