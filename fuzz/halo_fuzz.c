// The seeded halo fuzzer: random chains of 1-4 windowed layers (conv2d / maxpool,
// H up to 48, kernel 1-11, stride 1-4, pad 0-5 with pad < kernel, random channels and batch, relu
// or lrn in between), split over P = 1..16 simulated ranks (the loopback comm backend) by the mpi
// mode itself, compared bit for bit with the same chain computed whole by the CPU layers. Every
// case also checks the partition's properties (ff_partition_check: bands tile, inputs cover the
// receptive field exactly, plans symmetric) for the whole chain and a random sub-range; the mpi
// mode checks its halo buffers' guard regions after every exchange. A failure prints a one-line
// reproducer. With --mpi the cases run under real MPI with P = the job's size.
// With --device cuda the same cases run on one GPU: the cuda device and the loopback transport
// (the simulated ranks share the GPU; mode hybrid's decomposition, partition per the GPU plan, so
// Winograd bands fetch whole tiles and space-to-depth convs are whole-layer steps), compared bit
// for bit with the cuda mode computing the chain whole. Without a GPU it exits 77 (skipped).
//
//   halo_fuzz [--seed S] [--cases N] [--case I] [--mpi] [--device cpu|cuda] [--inject-fault] [--verbose]
//
// Exit 0: every case passed; 1: a case failed (CTest must count a finding as a failure, never as
// skipped, so 77 is never used for one; only --device cuda without a GPU exits 77); 2: bad usage. A case that crashes
// (a signal, or a sanitizer report in a sanitizer build) prints its reproducer line before the process ends.
#include <mpi.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fivefold/comm.h"
#include "fivefold/executor.h"
#include "fivefold/gpu.h"
#include "fivefold/plan.h"
#include "fivefold/layers_cpu.h"
#include "fivefold/partition.h"
#include "fivefold/rng.h"
#include "fivefold/weights.h"

typedef struct {
    uint64_t s;
} rng;
static uint64_t next(rng *r) {
    return ff_mix64(r->s += 0x9E3779B97F4A7C15ULL);
}
static int64_t uni(rng *r, int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + (int64_t)(next(r) % (uint64_t)(hi - lo + 1));
}

typedef struct {
    ff_model m;
    ff_weights w;  // views into wdata
    float *wdata;
    float *input;  // (n, C, H, W)
    int64_t n;
    int P;
    ff_split split;
    int first, last;
    int fault_layer;
    float *ref;  // (n, layers[last].out): the chain [first, last] computed whole
    float *got;  // same, from the mpi mode
    char desc[1024];
} fuzz_case;

static bool on_gpu;  // --device cuda

static const char *op_short(ff_op op) {
    switch (op) {
        case FF_OP_CONV2D: return "conv";
        case FF_OP_MAXPOOL: return "pool";
        case FF_OP_RELU: return "relu";
        case FF_OP_LRN: return "lrn";
        default: return "?";
    }
}

// Appends a layer and derives its shapes the way ff_model_init does for the built-in tables.
static bool add_layer(ff_model *m, ff_layer L, ff_shape in) {
    if (m->n_layers >= FF_MAX_LAYERS) return false;
    L.in = in;
    L.param_index = -1;
    if (L.op == FF_OP_CONV2D || L.op == FF_OP_MAXPOOL) {
        int64_t ho = (in.h + 2 * L.pad - L.kh) / L.stride + 1;
        int64_t wo = (in.w + 2 * L.pad - L.kw) / L.stride + 1;
        if (in.h + 2 * L.pad < L.kh || in.w + 2 * L.pad < L.kw || ho < 1 || wo < 1) return false;
        L.out.c = L.op == FF_OP_CONV2D ? L.out_c : in.c;
        L.out.h = ho;
        L.out.w = wo;
        if (L.op == FF_OP_CONV2D) {
            L.param_index = m->n_params++;
            L.fan_in = in.c * L.kh * L.kw;
            L.n_weight = L.out_c * L.fan_in;
            L.n_bias = L.out_c;
            L.flops = 2 * L.n_weight * ho * wo;
        }
    } else {
        L.out = in;
    }
    m->n_weights_total += L.n_weight + L.n_bias;
    if (ff_shape_numel(in) > m->max_act) m->max_act = ff_shape_numel(in);
    if (ff_shape_numel(L.out) > m->max_act) m->max_act = ff_shape_numel(L.out);
    m->layers[m->n_layers++] = L;
    return true;
}

static char names[FF_MAX_LAYERS][16];

// Coverage: how often the interesting situations came up (printed at the end).
static int64_t cov_far, cov_empty, cov_xfers, cov_multi_src;

// Builds case `index` of `seed`: everything derives from (seed, index) alone, so that
// --seed S --case I reproduces it anywhere.
static bool make_case(fuzz_case *fc, uint64_t seed, int64_t index, int force_P) {
    memset(fc, 0, sizeof *fc);
    rng r = {ff_rng_key(seed, (uint64_t)index)};
    ff_model *m = &fc->m;
    m->name = "fuzz";
    // On the GPU, odd cases scale every channel count by 8 (the random draws are the same): the
    // Winograd kernels take layers with >= 16 channels only, and their whole-tile halos are what
    // the GPU variant is about; even cases are exactly the CPU fuzzer's cases.
    const int64_t wide = on_gpu && (index & 1) ? 8 : 1;
    ff_shape s = {uni(&r, 1, 4) * wide, uni(&r, 1, 64), uni(&r, 1, 10)};
    m->input = s;
    int windowed = (int)uni(&r, 1, 4);
    size_t pos = 0;
    pos += (size_t)snprintf(fc->desc + pos, sizeof fc->desc - pos, "in %lldx%lldx%lld:", (long long)s.c, (long long)s.h,
                            (long long)s.w);
    for (int k = 0; k < windowed; k++) {
        ff_layer L;
        memset(&L, 0, sizeof L);
        L.op = uni(&r, 0, 2) ? FF_OP_CONV2D : FF_OP_MAXPOOL;
        // Kernel, stride, pad as PyTorch allows them: pad < kernel (conv), pad <= kernel/2 (pool).
        L.kh = (int)uni(&r, 1, 11);
        L.kw = (int)uni(&r, 1, L.kh < 5 ? L.kh : 5);
        static const int strides[10] = {1, 1, 1, 1, 2, 2, 2, 3, 3, 4};  // favour deep chains
        L.stride = strides[uni(&r, 0, 9)];
        int kmin = L.kh < L.kw ? L.kh : L.kw;
        int pmax = L.op == FF_OP_CONV2D ? kmin - 1 : kmin / 2;
        if (pmax > 5) pmax = 5;
        L.pad = (int)uni(&r, 0, pmax);
        L.out_c = uni(&r, 1, 5) * wide;
        snprintf(names[m->n_layers], sizeof names[0], "L%d", m->n_layers);
        L.name = names[m->n_layers];
        if (!add_layer(m, L, s)) {  // kernel larger than the padded input: shrink it to fit
            L.kh = (int)(s.h + 2 * L.pad < L.kh ? s.h + 2 * L.pad : L.kh);
            L.kw = (int)(s.w + 2 * L.pad < L.kw ? s.w + 2 * L.pad : L.kw);
            if (L.pad >= (L.kh < L.kw ? L.kh : L.kw)) L.pad = 0;
            if (L.op == FF_OP_MAXPOOL && 2 * L.pad > (L.kh < L.kw ? L.kh : L.kw)) L.pad = 0;
            if (L.pad == 0) {
                L.kh = (int)(s.h < L.kh ? s.h : L.kh);
                L.kw = (int)(s.w < L.kw ? s.w : L.kw);
            }
            if (!add_layer(m, L, s)) return false;
        }
        const ff_layer *A = &m->layers[m->n_layers - 1];
        pos += (size_t)snprintf(fc->desc + pos, sizeof fc->desc - pos, " %s(K=%lld,k=%dx%d,s=%d,p=%d)->%lldx%lldx%lld",
                                op_short(A->op), (long long)A->out.c, A->kh, A->kw, A->stride, A->pad,
                                (long long)A->out.c, (long long)A->out.h, (long long)A->out.w);
        s = A->out;
        int extra = (int)uni(&r, 0, 3);  // 0: none, 1: relu, 2: lrn, 3: none
        if (extra == 1 || extra == 2) {
            ff_layer E;
            memset(&E, 0, sizeof E);
            E.op = extra == 1 ? FF_OP_RELU : FF_OP_LRN;
            E.lrn_size = (int)uni(&r, 1, 5);
            E.lrn_alpha = 1e-4f;
            E.lrn_beta = 0.75f;
            E.lrn_k = 2.0f;
            snprintf(names[m->n_layers], sizeof names[0], "L%d", m->n_layers);
            E.name = names[m->n_layers];
            add_layer(m, E, s);
            pos += (size_t)snprintf(fc->desc + pos, sizeof fc->desc - pos, " %s", op_short(E.op));
        }
    }
    fc->n = uni(&r, 1, 3);
    fc->P = force_P > 0 ? force_P : (int)uni(&r, 1, 16);
    int sp = (int)uni(&r, 0, 7);  // mostly rows: that is what the halo logic is about
    fc->split = sp == 0 ? FF_SPLIT_BATCH : sp == 1 ? FF_SPLIT_REPLICATE : FF_SPLIT_ROWS;
    if (uni(&r, 0, 3) == 0) {  // a sub-range, as per-layer verification runs them
        fc->first = (int)uni(&r, 0, m->n_layers - 1);
        fc->last = (int)uni(&r, fc->first, m->n_layers - 1);
    } else {
        fc->first = 0;
        fc->last = m->n_layers - 1;
    }
    fc->fault_layer = -1;
    m->classes = ff_shape_numel(m->layers[m->n_layers - 1].out);
    // weights and input
    int64_t total = 0;
    for (int i = 0; i < m->n_layers; i++) total += m->layers[i].n_weight + m->layers[i].n_bias;
    fc->wdata = malloc(sizeof(float) * (size_t)(total > 0 ? total : 1));
    fc->w.data = fc->wdata;
    fc->w.n_total = total;
    int64_t off = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (L->param_index < 0) continue;
        fc->w.w[i] = fc->wdata + off;
        ff_rng_fill(fc->w.w[i], (size_t)L->n_weight, seed ^ (uint64_t)index, 2 * L->param_index, ff_weight_scale(L));
        off += L->n_weight;
        fc->w.b[i] = fc->wdata + off;
        ff_rng_fill(fc->w.b[i], (size_t)L->n_bias, seed ^ (uint64_t)index, 2 * L->param_index + 1, ff_bias_scale(L));
        off += L->n_bias;
    }
    int64_t in_el = ff_shape_numel(m->layers[fc->first].in) * fc->n;
    fc->input = malloc(sizeof(float) * (size_t)in_el);
    ff_rng_fill(fc->input, (size_t)in_el, seed ^ (uint64_t)index, FF_TENSOR_ID_INPUT, 1.0f);
    int64_t out_el = ff_shape_numel(m->layers[fc->last].out) * fc->n;
    fc->ref = calloc((size_t)out_el, sizeof(float));
    fc->got = calloc((size_t)out_el, sizeof(float));
    return true;
}

static void free_case(fuzz_case *fc) {
    free(fc->wdata);
    free(fc->input);
    free(fc->ref);
    free(fc->got);
}

// The GPU reference: the cuda mode computing the chain whole.
static ff_status reference_gpu(fuzz_case *fc) {
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.mode = FF_MODE_CUDA;
    o.max_batch = fc->n;  // no fault here: the reference must stay clean
    ff_executor *e = NULL;
    FF_TRY(ff_exec_create(&e, &fc->m, &fc->w, &o));
    ff_status st = ff_exec_forward(e, fc->ref, fc->input, fc->n, fc->first, fc->last);
    ff_exec_destroy(e);
    return st;
}

// The reference: layers [first, last] on the whole tensor, one after another.
static void reference(fuzz_case *fc) {
    const ff_model *m = &fc->m;
    int64_t max_el = ff_shape_numel(m->layers[fc->first].in);
    for (int i = fc->first; i <= fc->last; i++)
        if (ff_shape_numel(m->layers[i].out) > max_el) max_el = ff_shape_numel(m->layers[i].out);
    float *a = malloc(sizeof(float) * (size_t)(max_el * fc->n));
    float *b = malloc(sizeof(float) * (size_t)(max_el * fc->n));
    memcpy(a, fc->input, sizeof(float) * (size_t)(ff_shape_numel(m->layers[fc->first].in) * fc->n));
    for (int i = fc->first; i <= fc->last; i++) {
        const ff_layer *L = &m->layers[i];
        ff_rows rows = ff_rows_full(L);
        ff_cpu_layer_forward(b, a, fc->w.w[i], fc->w.b[i], L, &rows, fc->n);
        float *t = a;
        a = b;
        b = t;
    }
    memcpy(fc->ref, a, sizeof(float) * (size_t)(ff_shape_numel(m->layers[fc->last].out) * fc->n));
    free(a);
    free(b);
}

// One rank's part: the mpi mode over comm c, exactly as the CLI drives it.
static ff_status run_rank(ff_comm *c, void *arg) {
    fuzz_case *fc = arg;
    ff_exec_options o;
    ff_exec_options_default(&o);
    o.mode = on_gpu ? FF_MODE_HYBRID : FF_MODE_MPI;
    o.split = fc->split == FF_SPLIT_REPLICATE && on_gpu ? FF_SPLIT_BATCH : fc->split;
    o.max_batch = fc->n;
    o.comm = c;
    o.fault_layer = fc->fault_layer;
    int rank = ff_comm_rank(c);
    ff_executor *e = NULL;
    FF_TRY(ff_exec_create(&e, &fc->m, rank == 0 ? &fc->w : NULL, &o));
    ff_status st =
        ff_exec_forward(e, rank == 0 ? fc->got : NULL, rank == 0 ? fc->input : NULL, fc->n, fc->first, fc->last);
    ff_exec_destroy(e);
    return st;
}

// The reproducer of the case running now, formatted before it starts, so that a crash inside it
// (where printf is not safe) can still name it: written once, by the first of the signal handlers
// (any loopback thread) or the sanitizers' death callback to get there.
static char crash_line[256];
static size_t crash_len;
static atomic_flag crash_printed = ATOMIC_FLAG_INIT;
static void print_crash_line(void) {
    if (crash_len > 0 && !atomic_flag_test_and_set(&crash_printed) && write(STDOUT_FILENO, crash_line, crash_len) < 0)
        crash_len = 0;
}
static void on_crash(int sig) {
    print_crash_line();
    // Then die of the signal: back to the default action, and returning re-executes the faulting
    // instruction (SIGSEGV, SIGBUS, SIGFPE, SIGILL) or abort() raises SIGABRT again. Not the
    // previous handler: that is UCX's (loaded with MPICH), which can hang when several loopback
    // threads fault at once, and a fuzz test must fail at once, not at its CTest timeout.
    signal(sig, SIG_DFL);
}
// From the sanitizer runtime, present only in a sanitizer build (weak: NULL otherwise).
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
static void install_crash_reporting(void) {
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_crash;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(print_crash_line);
}

// Returns 0 on pass; prints the failure and the reproducer otherwise.
static int run_case(uint64_t seed, int64_t index, bool use_mpi, ff_comm *world, bool fault, bool verbose) {
    fuzz_case fc;
    int P = use_mpi ? ff_comm_size(world) : 0;
    int rank = use_mpi ? ff_comm_rank(world) : 0;
    int len = snprintf(crash_line, sizeof crash_line,
                       "CRASH in case %lld\nreproduce: fuzz/halo_fuzz --seed %llu --case %lld%s%s%s\n",
                       (long long)index, (unsigned long long)seed, (long long)index, use_mpi ? " --mpi" : "",
                       on_gpu ? " --device cuda" : "", fault ? " --inject-fault" : "");
    crash_len = len > 0 && (size_t)len < sizeof crash_line ? (size_t)len : 0;
    if (!make_case(&fc, seed, index, P)) {  // make_case shrinks kernels to fit: a generator bug
        free_case(&fc);
        if (rank == 0)
            printf(
                "FAIL case %lld: the generator made no valid chain\nreproduce: fuzz/halo_fuzz --seed %llu --case "
                "%lld\n",
                (long long)index, (unsigned long long)seed, (long long)index);
        return 1;
    }
    if (fault) fc.fault_layer = fc.last;
    char where[256];
    snprintf(where, sizeof where, "P=%d split=%s n=%lld layers %d..%d", fc.P, ff_split_name(fc.split), (long long)fc.n,
             fc.first, fc.last);
    if (verbose && rank == 0) printf("case %lld: %s; %s\n", (long long)index, where, fc.desc);
    int bad = 0;
    const char *why = "";
    char msg[2048] = "";
    // 1. partition properties of the whole chain and of the range the case runs
    ff_partition *p = NULL;
    for (int k = 0; k < 2 && !bad; k++) {
        int f = k ? fc.first : 0, l = k ? fc.last : fc.m.n_layers - 1;
        // the rotation of some image group of the run (forward_rows uses rotations 0..min(P, n)-1)
        const int rot = (int)((seed ^ (uint64_t)index) % (uint64_t)fc.P);
        ff_plan plan, *pp = NULL;
        ff_plan_options po;
        ff_status st = FF_OK;
        if (on_gpu) {  // the GPU plan: Winograd tiles and whole-layer steps shape the partition
            st = ff_plan_options_default(&po);
            if (st == FF_OK) st = ff_plan_build(&plan, &fc.m, FF_DEVICE_CUDA, &po);
            pp = &plan;
        }
        if (st == FF_OK) st = ff_partition_build_planned(&p, &fc.m, pp, f, l, fc.P, FF_SPLIT_ROWS, fc.n, rot);
        if (st == FF_OK) st = ff_partition_check(p, &fc.m);
        if (st == FF_OK && k == 1 && fc.split == FF_SPLIT_ROWS)
            for (int i = f; i <= l; i++) {
                const ff_layer_part *lp = &p->layer[i - f];
                cov_xfers += lp->n_xfers;
                for (int64_t x = 0; x < lp->n_xfers; x++) {
                    int d = lp->xfers[x].src - lp->xfers[x].dst;
                    cov_far += d > 1 || d < -1;  // a halo from beyond the neighbour
                }
                for (int q = 0; lp->spatial && q < fc.P; q++) {
                    cov_empty += ff_range_len(lp->band[q]) == 0;
                    int srcs = 0;
                    for (int64_t x = 0; x < lp->n_xfers; x++) srcs += lp->xfers[x].dst == q;
                    cov_multi_src += srcs > 2;  // halo rows from more than two ranks
                }
            }
        ff_partition_free(p);
        p = NULL;
        if (st != FF_OK) {
            bad = 1;
            why = "partition property";
            snprintf(msg, sizeof msg, "%s", ff_last_error());
        }
    }
    // 2. the decomposed run against the whole-tensor reference, bit for bit
    if (!bad) {
        ff_status st = FF_OK;
        if (rank == 0 && on_gpu)
            st = reference_gpu(&fc);
        else if (rank == 0)
            reference(&fc);
        if (st == FF_OK) st = use_mpi ? run_rank(world, &fc) : ff_comm_loopback_run(fc.P, run_rank, &fc);
        if (st != FF_OK) {
            bad = 1;
            why = "run failed";
            snprintf(msg, sizeof msg, "%s", ff_last_error());
            if (use_mpi) {  // the other ranks may be waiting in a collective: end the job
                printf(
                    "FAIL case %lld (rank %d): %s\nreproduce: fuzz/halo_fuzz --seed %llu "
                    "--case %lld --mpi\n",
                    (long long)index, rank, msg, (unsigned long long)seed, (long long)index);
                fflush(stdout);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        } else if (rank == 0) {
            int64_t count = ff_shape_numel(fc.m.layers[fc.last].out) * fc.n;
            for (int64_t i = 0; i < count; i++)
                if (memcmp(&fc.ref[i], &fc.got[i], sizeof(float)) != 0) {
                    bad = 1;
                    why = "output differs from the whole-tensor reference";
                    snprintf(msg, sizeof msg, "element %lld: got %.9g, expected %.9g", (long long)i, fc.got[i],
                             fc.ref[i]);
                    break;
                }
        }
    }
    if (fault) {  // self-test: the comparison must catch the perturbed element in every case
        if (rank == 0 && !bad)
            printf("FAIL case %lld: injected fault not detected (%s; %s)\n", (long long)index, where, fc.desc);
        free_case(&fc);
        return rank == 0 && !bad;
    }
    if (bad && rank == 0) {
        printf("FAIL case %lld: %s: %s (%s; %s)\n", (long long)index, why, msg, where, fc.desc);
        printf("reproduce: fuzz/halo_fuzz --seed %llu --case %lld%s%s%s\n", (unsigned long long)seed, (long long)index,
               use_mpi ? " --mpi" : "", on_gpu ? " --device cuda" : "", fault ? " --inject-fault" : "");
        fflush(stdout);
    }
    free_case(&fc);
    return bad;
}

static void usage(void) {
    printf(
        "usage: halo_fuzz [--seed S] [--cases N] [--case I] [--mpi] [--device cpu|cuda] [--inject-fault]\n"
        "                 [--verbose]\n"
        "  runs N seeded cases (default 2000; --case I runs only case I) of random windowed-layer\n"
        "  chains split over P = 1..16 loopback ranks (--mpi: real MPI, P = job size) and checks\n"
        "  them bit for bit against the whole-tensor CPU layers. --inject-fault perturbs the last\n"
        "  layer's output (every case must then fail: a self-test of the comparison). --device cuda\n"
        "  runs the cases on one GPU (hybrid's decomposition over loopback ranks sharing it) against\n"
        "  the cuda mode's whole-chain result; exit 77 without a GPU.\n");
}

int main(int argc, char **argv) {
    uint64_t seed = 1;
    int64_t cases = 2000, only = -1;
    bool use_mpi = false, fault = false, verbose = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc)
            cases = strtoll(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--case") && i + 1 < argc)
            only = strtoll(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--mpi"))
            use_mpi = true;
        else if (!strcmp(argv[i], "--inject-fault"))
            fault = true;
        else if (!strcmp(argv[i], "--verbose"))
            verbose = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "cuda") || !strcmp(argv[i + 1], "cpu")))
            on_gpu = !strcmp(argv[++i], "cuda");
        else {
            usage();
            return !strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    if (cases < 1 || (only < -1)) {
        usage();
        return 2;
    }
    ff_comm *world = NULL;
    int rank = 0;
    if (use_mpi) {
        MPI_Init(&argc, &argv);
        MPI_Comm w = MPI_COMM_WORLD;
        if (ff_comm_mpi_create(&world, &w) != FF_OK) {
            fprintf(stderr, "halo_fuzz: %s\n", ff_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        rank = ff_comm_rank(world);
    }
    install_crash_reporting();
    if (on_gpu) {  // no GPU here: skipped (77), the only case the fuzzer does not fail
        int count = 0;
        if (ff_gpu_device_count(&count) != FF_OK || count < 1) {
            if (rank == 0) printf("halo_fuzz: --device cuda: %s: skipped\n", ff_last_error());
            if (use_mpi) MPI_Finalize();
            return 77;
        }
    }
    int64_t lo = only >= 0 ? only : 0, hi = only >= 0 ? only + 1 : cases;
    int64_t failed = 0;
    for (int64_t i = lo; i < hi; i++) failed += run_case(seed, i, use_mpi, world, fault, verbose);
    crash_len = 0;  // past the cases: a crash in MPI_Finalize is not theirs
    if (rank == 0)
        printf(fault ? "halo_fuzz: injected fault caught in %lld of %lld cases (seed %llu%s%s)\n"
                     : "halo_fuzz: %lld of %lld cases passed (seed %llu%s%s)\n",
               (long long)(hi - lo - failed), (long long)(hi - lo), (unsigned long long)seed,
               use_mpi  ? ", MPI"
               : on_gpu ? ", loopback on one GPU"
                        : ", loopback",
               fault ? ", fault injected" : "");
    if (rank == 0 && !fault)
        printf(
            "coverage: %lld halo messages, %lld from beyond the neighbour, %lld receivers with "
            "more than two sources, %lld empty bands\n",
            (long long)cov_xfers, (long long)cov_far, (long long)cov_multi_src, (long long)cov_empty);
    if (use_mpi) {
        ff_comm_destroy(world);
        MPI_Finalize();
    }
    return failed ? 1 : 0;
}
