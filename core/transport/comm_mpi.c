// MPI backend of comm.h. The communicator is a duplicate of the caller's with MPI_ERRORS_RETURN,
// so a failed call comes back here as FF_ERR_MPI with MPI's own error string; the CLI then calls
// MPI_Abort, which ends every rank instead of leaving the others waiting.
//
// No call blocks (docs/ARCHITECTURE.md §1, "No hangs"): every operation is nonblocking
// (MPI_Isend/Irecv, MPI_Ibarrier, MPI_Ibcast, MPI_Igatherv, MPI_Iscatterv, MPI_Iallgatherv,
// MPI_Ialltoallv, MPI_Iallreduce) and completes in one polling helper, mpi_wait, which fails with
// FF_ERR_MPI when nothing completes for the comm's timeout (ff_comm_set_timeout; 30 s). Its
// message names this rank, the operation and whom it waited on: for an exchange, the peers whose
// messages have not come; for any wait, the ranks that did not answer a roll call (every rank
// that times out greets all others on a private duplicate communicator and listens for a short
// grace period: a rank that is lost, stopped or busy elsewhere stays silent), with what this node
// sees of their processes (exited, stopped) when they run here.
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "comm_internal.h"
#include "fivefold/lost_peers.h"
#include "fivefold/trace.h"

typedef struct {
    ff_comm base;
    MPI_Comm comm;
    MPI_Comm roll;       // a duplicate for the roll call after a timeout: never meets the data
    long *pid;           // [size] each rank's process id (NULL if unknown)
    bool *near;          // [size] the rank runs on this node: its process can be looked at
    MPI_Request *stale;  // [n_stale] what timed-out or failed calls left active (sends, collectives)
    int n_stale, cap_stale;
    bool crowded;  // more ranks on this node than it has cores (pause_poll)
} ff_comm_mpi;

static MPI_Comm mc(ff_comm *c) {
    return ((ff_comm_mpi *)c)->comm;
}

static ff_status mpi_fail(int err, const char *file, int line, const char *call) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return ff_fail(FF_ERR_MPI, file, line, "%s failed: %s (MPI error %d)", call, msg, err);
}
#define FF_MPI_CHECK(call)                                                                   \
    do {                                                                                     \
        int ff_mpi_e_ = (call);                                                              \
        if (ff_mpi_e_ != MPI_SUCCESS) return mpi_fail(ff_mpi_e_, __FILE__, __LINE__, #call); \
    } while (0)

// MPI counts are int: a single message or block over INT_MAX bytes is refused with a clear
// message (the largest block this library moves is an activation band, far below that).
static ff_status to_int(int *out, size_t v, const char *what) {
    if (v > (size_t)INT_MAX)
        return FF_FAIL(FF_ERR_INPUT,
                       "%s: %zu bytes: MPI counts are limited to %d bytes per "
                       "message",
                       what, v, INT_MAX);
    *out = (int)v;
    return FF_OK;
}

static ff_status to_int_array(int **out, const size_t *v, int n, const char *what) {
    *out = NULL;
    int *a = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!a) return FF_FAIL(FF_ERR_OOM, "%s: %d counts", what, n);
    for (int i = 0; i < n; i++) {
        ff_status st = to_int(&a[i], v[i], what);
        if (st != FF_OK) {
            free(a);
            return st;
        }
    }
    *out = a;
    return FF_OK;
}

// ---- waiting: one polling helper for every operation ----

// What a wait is for, for its timeout message: an exchange's requests with their peers and
// directions, or a collective (peer NULL).
typedef struct {
    const char *op;    // "halo" (an exchange), "barrier", "bcast", "allgatherv", ...
    const int *peer;   // [n] exchange: the peer of request i; NULL for a collective
    const bool *recv;  // [n] exchange: request i is a receive
} wait_what;

// Keeps a request nobody will wait for (a send or collective of a call that gave up) so that
// ff_comm_destroy can still complete it; dropped if there is no memory for it.
static void keep_stale(ff_comm_mpi *m, MPI_Request r) {
    if (m->n_stale == m->cap_stale) {
        int cap = m->cap_stale ? 2 * m->cap_stale : 8;
        MPI_Request *s = realloc(m->stale, sizeof *s * (size_t)cap);
        if (!s) return;
        m->stale = s;
        m->cap_stale = cap;
    }
    m->stale[m->n_stale++] = r;
}

// After a failure or timeout: receives are cancelled (no caller buffer is written after we
// return); sends and collectives cannot be, and are kept for ff_comm_destroy (their buffers may
// still be read or written until the job ends). True when any request is left active.
static bool abandon(ff_comm_mpi *m, int n, MPI_Request *req, const bool *recv) {
    bool left = false;
    for (int i = 0; i < n; i++) {
        if (req[i] == MPI_REQUEST_NULL) continue;
        if (recv && recv[i]) {
            MPI_Cancel(&req[i]);
            const double until = ff_now() + 0.1;  // a cancelled receive completes locally
            int done = 0;
            while (req[i] != MPI_REQUEST_NULL && ff_now() < until)
                if (MPI_Test(&req[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
            if (req[i] == MPI_REQUEST_NULL) continue;
        }
        keep_stale(m, req[i]);
        req[i] = MPI_REQUEST_NULL;
        left = true;
    }
    return left;
}

// Between two polls that completed nothing. MPI makes progress only inside its calls: a large
// message in flight (shared-memory fragments, rendezvous) advances one step per poll, so any sleep
// while data moves slows it by orders of magnitude (1 ms naps took a 79 MB gather from 30 ms to
// 900 ms on the GPU machine's Open MPI). So: poll back to back for the first 50 ms, then yield the
// core between polls (free when no other thread wants it; the OpenMP threads of oversubscribed
// ranks get it when they do), and only after 1 s without a completion — a peer computing for
// long, or lost — nap 20 us between polls.
// Except on a crowded node (more ranks than cores: the 2-core CI machine runs 3 to 8): there a
// polling rank takes the core from a rank that computes, and the job runs at half speed (AlexNet
// rows, 3 ranks on 2 cores: 260 ms a forward polling, 135 ms napping). So there: yield for the
// first 100 us, then nap an eighth of the time waited so far, from a few microseconds up to 1 ms.
static void pause_poll(const ff_comm_mpi *m, double idle_s) {
    if (m->crowded) {
        if (idle_s < 100e-6) {
            sched_yield();
            return;
        }
        const double nap = idle_s / 8 < 1e-3 ? idle_s / 8 : 1e-3;
        struct timespec ts = {0, (long)(nap * 1e9)};
        nanosleep(&ts, NULL);
        return;
    }
    if (idle_s < 50e-3) return;
    if (idle_s < 1.0) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

// What this node sees of rank r's process (exited, stopped, running, asleep); "" when it runs
// elsewhere or cannot be looked at.
static void process_state(const ff_comm_mpi *m, int r, char *out, size_t cap) {
    out[0] = 0;
    if (!m->pid || !m->near || !m->near[r] || m->pid[r] <= 0) return;
    const long pid = m->pid[r];
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
        snprintf(out, cap, "its process %ld has exited", pid);
        return;
    }
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = 0;
    const char *p = strrchr(buf, ')');  // "pid (name) S ...": the state follows the name
    if (!p || p[1] != ' ') return;
    // Still there and silent: the front end ends it before it ends the job (lost_peers.h).
    if (p[2] != 'Z' && p[2] != 'X') ff_lost_peers_note(r, pid);
    if (p[2] == 'T' || p[2] == 't')
        snprintf(out, cap, "its process %ld is stopped", pid);
    else if (p[2] == 'Z' || p[2] == 'X')
        snprintf(out, cap, "its process %ld has exited", pid);
    else if (p[2] == 'R')
        snprintf(out, cap, "its process %ld is running (busy outside communication for longer than the limit?)", pid);
    else if (p[2] == 'S' || p[2] == 'D')
        snprintf(out, cap, "its process %ld is asleep", pid);
}

// The roll call after a timeout: greets every other rank on the private communicator and listens
// for `grace` seconds; heard[r] for each rank that greeted back (a rank that timed out too). A
// rank that is lost, stopped, or busy elsewhere stays silent. Best effort: errors end it early.
enum { ROLL_TAG = 1 };
static void roll_call(ff_comm_mpi *m, bool *heard, double grace) {
    const int P = m->base.size, me = m->base.rank;
    static const int hello = 1;
    heard[me] = true;
    if (P < 2 || m->roll == MPI_COMM_NULL) return;
    MPI_Request *rq = malloc(sizeof *rq * (size_t)P);
    int *box = malloc(sizeof *box * (size_t)P), *idx = malloc(sizeof *idx * (size_t)P);
    MPI_Status *sts = malloc(sizeof *sts * (size_t)P);
    if (!rq || !box || !idx || !sts) {
        free(rq);
        free(box);
        free(idx);
        free(sts);
        return;
    }
    for (int r = 0; r < P; r++) {
        rq[r] = MPI_REQUEST_NULL;
        if (r == me) continue;
        MPI_Request s;
        if (MPI_Isend(&hello, 1, MPI_INT, r, ROLL_TAG, m->roll, &s) == MPI_SUCCESS) MPI_Request_free(&s);
        if (MPI_Irecv(&box[r], 1, MPI_INT, r, ROLL_TAG, m->roll, &rq[r]) != MPI_SUCCESS) rq[r] = MPI_REQUEST_NULL;
    }
    const double until = ff_now() + grace;
    const struct timespec tick = {0, 1000000L};
    while (ff_now() < until) {
        int done = 0;
        if (MPI_Testsome(P, rq, &done, idx, sts) != MPI_SUCCESS || done == MPI_UNDEFINED) break;
        for (int k = 0; k < done; k++) heard[idx[k]] = true;
        nanosleep(&tick, NULL);
    }
    bool *all = malloc(sizeof *all * (size_t)P);
    if (all)
        for (int r = 0; r < P; r++) all[r] = true;
    // Unanswered greetings are cancelled; box stays allocated if one cannot be (MPI may write it).
    if (!all || abandon(m, P, rq, all)) box = NULL;
    free(all);
    free(box);
    free(rq);
    free(idx);
    free(sts);
}

// "rank 1", "ranks 1, 3" (the members of set, without `skip`), "" when none.
static int rank_list(char *out, size_t cap, const bool *set, int P, int skip) {
    int n = 0;
    size_t k = 0;
    out[0] = 0;
    for (int r = 0; r < P; r++) n += set[r] && r != skip;
    if (!n) return 0;
    k += (size_t)snprintf(out, cap, "%s", n == 1 ? "rank " : "ranks ");
    int i = 0;
    for (int r = 0; r < P && k < cap; r++) {
        if (!set[r] || r == skip) continue;
        if (i == 8 && n > 9) {
            snprintf(out + k, cap - k, ", ... (%d in all)", n);
            break;
        }
        k += (size_t)snprintf(out + k, cap - k, "%s%d", i++ ? ", " : "", r);
    }
    return n;
}

// What this node knows of the processes of the ranks in set: "; rank 1: its process 4711 is
// stopped" for each one it can see; "" otherwise.
static void states(const ff_comm_mpi *m, char *out, size_t cap, const bool *set) {
    size_t k = 0;
    out[0] = 0;
    for (int r = 0; r < m->base.size && k < cap; r++) {
        char s[160];
        if (!set[r] || r == m->base.rank) continue;
        process_state(m, r, s, sizeof s);
        if (s[0]) k += (size_t)snprintf(out + k, cap - k, "; rank %d: %s", r, s);
    }
}

// After a roll call: "rank 1 is lost or stopped (no answer in 0.5 s); rank 1: its process ..." or
// "(every rank answered, so none is lost or stopped: ...)".
static void silent_text(const ff_comm_mpi *m, const bool *silent, double grace, char *out, size_t cap) {
    char quiet[192], seen[640];
    int n_quiet = rank_list(quiet, sizeof quiet, silent, m->base.size, m->base.rank);
    states(m, seen, sizeof seen, silent);
    if (n_quiet)
        snprintf(out, cap, "%s %s lost or stopped (no answer in %g s)%s", quiet, n_quiet == 1 ? "is" : "are", grace,
                 seen);
    else
        snprintf(out, cap,
                 "(every rank answered, so none is lost or stopped: they may wait in different operations, or the "
                 "transport itself is stuck)");
}

// The roll call's grace: up to 2 s, since a rank waiting elsewhere has its own deadline, at most a
// computation later.
static double grace_of(double limit) {
    return limit / 4 < 0.5 ? 0.5 : limit / 4 > 2 ? 2 : limit / 4;
}

// The timeout message (see the top of this file).
static ff_status timed_out(ff_comm_mpi *m, int n, const MPI_Request *req, const wait_what *w, double limit) {
    const int P = m->base.size, me = m->base.rank;
    bool *heard = calloc((size_t)P, sizeof *heard), *silent = calloc((size_t)P, sizeof *silent);
    bool *on = calloc((size_t)P, sizeof *on);  // exchange: the peers it waits for
    if (!heard || !silent || !on) {
        free(heard);
        free(silent);
        free(on);
        return FF_FAIL(FF_ERR_MPI, "rank %d: %s made no progress for %g s (a rank is lost or stopped)", me, w->op,
                       limit);
    }
    const double grace = grace_of(limit);
    roll_call(m, heard, grace);
    for (int r = 0; r < P; r++) silent[r] = !heard[r];
    char who[192], quiet[192], seen[640];
    ff_status st;
    if (w->peer) {
        bool receiving = false;  // waiting for messages, or only for receives of ours to be posted
        for (int i = 0; i < n; i++)
            if (req[i] != MPI_REQUEST_NULL && w->recv[i]) on[w->peer[i]] = receiving = true;
        if (!receiving)
            for (int i = 0; i < n; i++)
                if (req[i] != MPI_REQUEST_NULL) on[w->peer[i]] = true;
        bool *lost = calloc((size_t)P, sizeof *lost);
        int n_lost = 0;
        for (int r = 0; lost && r < P; r++) n_lost += lost[r] = on[r] && silent[r];
        for (int r = 0; r < P; r++)
            if (on[r]) silent[r] = false;  // the others' silence is mentioned apart
        const int n_on = rank_list(who, sizeof who, on, P, -1);
        char head[320];
        if (receiving)
            snprintf(head, sizeof head, "rank %d: no %s message from %s for %g s", me, w->op, who, limit);
        else
            snprintf(head, sizeof head, "rank %d: %s message to %s not taken for %g s", me, w->op, who, limit);
        if (n_lost) {
            rank_list(quiet, sizeof quiet, lost, P, -1);
            states(m, seen, sizeof seen, lost);
            st = FF_FAIL(FF_ERR_MPI, "%s: %s %s lost or stopped%s (--comm-timeout sets this limit)", head, quiet,
                         n_lost == 1 ? "is" : "are", seen);
        } else {
            int n_quiet = rank_list(quiet, sizeof quiet, silent, P, me);
            states(m, seen, sizeof seen, silent);
            st = FF_FAIL(FF_ERR_MPI, "%s: %s %s alive and waiting too%s%s%s%s (--comm-timeout sets this limit)", head,
                         who, n_on == 1 ? "is" : "are", n_quiet ? "; no answer from " : "", quiet,
                         n_quiet ? " (lost or stopped)" : "", seen);
        }
        free(lost);
    } else {
        char why[900];
        silent_text(m, silent, grace, why, sizeof why);
        st = FF_FAIL(FF_ERR_MPI, "rank %d: %s made no progress for %g s%s%s (--comm-timeout sets this limit)", me,
                     w->op, limit, why[0] == '(' ? " " : ": ", why);
    }
    free(heard);
    free(silent);
    free(on);
    return st;
}

// Completes n requests. FF_OK when all are done; FF_ERR_MPI with MPI's message when one fails, or
// the timeout message when none completes for the comm's timeout. On failure the requests left
// are abandoned (receives cancelled) and *left says whether any stays active: the buffers (and
// count arrays) of a collective must then outlive the job.
static ff_status mpi_wait(ff_comm_mpi *m, int n, MPI_Request *req, const wait_what *w, bool *left) {
    int idx_s[16];
    MPI_Status sts_s[16];
    int *idx = n <= 16 ? idx_s : malloc(sizeof *idx * (size_t)n);
    MPI_Status *sts = n <= 16 ? sts_s : malloc(sizeof *sts * (size_t)n);
    if (left) *left = false;
    ff_status st = FF_OK;
    if (!idx || !sts) {
        st = FF_FAIL(FF_ERR_OOM, "%s: state for %d requests", w->op, n);
    } else {
        const double limit = m->base.timeout_s;
        double idle_since = ff_now();
        for (;;) {
            int done = 0;
            int e = MPI_Testsome(n, req, &done, idx, sts);
            if (e != MPI_SUCCESS) {
                if (e == MPI_ERR_IN_STATUS)  // the reason is in the failed request's status
                    for (int k = 0; k < done; k++)
                        if (sts[k].MPI_ERROR != MPI_SUCCESS && sts[k].MPI_ERROR != MPI_ERR_PENDING) {
                            e = sts[k].MPI_ERROR;
                            break;
                        }
                char call[96];
                snprintf(call, sizeof call, "MPI_Testsome (%s)", w->op);
                st = mpi_fail(e, __FILE__, __LINE__, call);
                break;
            }
            if (done == MPI_UNDEFINED) break;  // no request is active: all complete
            const double now = ff_now();
            if (done > 0) {
                idle_since = now;
                continue;
            }
            if (limit > 0 && now - idle_since >= limit) {
                st = timed_out(m, n, req, w, limit);
                break;
            }
            pause_poll(m, now - idle_since);
        }
    }
    if (st != FF_OK) {
        bool l = abandon(m, n, req, w->recv);
        if (left) *left = l;
    }
    if (idx != idx_s) free(idx);
    if (sts != sts_s) free(sts);
    return st;
}

// One collective request.
static ff_status wait_one(ff_comm *c, MPI_Request *r, const char *op, bool *left) {
    const wait_what w = {op, NULL, NULL};
    return mpi_wait((ff_comm_mpi *)c, 1, r, &w, left);
}

static ff_status mpi_exchange(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs,
                              int n_recvs) {
    ff_comm_mpi *m = (ff_comm_mpi *)c;
    int n = n_sends + n_recvs;
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)(n > 0 ? n : 1));
    int *peer = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    bool *recv = malloc(sizeof(bool) * (size_t)(n > 0 ? n : 1));
    if (!req || !peer || !recv) {
        free(req);
        free(peer);
        free(recv);
        return FF_FAIL(FF_ERR_OOM, "exchange: %d requests", n);
    }
    ff_status st = FF_OK;
    int posted = 0;
    // Tag = the message's index among those to (from) the same peer in this list: the i-th
    // receive from a peer matches that peer's i-th send to us. Receives are posted first.
    for (int i = 0; i < n_recvs && st == FF_OK; i++) {
        int tag = 0, count = 0;
        for (int j = 0; j < i; j++) tag += recvs[j].peer == recvs[i].peer;
        st = to_int(&count, recvs[i].bytes, "exchange receive");
        if (st != FF_OK) break;
        peer[posted] = recvs[i].peer;
        recv[posted] = true;
        int e = MPI_Irecv(recvs[i].buf, count, MPI_BYTE, recvs[i].peer, tag, m->comm, &req[posted]);
        if (e != MPI_SUCCESS)
            st = mpi_fail(e, __FILE__, __LINE__, "MPI_Irecv");
        else
            posted++;
    }
    for (int i = 0; i < n_sends && st == FF_OK; i++) {
        int tag = 0, count = 0;
        for (int j = 0; j < i; j++) tag += sends[j].peer == sends[i].peer;
        st = to_int(&count, sends[i].bytes, "exchange send");
        if (st != FF_OK) break;
        peer[posted] = sends[i].peer;
        recv[posted] = false;
        int e = MPI_Isend(sends[i].buf, count, MPI_BYTE, sends[i].peer, tag, m->comm, &req[posted]);
        if (e != MPI_SUCCESS)
            st = mpi_fail(e, __FILE__, __LINE__, "MPI_Isend");
        else
            posted++;
    }
    const wait_what w = {"halo", peer, recv};
    if (st == FF_OK)
        st = mpi_wait(m, posted, req, &w, NULL);
    else
        abandon(m, posted, req, recv);
    free(req);
    free(peer);
    free(recv);
    return st;
}

static ff_status mpi_barrier(ff_comm *c) {
    MPI_Request r;
    FF_MPI_CHECK(MPI_Ibarrier(mc(c), &r));
    return wait_one(c, &r, "barrier", NULL);
}

// Posts chunks of at most `chunk` elements of `esize` bytes (MPI counts are int), then waits for
// all: post(c, offset in elements, count, request, arg).
typedef int (*post_chunk)(ff_comm *c, size_t off, int count, MPI_Request *r, void *arg);
static ff_status chunked(ff_comm *c, size_t n, size_t chunk, post_chunk post, void *arg, const char *op,
                         const char *call) {
    if (n == 0) return FF_OK;
    const size_t k = (n + chunk - 1) / chunk;
    MPI_Request *req = malloc(sizeof *req * k);
    if (!req) return FF_FAIL(FF_ERR_OOM, "%s: %zu requests", op, k);
    ff_status st = FF_OK;
    size_t posted = 0;
    for (size_t off = 0; off < n; off += chunk, posted++) {
        int e = post(c, off, (int)(n - off < chunk ? n - off : chunk), &req[posted], arg);
        if (e != MPI_SUCCESS) {
            st = mpi_fail(e, __FILE__, __LINE__, call);
            break;
        }
    }
    const wait_what w = {op, NULL, NULL};
    if (st == FF_OK)
        st = mpi_wait((ff_comm_mpi *)c, (int)posted, req, &w, NULL);
    else
        abandon((ff_comm_mpi *)c, (int)posted, req, NULL);
    free(req);
    return st;
}

typedef struct {
    char *buf;
    int root;
} bcast_arg;
static int post_bcast(ff_comm *c, size_t off, int count, MPI_Request *r, void *arg) {
    const bcast_arg *a = arg;
    return MPI_Ibcast(a->buf + off, count, MPI_BYTE, a->root, mc(c), r);
}
static ff_status mpi_bcast(ff_comm *c, void *buf, size_t bytes, int root) {
    // Chunked, so weight buffers over 2 GiB still go through.
    bcast_arg a = {buf, root};
    return chunked(c, bytes, (size_t)1 << 30, post_bcast, &a, "bcast", "MPI_Ibcast");
}

// The count and displacement arrays of a v-collective must live until it completes: if it was
// abandoned (timeout), they are left allocated for the job's last moments.
static void free_counts(bool left, int *a, int *b) {
    if (left) return;
    free(a);
    free(b);
}

// The int count and displacement arrays of a v-collective (both or neither; free_counts frees them).
static ff_status to_int_counts(int **counts_i, int **displs_i, const size_t *counts, const size_t *displs, int n,
                               const char *op) {
    char what[48];
    snprintf(what, sizeof what, "%s counts", op);
    FF_TRY(to_int_array(counts_i, counts, n, what));
    snprintf(what, sizeof what, "%s displacements", op);
    ff_status st = to_int_array(displs_i, displs, n, what);
    if (st != FF_OK) {
        free(*counts_i);
        *counts_i = NULL;
    }
    return st;
}

static ff_status mpi_gatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                             size_t sendbytes, int root) {
    int sc = 0, *rc = NULL, *rd = NULL;
    FF_TRY(to_int(&sc, sendbytes, "gatherv send"));
    if (c->rank == root) FF_TRY(to_int_counts(&rc, &rd, counts, displs, c->size, "gatherv"));
    MPI_Request r;
    int e = MPI_Igatherv(sendbuf, sc, MPI_BYTE, recvbuf, rc, rd, MPI_BYTE, root, mc(c), &r);
    bool left = false;
    ff_status st =
        e != MPI_SUCCESS ? mpi_fail(e, __FILE__, __LINE__, "MPI_Igatherv") : wait_one(c, &r, "gatherv", &left);
    free_counts(left, rc, rd);
    return st;
}

static ff_status mpi_scatterv(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf, const size_t *counts,
                              const size_t *displs, int root) {
    int rcount = 0, *sc = NULL, *sd = NULL;
    FF_TRY(to_int(&rcount, recvbytes, "scatterv receive"));
    if (c->rank == root) FF_TRY(to_int_counts(&sc, &sd, counts, displs, c->size, "scatterv"));
    MPI_Request r;
    int e = MPI_Iscatterv(sendbuf, sc, sd, MPI_BYTE, recvbuf, rcount, MPI_BYTE, root, mc(c), &r);
    bool left = false;
    ff_status st =
        e != MPI_SUCCESS ? mpi_fail(e, __FILE__, __LINE__, "MPI_Iscatterv") : wait_one(c, &r, "scatterv", &left);
    free_counts(left, sc, sd);
    return st;
}

static ff_status mpi_allgatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs,
                                const void *sendbuf, size_t sendbytes) {
    int sc = 0, *rc = NULL, *rd = NULL;
    FF_TRY(to_int(&sc, sendbytes, "allgatherv send"));
    FF_TRY(to_int_counts(&rc, &rd, counts, displs, c->size, "allgatherv"));
    MPI_Request r;
    // In place (comm.h): MPI forbids a send buffer inside the receive buffer but for MPI_IN_PLACE.
    const bool in_place = sendbuf == (const char *)recvbuf + displs[c->rank];
    int e = MPI_Iallgatherv(in_place ? MPI_IN_PLACE : sendbuf, sc, MPI_BYTE, recvbuf, rc, rd, MPI_BYTE, mc(c), &r);
    bool left = false;
    ff_status st =
        e != MPI_SUCCESS ? mpi_fail(e, __FILE__, __LINE__, "MPI_Iallgatherv") : wait_one(c, &r, "allgatherv", &left);
    free_counts(left, rc, rd);
    return st;
}

static ff_status mpi_alltoallv(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                               const void *sendbuf, const size_t *send_counts, const size_t *send_displs) {
    int *a[4] = {NULL, NULL, NULL, NULL};
    const size_t *src[4] = {send_counts, send_displs, recv_counts, recv_displs};
    ff_status st = FF_OK;
    bool left = false;
    for (int k = 0; k < 4 && st == FF_OK; k++)
        st = to_int_array(&a[k], src[k], c->size, "alltoallv counts/displacements");
    if (st == FF_OK) {
        MPI_Request r;
        int e = MPI_Ialltoallv(sendbuf, a[0], a[1], MPI_BYTE, recvbuf, a[2], a[3], MPI_BYTE, mc(c), &r);
        st = e != MPI_SUCCESS ? mpi_fail(e, __FILE__, __LINE__, "MPI_Ialltoallv") : wait_one(c, &r, "alltoallv", &left);
    }
    for (int k = 0; k < 4 && !left; k++) free(a[k]);
    return st;
}

typedef struct {
    char *buf;
    size_t esize;
    MPI_Datatype t;
    MPI_Op op;
} allreduce_arg;
static int post_allreduce(ff_comm *c, size_t off, int count, MPI_Request *r, void *arg) {
    const allreduce_arg *a = arg;
    return MPI_Iallreduce(MPI_IN_PLACE, a->buf + off * a->esize, count, a->t, a->op, mc(c), r);
}
static ff_status mpi_allreduce(ff_comm *c, void *buf, size_t n, MPI_Datatype t, MPI_Op op, const char *name) {
    // 2^28 elements per call: keeps the int count in range.
    allreduce_arg a = {buf, t == MPI_FLOAT ? 4 : 8, t, op};
    return chunked(c, n, (size_t)1 << 28, post_allreduce, &a, name, "MPI_Iallreduce");
}
static ff_status mpi_sum_f64(ff_comm *c, double *buf, size_t n) {
    return mpi_allreduce(c, buf, n, MPI_DOUBLE, MPI_SUM, "allreduce_sum_f64");
}
static ff_status mpi_max_i64(ff_comm *c, int64_t *buf, size_t n) {
    return mpi_allreduce(c, buf, n, MPI_INT64_T, MPI_MAX, "allreduce_max_i64");
}
static ff_status mpi_sum_f32(ff_comm *c, float *buf, size_t n) {
    return mpi_allreduce(c, buf, n, MPI_FLOAT, MPI_SUM, "allreduce_sum_f32");
}

static void mpi_destroy(ff_comm *c) {
    ff_comm_mpi *m = (ff_comm_mpi *)c;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
        // What timed-out calls left behind: completed by now if the peers caught up; else left
        // to MPI (a collective's request cannot be freed), which the job's end takes care of.
        for (int i = 0; i < m->n_stale; i++) {
            int done = 0;
            MPI_Test(&m->stale[i], &done, MPI_STATUS_IGNORE);
        }
        // Greetings of other ranks' roll calls this rank never answered (it did not time out).
        for (int k = 0, got = 1; m->roll != MPI_COMM_NULL && got && k < 4 * m->base.size; k++) {
            int hello;
            got = 0;
            if (MPI_Iprobe(MPI_ANY_SOURCE, ROLL_TAG, m->roll, &got, MPI_STATUS_IGNORE) == MPI_SUCCESS && got)
                MPI_Recv(&hello, 1, MPI_INT, MPI_ANY_SOURCE, ROLL_TAG, m->roll, MPI_STATUS_IGNORE);
        }
        if (m->roll != MPI_COMM_NULL) MPI_Comm_free(&m->roll);
        MPI_Comm_free(&m->comm);
    }
    free(m->stale);
    free(m->pid);
    free(m->near);
    ff_comm_staged_free(c);
    free(m);
}

static const ff_comm_ops mpi_ops = {
    "mpi",          false,         "mpi (staged through pinned host memory)",
    false,          mpi_exchange,  mpi_barrier,
    mpi_bcast,      mpi_gatherv,   mpi_scatterv,
    mpi_allgatherv, mpi_alltoallv, mpi_sum_f64,
    mpi_max_i64,    mpi_sum_f32,   mpi_destroy,
    NULL,           NULL,          NULL,
    NULL,
};

void ff_comm_silent_ranks(ff_comm *boot, double limit, char *out, size_t cap) {
    out[0] = 0;
    if (!boot || boot->ops != &mpi_ops) return;
    ff_comm_mpi *m = (ff_comm_mpi *)boot;
    const int P = boot->size;
    bool *heard = calloc((size_t)P, sizeof *heard), *silent = calloc((size_t)P, sizeof *silent);
    if (heard && silent) {
        const double grace = grace_of(limit);
        roll_call(m, heard, grace);
        for (int r = 0; r < P; r++) silent[r] = !heard[r];
        silent_text(m, silent, grace, out, cap);
    }
    free(heard);
    free(silent);
}

ff_status ff_comm_mpi_create(ff_comm **out, const void *mpi_comm) {
    *out = NULL;
    int init = 0;
    MPI_Initialized(&init);
    if (!init)
        return FF_FAIL(FF_ERR_MPI,
                       "MPI is not initialised: call MPI_Init before "
                       "ff_comm_mpi_create (the fivefold command does this in main)");
    ff_comm_mpi *m = calloc(1, sizeof *m);
    if (!m) return FF_FAIL(FF_ERR_OOM, "comm: %zu bytes", sizeof *m);
    MPI_Comm parent = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    int e = MPI_Comm_dup(parent, &m->comm);
    if (e != MPI_SUCCESS) {
        free(m);
        return mpi_fail(e, __FILE__, __LINE__, "MPI_Comm_dup");
    }
    // Errors return to us (and become FF_ERR_MPI) instead of MPI's default abort-without-message.
    // Completion calls with no communicator argument (MPI_Waitall) raise their errors on
    // MPI_COMM_SELF (MPI 4) or MPI_COMM_WORLD (MPI 3): those return too, so that the message
    // reaches the caller, who ends the job with MPI_Abort.
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (MPI_Comm_dup(m->comm, &m->roll) != MPI_SUCCESS) m->roll = MPI_COMM_NULL;  // roll calls: best effort
    m->base.ops = &mpi_ops;
    m->base.timeout_s = 30.0;
    MPI_Comm_rank(m->comm, &m->base.rank);
    MPI_Comm_size(m->comm, &m->base.size);
    // Every rank's process id, for timeout messages ("rank 1: its process 4711 is stopped").
    const int P = m->base.size;
    m->pid = calloc((size_t)P, sizeof *m->pid);
    m->near = calloc((size_t)P, sizeof *m->near);
    if (m->pid) {
        static long my_pid;  // static: read by MPI until the gather completes
        my_pid = (long)getpid();
        MPI_Request r;
        bool left = false;
        e = MPI_Iallgather(&my_pid, 1, MPI_LONG, m->pid, 1, MPI_LONG, m->comm, &r);
        ff_status st = e != MPI_SUCCESS ? mpi_fail(e, __FILE__, __LINE__, "MPI_Iallgather")
                                        : wait_one(&m->base, &r, "allgather of process ids", &left);
        if (st != FF_OK) {
            if (!left) mpi_destroy(&m->base);  // else MPI may still write m->pid: the job ends anyway
            return st;
        }
    }
    // This rank's place among the ranks of its node (a GPU mode's device is local rank % GPUs),
    // and which ranks share the node (their processes can be looked at).
    MPI_Comm node;
    m->base.local_rank = m->base.rank;
    m->base.local_size = m->base.size;
    if (MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, m->base.rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &m->base.local_rank);
        MPI_Comm_size(node, &m->base.local_size);
        MPI_Group g_node, g_all;
        int n = m->base.local_size, *a = malloc(sizeof *a * (size_t)n), *b = malloc(sizeof *b * (size_t)n);
        if (m->near && a && b && MPI_Comm_group(node, &g_node) == MPI_SUCCESS) {
            if (MPI_Comm_group(m->comm, &g_all) == MPI_SUCCESS) {
                for (int i = 0; i < n; i++) a[i] = i;
                if (MPI_Group_translate_ranks(g_node, n, a, g_all, b) == MPI_SUCCESS)
                    for (int i = 0; i < n; i++)
                        if (b[i] >= 0 && b[i] < P) m->near[b[i]] = true;
                MPI_Group_free(&g_all);
            }
            MPI_Group_free(&g_node);
        }
        free(a);
        free(b);
        MPI_Comm_free(&node);
    }
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    m->crowded = cores > 0 && m->base.local_size > cores;
    *out = &m->base;
    return FF_OK;
}
