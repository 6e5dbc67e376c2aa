// The GPU entry points the C side calls (docs/ARCHITECTURE.md §1, §4, §5). Plain C: no CUDA header is needed to
// include this file, so the cuda device (core/device/cuda/device_cuda.c) compiles on machines without a CUDA
// toolkit, where core/device/cuda/gpu_none.c provides every function below returning FF_ERR_NO_CUDA.
//
// Layer launchers take the same arguments, in the same order, as their CPU twins in layers_cpu.h
// (outputs, inputs, parameters, sizes), then the stream; every pointer is DEVICE memory; callers
// own memory and no launcher allocates. A launcher only enqueues work: errors of the launch itself
// are returned (every launch is followed by a launch-error check), errors of the kernel's execution
// surface at the next synchronising call.
//
// Summation order on the GPU (what makes the `cuda` digest class, docs/ARCHITECTURE.md §5):
//   conv2d: acc = b[k]; then for (c, r, s) ascending: acc = fma(w[k,c,r,s], x, acc), where a
//           padding tap contributes x = +0 (adding fma(w, +0, acc) = acc except for the sign of a
//           zero sum); then relu if fused.
//   linear: the reduction over i is cut into S = ff_linear_split(in_features) fixed chunks
//           (linear_split.h: a function of in_features alone); chunk 0's chain starts at b[j], the
//           others' at +0, each i ascending: acc = fma(w[j,i], x[i], acc); then the chunk sums are
//           added in chunk order, ((p_0 + p_1) + ...) + p_{S-1}; then relu if fused. S = 1 (short
//           layers, e.g. in_features < 2048) is the single chain acc = b[j], i ascending.
// Every kernel (whatever its tile shape, batch size, band, or the small-batch GEMV path) computes
// each output element with exactly that order, each chain in one thread: no atomics and no split
// that depends on the launch, so the value of an element never depends on the batch size, the
// band, the tile alignment or the launch shape.
// Element-wise layers (relu, maxpool, lrn, softmax, flatten) do the same float operations as the
// CPU reference and give the same bits as it.
// Winograd conv layers (ff_gpu_conv2d_winograd; the cuda executor's default for the layers
// ff_winograd_m accepts: stride-1 3x3 and 5x5 convs with >= 16 input channels, and strided convs
// that space-to-depth rewrites exactly as stride-1 3x3 ones, such as AlexNet's conv1;
// ff_exec_layer_algorithm says "winograd-m"): a different,
// equally fixed order, stated in winograd.h: per output tile anchored at ABSOLUTE output
// coordinates (tile rows th*m .. th*m+m-1), the input transform, one fma chain over the channels
// per transform position (the GEMM kernel above with the bias replaced by +0: again one chain in
// one thread, whatever the tile configuration), the output transform, then + bias. Still no
// split-K, no atomics: the bits depend on neither the batch size nor the launch shape (tested at
// N = 1, 7, 128 and under forced GEMM tile configurations). A row band that starts mid-tile must
// hold the input rows of the whole tile (ff_winograd_input_rows: up to m-1 rows more than
// ff_layer_input_rows); hybrid/direct `rows` splits must fetch that halo to stay bit-equal to cuda.
// The direct kernel stays selectable (FF_CUDA_CONV=direct) and keeps the order above.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fivefold/layers_cpu.h"
#include "fivefold/linear_split.h"
#include "fivefold/model.h"
#include "fivefold/status.h"
#include "fivefold/synthetic.h"
#include "fivefold/tree_rows.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ff_gpu_stream_s *ff_gpu_stream;  // a cudaStream_t
typedef struct ff_gpu_event_s *ff_gpu_event;    // a cudaEvent_t (timing enabled)
typedef struct ff_gpu_graph_s *ff_gpu_graph;    // an instantiated CUDA graph (cudaGraphExec_t)
typedef struct ff_gpu_blas_s *ff_gpu_blas;      // a cuBLAS handle (--backend vendor)

// ---- devices ----
// Number of usable CUDA devices. None (or no driver): FF_ERR_NO_CUDA "no CUDA device found".
ff_status ff_gpu_device_count(int *count);
// Makes `device` current for the calling thread and prepares the kernels (shared-memory limits).
ff_status ff_gpu_select(int device);
// Name ("NVIDIA H200"), multiprocessor count, compute capability and memory of `device`.
ff_status ff_gpu_device_info(int device, char *name, size_t name_cap, int *sms, int *cc_major, int *cc_minor,
                             size_t *total_bytes);
ff_status ff_gpu_mem_info(size_t *free_bytes, size_t *total_bytes);
// `device`'s PCI bus id ("0000:19:00.0"): how NVML (the monitor) finds the GPU CUDA calls `device`.
ff_status ff_gpu_pci_bus_id(int device, char *buf, size_t cap);
// CUDA runtime and driver versions as 1000*major + 10*minor (13000 = 13.0).
ff_status ff_gpu_versions(int *runtime, int *driver);

// ---- memory ----
// Device allocation; on failure FF_ERR_OOM naming `what`, the bytes asked for and the bytes free.
ff_status ff_gpu_alloc(void **p, size_t bytes, const char *what);
void ff_gpu_free(void *p);
// Pinned host memory (fast, asynchronous copies).
ff_status ff_gpu_alloc_host(void **p, size_t bytes, const char *what);
void ff_gpu_free_host(void *p);
// Page-locks an existing host buffer (cudaHostRegister) so that copies from/to it run at full
// PCIe/NVLink speed and truly asynchronously; a pageable buffer is staged by the driver (at N = 256
// AlexNet on an H200, host->host forward 35 ms pageable vs 21 ms pinned, 18 ms of it compute).
// Unregister before freeing the buffer.
ff_status ff_gpu_host_register(void *p, size_t bytes);
void ff_gpu_host_unregister(void *p);
// *dev: the address through which kernels read and write the registered host buffer at p (the
// same memory over PCIe/NVLink, no copy), NULL where the device cannot map it.
ff_status ff_gpu_host_mapped(void **dev, void *p);
// Asynchronous copies on stream s (host memory may be pageable; then the copy is staged).
ff_status ff_gpu_copy_h2d(void *dst, const void *src, size_t bytes, ff_gpu_stream s);
ff_status ff_gpu_copy_d2h(void *dst, const void *src, size_t bytes, ff_gpu_stream s);
ff_status ff_gpu_copy_d2d(void *dst, const void *src, size_t bytes, ff_gpu_stream s);
// Synchronous copy in any direction (host or device memory of any GPU, told apart by unified
// addressing): returns when the bytes have landed, device-to-device copies included. It runs on
// the legacy default stream, which does not wait for fivefold's streams (they are non-blocking):
// work pending on a stream that reads or writes dst or src must be synchronised first. The
// loopback transport's copy between simulated ranks' buffers on one GPU, and between host and GPU.
ff_status ff_gpu_copy_any(void *dst, const void *src, size_t bytes);
// Strided 2-D copy on stream s, any direction: `height` rows of `width` bytes, row i from
// src + i*spitch to dst + i*dpitch (pitches >= width). Pack and unpack of row bands: one copy
// moves the same rows of every (image, channel) plane.
ff_status ff_gpu_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         ff_gpu_stream s);
// dst[i] = value for i < count (tests poison outputs with NaN before a kernel runs).
ff_status ff_gpu_fill(float *dst, float value, size_t count, ff_gpu_stream s);

// ---- streams, events, graphs ----
ff_status ff_gpu_stream_create(ff_gpu_stream *s);
// A stream of the device's highest priority: its blocks are scheduled before those of streams of
// lower priority waiting for a free SM (the gradient exchange's small kernels beside the
// backward's GEMMs, which otherwise fill every SM and leave them queued). FF_URGENT_STREAMS=0 in
// the environment makes it an ordinary stream (A/B timing).
ff_status ff_gpu_stream_create_urgent(ff_gpu_stream *s);
bool ff_gpu_urgent_streams(void);  // false when FF_URGENT_STREAMS=0
void ff_gpu_stream_destroy(ff_gpu_stream s);
ff_status ff_gpu_stream_sync(ff_gpu_stream s);
ff_status ff_gpu_event_create(ff_gpu_event *ev);
void ff_gpu_event_destroy(ff_gpu_event ev);
ff_status ff_gpu_event_record(ff_gpu_event ev, ff_gpu_stream s);
ff_status ff_gpu_event_sync(ff_gpu_event ev);  // waits until the work before the record is done
// Work enqueued on s after this call runs after the work recorded by ev (the host does not wait).
ff_status ff_gpu_stream_wait_event(ff_gpu_stream s, ff_gpu_event ev);
// Seconds between two recorded events (waits for `stop`).
ff_status ff_gpu_event_elapsed(double *seconds, ff_gpu_event start, ff_gpu_event stop);
// Stream capture: everything enqueued on s between begin and end becomes one graph, instantiated
// by end; launching it replays the work with one launch.
ff_status ff_gpu_capture_begin(ff_gpu_stream s);
ff_status ff_gpu_capture_end(ff_gpu_graph *g, ff_gpu_stream s);
ff_status ff_gpu_graph_launch(ff_gpu_graph g, ff_gpu_stream s);
void ff_gpu_graph_destroy(ff_gpu_graph g);

// ---- vendor backend (cuBLAS), checked by tolerance only ----
// tf32: allow TF32 tensor-core math (FF_PRECISION_TF32); otherwise plain fp32.
ff_status ff_gpu_blas_create(ff_gpu_blas *h, ff_gpu_stream s, bool tf32);
void ff_gpu_blas_destroy(ff_gpu_blas h);

// ---- layers (device pointers; shapes as in layers_cpu.h) ----
// out: (n, K, out_hi-out_lo, Wo); in: (n, C, in_hi-in_lo, W); w: (K, C, R, S); b: (K).
// relu: apply relu to the result (the executor fuses conv+relu; a per-layer run passes false).
// With ff_gpu_set_short_conv(true), a conv of at most FF_GPU_SHORT_CONV_KD terms a chain (C*R*S;
// mnist's conv1) runs its own kernel (k_conv_short: a thread a pixel, its taps in registers), the
// conv order above, under every --precision (tf32x3 would buy nothing on chains this short; fp32
// chains are the more exact); ff_gpu_debug_last_tile() then says FF_GPU_TILE_SHORT_CONV, and a
// forced tile runs the GEMM tile.
// Off (the default until a GPU run has timed it against the tiles: bench/results/issue15-s43), they
// go to the tiles like any conv: the same bits in fp32, tf32x3's own under --precision tf32x3.
#define FF_GPU_SHORT_CONV_KD 32
#define FF_GPU_TILE_SHORT_CONV 100
ff_status ff_gpu_conv2d(float *out, const float *in, const float *w, const float *b, const ff_layer *L, bool relu,
                        const ff_rows *rows, int64_t n, ff_gpu_stream s);
// Winograd F(m x m, r x r) (winograd.h states the order of operations and the tile anchoring):
// out: (n, K, out_hi-out_lo, Wo); in: (n, C, in_hi-in_lo, W) holding at least the rows
// ff_winograd_input_rows names (FF_ERR_INPUT otherwise); u: (alpha^2, K, C') from
// ff_winograd_weights, uploaded; b: (K); work: ff_winograd_workspace_floats(L, m, out_lo, out_hi, n)
// floats of device memory (for a space-to-depth layer X' first, ff_winograd_s2d_floats; then the
// transformed input, then the GEMM outputs). A space-to-depth layer takes the whole layer only
// (rows = ff_rows_full(L); FF_ERR_INPUT otherwise).
ff_status ff_gpu_conv2d_winograd(float *out, const float *in, const float *u, const float *b, const ff_layer *L, int m,
                                 bool relu, const ff_rows *rows, int64_t n, float *work, ff_gpu_stream s);
// out, in: (count): out = in < 0 ? +0 : in (keeps -0.0 and NaN, as PyTorch and the CPU do).
ff_status ff_gpu_relu(float *out, const float *in, int64_t count, ff_gpu_stream s);
// out: (n, C, out_hi-out_lo, Wo); in: (n, C, in_hi-in_lo, W); first max wins, NaN propagates.
ff_status ff_gpu_maxpool(float *out, const float *in, const ff_layer *L, const ff_rows *rows, int64_t n,
                         ff_gpu_stream s);
// out, in: (n, C, rows, W): PyTorch's local response norm, the CPU's float operations.
ff_status ff_gpu_lrn(float *out, const float *in, const ff_layer *L, int64_t rows, int64_t n, ff_gpu_stream s);
// out: (n, out_features); in: (n, in_features); w: (out_features, in_features); b: (out_features).
// work: ff_gpu_linear_workspace_floats(L, n) floats of device memory (linear_split.h; the partial
// sums of a split layer), NULL allowed where that is 0; a split layer without one: FF_ERR_INPUT.
ff_status ff_gpu_linear(float *out, const float *in, const float *w, const float *b, const ff_layer *L, bool relu,
                        int64_t n, float *work, ff_gpu_stream s);
// The same through cuBLAS SGEMM (then bias and relu): a different summation order, tolerance only.
ff_status ff_gpu_linear_vendor(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                               bool relu, int64_t n, ff_gpu_blas h, ff_gpu_stream s);
// The backward of a linear layer through cuBLAS (--backend vendor, training): for each group of
// `group` consecutive images (the last may be shorter), the weight gradient dy_g^T x_g (out x in)
// at gw + g * grad_stride and the bias gradient dy_g^T 1 at gb + g * grad_stride (gw NULL: neither);
// and, dx not NULL, the data gradient dx (n, in) = dy (n, out) w (out, in). ones: at least `group` device floats of
// 1.0. One SGEMM of one shape per group (cuBLAS may choose another algorithm for another shape), so
// the bits do not depend on n: the same on any rank count and --shares on one GPU model and library
// version, another digest class than the own kernels.
ff_status ff_gpu_linear_vendor_backward(float *gw, float *gb, int64_t grad_stride, float *dx, const float *dy,
                                        const float *x, const float *w, const ff_layer *L, int64_t n, int64_t group,
                                        const float *ones, ff_gpu_blas h, ff_gpu_stream s);
// out, in: (n, classes): max-subtracted softmax with the CPU's operations and order.
ff_status ff_gpu_softmax(float *out, const float *in, int64_t classes, int64_t n, ff_gpu_stream s);
// x[0] = ff_fault_value(x[0]) (x + 1 + 2|x|, the executor's fault rule) on the device.
ff_status ff_gpu_fault(float *x, ff_gpu_stream s);
// Any layer on a band, as ff_cpu_layer_forward (flatten: a device copy unless out == in).
// relu is honoured by conv2d and linear only; work is the linear layers' workspace (ff_gpu_linear),
// unused by the others (NULL is fine for them).
ff_status ff_gpu_layer_forward(float *out, const float *in, const float *w, const float *b, const ff_layer *L,
                               bool relu, const ff_rows *rows, int64_t n, float *work, ff_gpu_stream s);

// Kernel configuration. conv2d and linear have several tile configurations (gpu.h's order holds
// in all of them; the tests show they give identical bits). While tuning is on, the first launch
// of each new shape times every configuration on its real buffers and remembers the fastest for
// that shape; later launches (and graph captures, which must not tune) use the remembered one, or
// a size heuristic for shapes never tuned. The cuda device (core/device/cuda/device_cuda.c) tunes
// once per new graph before it captures it. Threads: the switch is per thread (it affects the
// launches of the calling thread only), so simulated ranks that each own a cuda device on one GPU
// (the loopback transport's threads) tune independently; the remembered choices are shared by all
// threads (a mutex guards them; the first choice recorded for a shape is the one every thread
// uses). Ranks tuning at the same time on one GPU time each other's work too: the choice may be
// slower than it could be, never different in value (every configuration gives the same bits).
void ff_gpu_set_tuning(bool on);
// --precision tf32x3 for the calling thread's convolutions (ff_gpu_conv2d, and the data gradients
// that run through it): tensor cores with each factor split into two TF32 halves (layers_cuda.cu
// states the products and the order), their own bits; false: the fp32 FMA chains. With
// ff_gpu_set_short_conv(true), convs of at most FF_GPU_SHORT_CONV_KD terms a chain keep the fp32
// chains either way (ff_gpu_conv2d). Per thread like
// the tuning switch: the cuda device sets its plan's choice at the start of each op.
void ff_gpu_set_conv_math(bool tf32x3);
// The calling thread's setting (true: tf32x3). The conv weight gradient reads it too: under
// tf32x3 a stride-1 conv's per-image partials run on tensor cores (train_cuda.cu k_conv_wgrad_x3).
bool ff_gpu_conv_math_tf32x3(void);
// The calling thread's short-conv kernel (ff_gpu_conv2d; off unless set): per thread, set by the
// cuda device at the start of each op from its plan (FF_CUDA_SHORT_CONV=1).
void ff_gpu_set_short_conv(bool on);
// Test hook: force configuration `tile` (0 .. ff_gpu_debug_tile_count()-1; 3 is the linear GEMV
// path, used where it applies: up to 8 images a thread an output, its chunks in turn; more, the
// split GEMV, a block per chunk and group of 8 images; ff_gpu_debug_lin_tile_first() and up are
// the linear tiles, where they apply; elsewhere these two run the automatic choice; a tf32x3 conv
// runs its configuration tile % ff_gpu_debug_x3_tile_count()); -1 restores the automatic choice.
// Tests only: process-wide, set it while no other thread launches kernels.
void ff_gpu_debug_force_tile(int tile);
int ff_gpu_debug_tile_count(void);
// The first of the linear layers' tiles (k_lin, layers_cuda.cu: rows of whole 16-byte quads, the
// chains of the GEMM tiles), up to ff_gpu_debug_tile_count() - 1; -1 in a build without CUDA.
int ff_gpu_debug_lin_tile_first(void);
// The number of tf32x3 conv configurations (k_conv_x3's tiles, layers_cuda.cu).
int ff_gpu_debug_x3_tile_count(void);
// The first tf32x3 configuration that runs on operands split before the conv (k_conv_x3_wgp; those
// up to ff_gpu_debug_x3_tile_count() - 1), -1 where the build has none (no sm_90a code).
int ff_gpu_debug_x3_presplit_first(void);
// Test hook: those configurations find no scratch for their split operands (as inside a capture
// that first needs one), so their launcher runs k_conv_x3_wg instead: the same bits. Counts the
// launches that fell back so (process-wide). Tests only: set it while no other thread launches.
void ff_gpu_debug_split_scratch_off(bool off);
long long ff_gpu_debug_presplit_fallbacks(void);
// The configuration of the calling thread's last conv2d/linear launch (for benchmark rows).
int ff_gpu_debug_last_tile(void);
// Test hook: the conv weight gradient's fast path always takes its tiled kernel (k_conv_wgrad_part)
// instead of the strip kernel it picks for few columns (train_cuda.cu); the same bits where an image
// is one strip (gpu.h FF_GPU_WGRAD_STRIP_ROWS). Tests only, process-wide.
void ff_gpu_debug_force_wgrad_tiled(bool on);
// Test hook: the maxpool backward takes its general tiled kernel (k_maxpool_bwd_tiled) where it
// would take the 2x2 windows' float2 kernel (train_cuda.cu); the same bits. Tests only, process-wide.
void ff_gpu_debug_force_maxpool_general(bool on);
// Test hook: the forward maxpool one output a thread (k_maxpool) where two a thread would run
// (a 2x2 window of stride 2 on rows of whole quads). The same bits.
void ff_gpu_debug_force_maxpool1(bool on);
// Test hook: the tf32x3 conv weight gradient runs configuration `config` (0 ..
// ff_gpu_debug_wgrad_x3_count()-1; every one gives the same bits), -1 the automatic choice.
// Tests only, process-wide.
void ff_gpu_debug_force_wgrad_x3(int config);
int ff_gpu_debug_wgrad_x3_count(void);
// The tf32x3 weight-gradient configuration the calling thread's last such launch ran (-1: none yet).
int ff_gpu_debug_last_wgrad_x3(void);
// Whether the calling thread's next conv weight gradients run beside other work: on the gradient
// lane (core/device/cuda/device_cuda.c), at the same time as the data gradient of the same layer
// on the device's stream. Only the choice of the tf32x3 kernel depends on it, never a bit: alone,
// the 12-warp mma.sync kernel is the fastest at small batches and the warpgroup one with a
// 320-column tile an image from 1.5 blocks a multiprocessor (train_cuda.cu conv_wgrad_x3); beside
// the data gradient, which takes most multiprocessors, that warpgroup one at every batch measured
// (bench/results/issue15-s31 run 1: a tf32x3 step at batch 64 0.298 ms against 0.316 with the
// one chosen alone). Per thread like the tuning switch; false until set.
void ff_gpu_set_wgrad_beside(bool beside);
// Whether the calling thread's few-column conv weight gradients (mnist's conv1: the strip kernel,
// FF_GPU_WGRAD_STRIP_ROWS) run as a warp an (image, strip, 32 output channels) with no shared
// memory (k_conv_wgrad_lanes) instead of a block staging them in shared memory: the same chains,
// the same bits. Off unless set (the cuda device sets it from FF_TRAIN_WGRAD_LANES=1): opt-in until
// a GPU run has timed it (bench/results/issue15-s43).
void ff_gpu_set_wgrad_lanes(bool on);

// ---- training (device.h "training", layers_cpu_backward.h, train.h) ----
// The backward layers, the loss, the tree reduction and the SGD update, for the cuda device's
// training ops. Same conventions as above (device pointers, outputs first, the stream last; a
// launcher only enqueues and never allocates). Gradient outputs are OVERWRITTEN, never accumulated.
//
// Summation orders on the GPU. Every chain is computed by ONE thread (fma chains start at +0
// unless stated); no atomics, no split that depends on the launch, so no bit depends on the launch
// shape, the grid, the batch size or the number of groups computed at once. The conv weight, conv
// data and linear data gradients take their own orders when given a workspace (the fast paths, what
// the cuda device always runs); without one (work == NULL) they run direct kernels in the CPU's
// orders of layers_cpu_backward.h (marked "direct").
//   conv2d weights and bias, fast path: per image i, over ALL output positions q = (oh, ow)
//                   ascending (row-major), every term (zero dy included; a padding tap is x = +0):
//                     part[i][k,c,r,s] = +0; acc = fma(dy[i,k,q], x[i,c,oh*st-pad+r,ow*st-pad+s], acc)
//                     part[i][k]       = +0; acc = acc + dy[i,k,q]   (float additions)
//                   then per group g of images i0 .. i1-1: row g = ((part[i0] + part[i0+1]) + ...)
//                   + part[i1-1] (float additions in image order; a one-image group is part[i0]).
//                   Under --precision tf32x3 (ff_gpu_set_conv_math) a stride-1 conv's part[i][k,c,r,s]
//                   is instead a tf32x3 sum (tf32x3.cuh: +0, then chunks of 8 positions q ascending,
//                   the last zero-padded, each chunk's three TF32 products on tensor cores); part[i][k]
//                   and the group sums stay as above.
//                   A layer of few columns (ff_gpu_conv2d_backward_weights_per_image: C*R*S < 32,
//                   mnist's conv1; fp32 chains under every precision) in strips: part[i] is
//                   ((strip[0] + strip[1]) + ...) + strip[S-1], strip[j] the chains above over the
//                   positions of output rows [2j, 2j + 2) only (FF_GPU_WGRAD_STRIP_ROWS; S =
//                   ff_gpu_conv2d_wgrad_strips), float additions in strip order.
//   conv2d weights, direct: dw[g][k,c,r,s] = +0; for image i of group g ascending, for p = (oh, ow)
//                   ascending, skipping padding taps and terms whose dy is exactly 0 (the CPU's
//                   skips): acc = fma(dy[i,k,p], x[i,c,oh*st-pad+r,ow*st-pad+s], acc).
//   conv2d/linear bias, direct (the linear bias always): db[g][k] = +0; for i ascending, for p
//                   ascending: acc = acc + dy[i,k,p] (plain float additions, every term: the CPU's
//                   bits exactly).
//   conv2d data, fast path (ff_gpu_conv2d_backward_data_flips: stride 1, kh == kw, pad <= kh-1):
//                   the forward conv2d kernel (the conv2d order at the top of this file) on dy with
//                   wf[c][k][r'][s'] = w[k][c][R-1-r'][S-1-s'], a +0 bias and pad' = R-1-pad
//                   (ff_gpu_conv2d_backward_data_layer): dx[i,c,h,w] = +0; for k ascending, then
//                   r = R-1 .. 0, s = S-1 .. 0 (DESCENDING): acc = fma(w[k,c,r,s], dy[i,k,h+pad-r,
//                   w+pad-s], acc), where dy outside (Ho, Wo) is a padding tap: +0, every term.
//   conv2d data, direct (every other conv): dx[i,c,h,w] = +0; for k, r, s ascending, for the one
//                   (oh, ow) with oh*st-pad+r = h and ow*st-pad+s = w if it exists:
//                   acc = fma(w[k,c,r,s], dy, acc) (every term, zero dy included, as the CPU does).
//   linear weights: dw[g][j,i] = +0; for image n of group g ascending, dy[n,j] != 0:
//                   acc = fma(dy[n,j], x[n,i], acc) (the CPU's order and skip).
//   linear data, fast path: the forward linear kernel (ff_gpu_linear's order) on dy with
//                   wT[i][j] = w[j][i], a +0 bias, in_features' = out (ff_gpu_linear_backward_data
//                   _layer): dx[n,i] = +0; for j ascending: acc = fma(w[j,i], dy[n,j], acc), every
//                   term; cut into linear_split.h's chunks when out_features itself is split (not
//                   for out < 2048: mnist's 128 and 10 are one chain).
//   linear data, direct: dx[n,i] = +0; for j ascending, dy[n,j] != 0: acc = fma(dy[n,j], w[j,i], acc).
// Why other orders than the CPU's are allowed: the GPU's bits differ from the CPU's anyway (fma),
// and what makes the `cuda` class reproducible is one fixed order per element, stated here. Every
// order above is within the dot-product bound of gpu_test_util.h / tolerance.h: no term goes through
// more roundings than the chain length T the bound uses (fast conv weights: q + (images - 1) <=
// images * Ho*Wo; padding and zero terms add fma(a, 0, acc) = acc, at most flipping the sign of an
// exact zero sum), so each result is within gamma_T * sum|terms| of the exact gradient.
// Everything else gives the CPU's bits exactly: relu and maxpool backward (the same selections,
// maxpool's additions in the CPU's window order), softmax cross-entropy (the same float operations
// with _rn intrinsics, exp and log in double rounded once to float), the tree reduction and SGD
// (float additions/multiplications with _rn intrinsics: no fma is formed).
//
// Groups: the weight launchers take n images cut into ceil(n / group) groups of `group`
// consecutive images (the last may be shorter); group g's sums go to row g, at dw + g*grad_stride
// and db + g*grad_stride (dw and db point into the same (ngroups, grad_stride) buffer, at the
// layer's weight and bias offsets). A group's values depend on its own images only (the per-image
// partials of the fast path depend on their image only; the group sums read the group's images).
//
// Workspaces (pure functions of the layer and n; the caller allocates, the launcher reads and
// writes it on the stream, so one buffer can serve every layer of a backward in turn). A graph
// capture must not allocate: size a workspace for the largest n before capturing.

// The few-column weight-gradient kernel (ff_gpu_conv2d_backward_weights_per_image, below; mnist's
// conv1) takes an image in strips of FF_GPU_WGRAD_STRIP_ROWS output rows, a block each: its partials
// are per strip, and ff_gpu_conv2d_wgrad_strips(L) strips make an image (1 for other layers).
#define FF_GPU_WGRAD_STRIP_ROWS 2
static inline bool ff_gpu_conv2d_backward_weights_per_image(const ff_layer *L, int64_t n);
static inline int64_t ff_gpu_conv2d_wgrad_strips(const ff_layer *L) {
    return ff_gpu_conv2d_backward_weights_per_image(L, 1)
               ? (L->out.h + FF_GPU_WGRAD_STRIP_ROWS - 1) / FF_GPU_WGRAD_STRIP_ROWS
               : 1;
}
// Floats of ff_gpu_conv2d_backward_weights' workspace for n images: the partials of every image,
// n * (K*C*R*S + K) (mnist conv2 at n = 256: 256 * 18496 floats, 18.9 MB), after those of every
// strip where an image is several (conv1 at 256: 256 * 14 * 320 floats, 4.6 MB).
static inline int64_t ff_gpu_conv2d_backward_weights_workspace_floats(const ff_layer *L, int64_t n) {
    const int64_t strips = ff_gpu_conv2d_wgrad_strips(L);
    return n * (strips > 1 ? strips + 1 : 1) * (L->out_c * L->in.c * L->kh * L->kw + L->out_c);
}

// Whether ff_gpu_conv2d_backward_data takes the fast path (given a workspace): stride 1, a square
// kernel, pad <= kh - 1, and the forward conv kernel's limits (kernel <= 16, tap offsets < 2^24,
// a reduction K*R*S <= 16384, an output that fits 32-bit indices).
static inline bool ff_gpu_conv2d_backward_data_flips(const ff_layer *L) {
    return L->op == FF_OP_CONV2D && L->stride == 1 && L->kh == L->kw && L->pad >= 0 && L->pad <= L->kh - 1 &&
           L->kh <= 16 && L->out_c * L->out.h * L->out.w + (int64_t)L->kh * L->out.w < ((int64_t)1 << 24) &&
           L->out_c * L->kh * L->kw <= 16384 && L->in.c * L->in.h * L->in.w <= 0x7fffffff;
}

// The conv the fast data gradient runs: in = (K, Ho, Wo), out = (C, H, W), C filters of kh x kw,
// stride 1, pad kh-1-pad (its output is exactly (C, H, W)).
static inline ff_layer ff_gpu_conv2d_backward_data_layer(const ff_layer *L) {
    ff_layer f = *L;
    f.out_c = L->in.c;
    f.in = L->out;
    f.in.c = L->out_c;
    f.out = L->in;
    f.stride = 1;
    f.pad = L->kh - 1 - L->pad;
    f.n_weight = L->out_c * L->in.c * L->kh * L->kw;
    f.n_bias = L->in.c;
    f.fan_in = L->out_c * L->kh * L->kw;
    f.flops = 2 * f.fan_in * L->in.c * L->in.h * L->in.w;
    return f;
}

// Floats of ff_gpu_conv2d_backward_data's workspace: wf (K*C*R*S) and the zero bias (C) on the fast
// path, 0 for the others.
static inline int64_t ff_gpu_conv2d_backward_data_workspace_floats(const ff_layer *L) {
    return ff_gpu_conv2d_backward_data_flips(L) ? L->out_c * L->in.c * L->kh * L->kw + L->in.c : 0;
}

// The linear layer the fast data gradient runs: in_features = out, out_features = in.
static inline ff_layer ff_gpu_linear_backward_data_layer(const ff_layer *L) {
    ff_layer t = *L;
    const int64_t O = L->out_c, I = ff_shape_numel(L->in);
    t.out_c = I;
    t.in.c = O, t.in.h = 1, t.in.w = 1;
    t.out.c = I, t.out.h = 1, t.out.w = 1;
    t.n_weight = O * I;
    t.n_bias = I;
    t.fan_in = O;
    t.flops = 2 * O * I;
    return t;
}

// Where the split-K partial sums start in ff_gpu_linear_backward_data's workspace: after wT (out*in)
// and the zero bias (in), rounded up to 4 floats.
static inline int64_t ff_gpu_linear_backward_data_split_offset(const ff_layer *L) {
    const int64_t I = ff_shape_numel(L->in);
    return (L->out_c * I + I + 3) / 4 * 4;
}

// Floats of ff_gpu_linear_backward_data's workspace for n images: wT, the zero bias, and the split-K
// partial sums of the transposed layer (ff_gpu_linear_workspace_floats; 0 when out < 2048).
static inline int64_t ff_gpu_linear_backward_data_workspace_floats(const ff_layer *L, int64_t n) {
    const ff_layer t = ff_gpu_linear_backward_data_layer(L);
    return ff_gpu_linear_backward_data_split_offset(L) + ff_gpu_linear_workspace_floats(&t, n);
}

// The few-column weight-gradient kernel's launch for layer L: a block per image, strip of
// FF_GPU_WGRAD_STRIP_ROWS output rows and group of ff_gpu_conv2d_wgrad_image_group(L) output
// channels (fewer in the last group), a thread per (k, c, r, s) chain of the group and one per
// bias, in whole warps; shared memory for the group's dy over the strip (group, rows * Wo), each
// column's input tap of every position of the strip in position order (C*R*S, rows * Wo), padding
// as +0, and the image (C, H, W) the taps are made from.
#define FF_GPU_WGRAD_IMAGE_SMEM_MAX (200 * 1024)
#define FF_GPU_WGRAD_IMAGE_CHANNELS 32         // a group's output channels (mnist's conv1: one group)
#define FF_GPU_WGRAD_X3_SMEM_MAX (200 * 1024)  // the tf32x3 weight gradient's staging (train_cuda.cu)
static inline int64_t ff_gpu_conv2d_wgrad_image_group(const ff_layer *L) {
    return L->out_c < FF_GPU_WGRAD_IMAGE_CHANNELS ? L->out_c : FF_GPU_WGRAD_IMAGE_CHANNELS;
}
static inline int64_t ff_gpu_conv2d_wgrad_image_threads(const ff_layer *L) {
    return (ff_gpu_conv2d_wgrad_image_group(L) * (L->in.c * L->kh * L->kw + 1) + 31) / 32 * 32;
}
static inline int64_t ff_gpu_conv2d_wgrad_image_smem(const ff_layer *L) {
    const int64_t rows = L->out.h < FF_GPU_WGRAD_STRIP_ROWS ? L->out.h : FF_GPU_WGRAD_STRIP_ROWS;
    return ((ff_gpu_conv2d_wgrad_image_group(L) + L->in.c * L->kh * L->kw) * rows * L->out.w +
            L->in.c * L->in.h * L->in.w) *
           (int64_t)sizeof(float);
}
// Whether ff_gpu_conv2d_backward_weights' fast path runs that kernel (few columns: C*R*S < 32, at
// most 1024 threads, at most FF_GPU_WGRAD_IMAGE_SMEM_MAX bytes; mnist's conv1) rather than its
// tiled one. Its chains are a strip's (train_cuda.cu): the tiled kernel's bits where an image is
// one strip (Ho <= FF_GPU_WGRAD_STRIP_ROWS), others elsewhere.
static inline bool ff_gpu_conv2d_backward_weights_per_image(const ff_layer *L, int64_t n) {
    return L->in.c * L->kh * L->kw < 32 && n <= 0x7fffffff && ff_gpu_conv2d_wgrad_image_threads(L) <= 1024 &&
           ff_gpu_conv2d_wgrad_image_smem(L) <= FF_GPU_WGRAD_IMAGE_SMEM_MAX;
}

// dw: rows of (K, C, R, S); db: rows of (K); dy: (n, K, Ho, Wo); x: (n, C, H, W). work: NULL (direct
// kernels) or ff_gpu_conv2d_backward_weights_workspace_floats(L, n) floats (the fast path).
ff_status ff_gpu_conv2d_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy, const float *x,
                                         const ff_layer *L, int64_t n, int64_t group, float *work, ff_gpu_stream s);
// dx: (n, C, H, W); dy: (n, K, Ho, Wo); w: (K, C, R, S). work: NULL (direct kernel) or
// ff_gpu_conv2d_backward_data_workspace_floats(L) floats (the fast path where the layer flips;
// ignored otherwise).
ff_status ff_gpu_conv2d_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n,
                                      float *work, ff_gpu_stream s);
// dw: rows of (out, in); db: rows of (out); dy: (n, out); x: (n, in).
ff_status ff_gpu_linear_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy, const float *x,
                                         const ff_layer *L, int64_t n, int64_t group, ff_gpu_stream s);
// The same with the weight gradient summed over the ceil(n / group) groups in train.h's fixed tree
// into dw (out, in) in one pass (the bits of its rows followed by ff_gpu_tree_reduce; at most
// FF_GPU_TREE_MAX_GROUPS groups: the kernel's stack of partial sums holds one per bit of the
// count); the bias gradient still a row per group in db (its rows are small).
#define FF_GPU_TREE_MAX_GROUPS 1024
ff_status ff_gpu_linear_backward_weights_tree(float *dw, float *db, int64_t grad_stride, const float *dy,
                                              const float *x, const ff_layer *L, int64_t n, int64_t group,
                                              ff_gpu_stream s);
// dx: (n, in); dy: (n, out); w: (out, in). work: NULL (direct kernel) or
// ff_gpu_linear_backward_data_workspace_floats(L, n) floats, 16-byte aligned (the fast path).
ff_status ff_gpu_linear_backward_data(float *dx, const float *dy, const float *w, const ff_layer *L, int64_t n,
                                      float *work, ff_gpu_stream s);
// The two fast paths above in two steps, so that the rearranged weights (which read the weights
// only) can be made ahead, on another stream: with work given, ff_gpu_conv2d_backward_data and
// ff_gpu_linear_backward_data are ff_gpu_backward_data_weights(work, w, L) followed by
// ff_gpu_backward_data_from(dx, dy, work, L, n, split) (split: ignored for a conv, work +
// ff_gpu_linear_backward_data_split_offset(L) for a linear layer), the same kernels. wd: a conv's
// wf and zero bias (ff_gpu_conv2d_backward_data_workspace_floats(L) floats; FF_ERR_INPUT for a conv
// without the fast path), a linear layer's wT and zero bias (ff_gpu_linear_backward_data_split_offset(L)
// floats, 16-byte aligned).
ff_status ff_gpu_backward_data_weights(float *wd, const float *w, const ff_layer *L, ff_gpu_stream s);
ff_status ff_gpu_backward_data_from(float *dx, const float *dy, const float *wd, const ff_layer *L, int64_t n,
                                    float *split, ff_gpu_stream s);
// *capturing: whether stream s is being captured into a graph now (work that synchronises, such as
// allocating or tuning a kernel's configuration, must not run then).
ff_status ff_gpu_stream_capturing(ff_gpu_stream s, bool *capturing);
// dx, dy, y: (count); y the relu's forward output: dx = y > 0 ? dy : +0 (NaN y and -0 y give +0).
ff_status ff_gpu_relu_backward(float *dx, const float *dy, const float *y, int64_t count, ff_gpu_stream s);
// dx: (n, C, H, W); dy: (n, C, Ho, Wo); x: (n, C, H, W) the forward input. Each dx element visits
// the windows that contain it in ascending output position and adds dy where that window's first
// maximum (NaN wins, the last NaN of a window being its pick, as on the CPU) is this element.
// Windows that tile the input exactly (stride = window, no padding; mnist's pool) take a faster
// path with the same bits: one thread per window writes 0 + dy at its pick and 0 elsewhere.
// relu: x is the output of a relu and dx receives the gradient of that relu's input, in one pass:
// the bits of this backward followed by ff_gpu_relu_backward(dx, dx, x) (each element masked by
// x > 0), without writing and reading dx twice.
ff_status ff_gpu_maxpool_backward(float *dx, const float *dy, const float *x, const ff_layer *L, int64_t n, bool relu,
                                  ff_gpu_stream s);

// The pool-sparse backward of conv -> relu -> max-pool 2x2/2 (mnist's conv2, relu2, pool1;
// core/device/cuda/pool_sparse.cu, docs/ARCHITECTURE.md §9). A 2x2 window of stride 2 passes its
// gradient to one input only (its pick), and the relu only where that pick is positive: at most a
// quarter of the conv's output gradient is nonzero. Per window that is a gradient g (+0 where the
// relu stops it) and the pick q, read off the dense gradient ff_gpu_maxpool_backward(relu) writes
// (its one nonzero a window) or kept in the sparse form ff_gpu_pool_sparse_gradient writes; the
// conv's gradients then read only (g, q) and sum in fp32 fma chains under every precision (the weight
// gradient over the picks only; the data gradient over a window's four cells, three of them zero,
// without a branch: the same bits). Orders:
// dx sums the output channels in 4 contiguous parts of ceil(K / 4), each a chain from +0 of k
// ascending, then the windows covering the element in row-major order (at most one tap a window),
// and adds the parts in order ((p0 + p1) + p2) + p3; a weight chain runs per image over every
// window in row-major order (a zero g adds +0), the bias +0 + g + ... in the same order, and the
// images of a group are summed in image order (as the dense path's partials). Where it applies: conv 3x3, stride 1, no
// padding; pool 2x2, stride 2, no padding, on the conv's output shape; the weight kernel's shared memory (32 input
// channels of the image, H*W + 1 floats each, and up to 32 bytes a window and output channel of the block) within
// FF_GPU_POOL_SPARSE_SMEM_MAX bytes.
#define FF_GPU_POOL_SPARSE_SMEM_MAX (200 * 1024)
static inline bool ff_gpu_pool_sparse_applies(const ff_layer *conv, const ff_layer *pool) {
    return conv->op == FF_OP_CONV2D && pool->op == FF_OP_MAXPOOL && conv->kh == 3 && conv->kw == 3 &&
           conv->stride == 1 && conv->pad == 0 && pool->kh == 2 && pool->kw == 2 && pool->stride == 2 &&
           pool->pad == 0 && pool->in.c == conv->out_c && pool->in.h == conv->out.h && pool->in.w == conv->out.w &&
           pool->out.h >= 1 && pool->out.w >= 1 &&
           conv->in.h * conv->in.w * 33 * 4 + 256 * pool->out.h * pool->out.w <= FF_GPU_POOL_SPARSE_SMEM_MAX;
}
// Floats of the sparse gradient of n images: g (n, K, PH, PW) floats, then q as as many bytes
// (rounded up to floats). It fits where the dense gradient (n, K, Ho, Wo) would lie.
static inline int64_t ff_gpu_pool_sparse_floats(const ff_layer *pool, int64_t n) {
    const int64_t windows = n * ff_shape_numel(pool->out);
    return windows + (windows + 3) / 4;
}
// gq: the sparse gradient (ff_gpu_pool_sparse_floats); dy: (n, K, PH, PW) the pool's output
// gradient; y: (n, K, Ho, Wo) the relu's output (the pool's input). The picks and gates are
// ff_gpu_maxpool_backward's with relu (the same bits once scattered).
ff_status ff_gpu_pool_sparse_gradient(float *gq, const float *dy, const float *y, const ff_layer *conv,
                                      const ff_layer *pool, int64_t n, ff_gpu_stream s);
// The same bytes in two halves, so that the picks, which read only the forward's y, can be made
// before dy exists (the cuda device makes them on its gradient lane while the layers above run
// their backward): ff_gpu_pool_sparse_picks writes the q of gq from y; ff_gpu_pool_sparse_gate
// then its g from dy and pooled, (n, K, PH, PW) the pool's forward output over y (the window's
// max by the pick's rule, so pooled > 0 is the relu's test): g = pooled > 0 ? +0 + dy : +0.
ff_status ff_gpu_pool_sparse_picks(float *gq, const float *y, const ff_layer *conv, const ff_layer *pool, int64_t n,
                                   ff_gpu_stream s);
ff_status ff_gpu_pool_sparse_gate(float *gq, const float *dy, const float *pooled, const ff_layer *conv,
                                  const ff_layer *pool, int64_t n, ff_gpu_stream s);
// dx: (n, C, H, W) the conv's input gradient; w: (K, C, 3, 3). gate: NULL, or the conv's input when
// that is a relu's output: dx is then that relu's input gradient (y > 0 ? dx : +0), in one pass.
ff_status ff_gpu_pool_sparse_backward_data(float *dx, const float *gq, const float *w, const float *gate,
                                           const ff_layer *conv, const ff_layer *pool, int64_t n, ff_gpu_stream s);
// dw, db: group rows as ff_gpu_conv2d_backward_weights'; dy: the conv's output gradient, the sparse
// form (dy_sparse) or the dense (n, K, Ho, Wo) one the maxpool backward wrote (at most one nonzero a
// window: its pick's); x: (n, C, H, W) the conv's input; work:
// ff_gpu_conv2d_backward_weights_workspace_floats(conv, n) floats (the per-image partials).
ff_status ff_gpu_pool_sparse_backward_weights(float *dw, float *db, int64_t grad_stride, const float *dy,
                                              bool dy_sparse, const float *x, const ff_layer *conv,
                                              const ff_layer *pool, int64_t n, int64_t group, float *work,
                                              ff_gpu_stream s);
// Whether the cuda device's backward takes the pool-sparse path where it applies (the default), and
// a test hook that turns it off (the dense kernels: maxpool backward, then the conv's gradients).
bool ff_gpu_pool_sparse_on(void);
void ff_gpu_debug_force_pool_dense(bool on);
// Test hook: the weight kernel's output channels a warp (2 or 4; 0: its own rule). The same bits.
void ff_gpu_debug_force_pool_sparse_kpw(int kpw);
// Test hook: the sparse gradient one window a thread (k_ps_gradient) where two a thread would run.
// The same bits.
void ff_gpu_debug_force_pool_sparse_gradient1(bool on);
// Test hook: the sparse data gradient switches on each window's pick to issue only its taps
// (pool_sparse.cu psd_part without DENSE) instead of gathering every tap of the window's four
// cells, fmas only (the default). The same bits.
void ff_gpu_debug_force_pool_sparse_dgrad_switch(bool on);
// ff_cpu_softmax_xent_backward on the GPU: dz (n, classes); loss (n) or NULL; z (n, classes);
// labels (n) in [0, classes). One thread per image (the CPU's sequential max and sum).
ff_status ff_gpu_softmax_xent(float *dz, float *loss, const float *z, const int32_t *labels, float scale,
                              int64_t classes, int64_t n, ff_gpu_stream s);
// train.h's tree over rows (nrows, stride), elements [0, len): out (rows itself, or apart from
// them) receives the sum. Up to 32 rows: one read of every row and one write, the partial sums in
// registers; more: in place in the rows (scratch), then copied.
ff_status ff_gpu_tree_reduce(float *out, float *rows, int64_t nrows, int64_t stride, int64_t len, ff_gpu_stream s);
// train.h's SGD rule on count elements (first: mom = g; momentum 0: mom is not touched).
ff_status ff_gpu_sgd(float *w, float *mom, const float *g, int64_t count, float lr, float momentum, float weight_decay,
                     bool first, ff_gpu_stream s);
// The tree over the rows (device.h ff_tree_rows) as ff_gpu_tree_reduce, the sum left in row 0
// where keep_sum, then the SGD rule on it with weights w, the updated weights to w_out (may be w)
// and mom in place: one kernel up to 8 rows (more: the own row into its place and the tree first,
// in place). Where every pointer is 16-byte aligned and the stride a multiple of 4 the kernel
// reads float4s on at most one block per multiprocessor, so that beside the backward's GEMMs it
// leaves them the other multiprocessors' time (train_cuda.cu k_tree_sgd4); the bits are the same
// either way.
ff_status ff_gpu_tree_sgd(float *w_out, const float *w, float *mom, const ff_tree_rows *rows, int64_t count, float lr,
                          float momentum, float weight_decay, bool first, ff_gpu_stream s);
// x[i] = images[idx[i]] (per floats each), labels[i] = all_labels[idx[i]] for i < n. idx may be
// a mapped pinned host buffer (ff_gpu_host_mapped).
ff_status ff_gpu_gather(float *x, int32_t *labels, const float *images, const int32_t *all_labels, const int64_t *idx,
                        int64_t per, int64_t n, ff_gpu_stream s);
// x (n, sy->dim): features of samples [first, first + n) of a synthetic set (synthetic.h's code).
ff_status ff_gpu_synth(float *x, const ff_synth *sy, int64_t first, int64_t n, ff_gpu_stream s);

#ifdef __cplusplus
}
#endif
