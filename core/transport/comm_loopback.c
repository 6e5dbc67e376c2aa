// Loopback backend of comm.h: P simulated ranks, one thread each, in one process (docs/ARCHITECTURE.md §7,
// §11). Point-to-point messages go through per-rank mailboxes (eager copies, matched by source
// and per-pair tag in FIFO order, as MPI's non-overtaking rule gives); collectives publish their
// buffers in per-rank slots and copy between two barriers. Misuse that would hang real MPI — a
// rank failing, or leaving, while others wait, or ranks entering different collectives — ends
// every waiting rank with FF_ERR_MPI instead; a wait with no progress for the rank's timeout fails
// too (sends and receives that do not match). Timeouts: each rank comm starts with the
// process-wide loopback default (ff_comm_loopback_set_timeout, 60 s); ff_comm_set_timeout on a
// rank comm changes that rank's own waits (<= 0: it waits until the others fail or return).
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

typedef enum {
    LB_BARRIER = 1,
    LB_BCAST,
    LB_GATHERV,
    LB_SCATTERV,
    LB_ALLGATHERV,
    LB_ALLTOALLV,
    LB_SUM_F64,
    LB_MAX_I64,
    LB_SUM_F32,
} lb_op;
static const char *lb_op_name(int op) {
    static const char *n[] = {"?",
                              "barrier",
                              "bcast",
                              "gatherv",
                              "scatterv",
                              "allgatherv",
                              "alltoallv",
                              "allreduce_sum_f64",
                              "allreduce_max_i64",
                              "allreduce_sum_f32"};
    return op >= 0 && op <= LB_SUM_F32 ? n[op] : "?";
}

typedef struct lb_msg {
    struct lb_msg *next;
    int src, tag;
    size_t bytes;
    unsigned char data[];
} lb_msg;

typedef struct {
    int op, root;
    const void *send;
    void *recv;
    size_t bytes;
    const size_t *counts, *displs;  // per collective: see each function
    const size_t *counts2, *displs2;
} lb_slot;

typedef struct {
    int P;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t gen;
    int arrived;
    int failed_rank;  // first rank whose body returned an error, -1 if none
    int n_finished;   // ranks whose body has returned
    bool *finished;   // [P]
    lb_msg **mail;    // [P] queue heads per destination
    lb_slot *slot;    // [P]
} lb_world;

typedef struct {
    ff_comm base;
    lb_world *w;
    ff_comm_body body;
    void *arg;
    ff_status status;
    char message[1024];
    pthread_t thread;
} lb_comm;

static lb_world *W(ff_comm *c) {
    return ((lb_comm *)c)->w;
}

static double lb_timeout_s = 60.0;  // what the rank comms of the next ff_comm_loopback_run start with
void ff_comm_loopback_set_timeout(double seconds) {
    lb_timeout_s = seconds > 0 ? seconds : 60.0;
}

// The deadline of a wait that starts now, for a rank whose timeout is `timeout` seconds.
static struct timespec lb_deadline(double timeout) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    double s = (double)t.tv_sec + t.tv_nsec * 1e-9 + timeout;
    t.tv_sec = (time_t)s;
    t.tv_nsec = (long)((s - (double)t.tv_sec) * 1e9);
    return t;
}

// Waits for the world's condition; ETIMEDOUT after `until`, or never when the rank has no
// timeout (timeout <= 0). The world's lock is held.
static int lb_wait(lb_world *w, double timeout, const struct timespec *until) {
    if (!(timeout > 0)) return pthread_cond_wait(&w->cv, &w->mu);
    return pthread_cond_timedwait(&w->cv, &w->mu, until);
}

// Why a wait cannot complete, or FF_OK. Called with the lock held.
static ff_status lb_doomed(lb_world *w, int me, const char *what) {
    if (w->failed_rank >= 0)
        return FF_FAIL(FF_ERR_MPI, "loopback rank %d: %s abandoned: rank %d failed", me, what, w->failed_rank);
    if (w->n_finished > 0) {
        int r = 0;
        while (r < w->P && !w->finished[r]) r++;
        return FF_FAIL(FF_ERR_MPI,
                       "loopback rank %d: %s can never complete: rank %d has "
                       "already returned (mismatched collective or message)",
                       me, what, r);
    }
    return FF_OK;
}

static ff_status lb_barrier_locked(lb_world *w, int me, const char *what, double timeout) {
    ff_status st = lb_doomed(w, me, what);
    if (st != FF_OK) return st;
    int64_t g = w->gen;
    if (++w->arrived == w->P) {
        w->arrived = 0;
        w->gen++;
        pthread_cond_broadcast(&w->cv);
        return FF_OK;
    }
    struct timespec until = lb_deadline(timeout);
    while (w->gen == g) {
        st = lb_doomed(w, me, what);
        if (st != FF_OK) return st;
        if (lb_wait(w, timeout, &until) == ETIMEDOUT && w->gen == g) {
            w->arrived--;  // leave the barrier: this rank gives up
            return FF_FAIL(FF_ERR_MPI,
                           "loopback rank %d: %s made no progress for %g s (%d of %d "
                           "ranks arrived): a rank is stuck elsewhere",
                           me, what, timeout, w->arrived + 1, w->P);
        }
    }
    return FF_OK;
}

static ff_status lb_barrier_op(ff_comm *c, const char *what) {
    lb_world *w = W(c);
    pthread_mutex_lock(&w->mu);
    ff_status st = lb_barrier_locked(w, c->rank, what, c->timeout_s);
    pthread_mutex_unlock(&w->mu);
    return st;
}

// First half of a collective: publish my slot, wait for everyone, check all entered the same one.
static ff_status lb_enter(ff_comm *c, const lb_slot *mine) {
    lb_world *w = W(c);
    w->slot[c->rank] = *mine;
    FF_TRY(lb_barrier_op(c, lb_op_name(mine->op)));
    for (int r = 0; r < w->P; r++)
        if (w->slot[r].op != mine->op || w->slot[r].root != mine->root)
            return FF_FAIL(FF_ERR_MPI,
                           "loopback rank %d entered %s (root %d) while rank %d "
                           "entered %s (root %d)",
                           c->rank, lb_op_name(mine->op), mine->root, r, lb_op_name(w->slot[r].op), w->slot[r].root);
    return FF_OK;
}
// Second half: nobody leaves (and reuses buffers or slots) until everyone has copied.
static ff_status lb_leave(ff_comm *c, int op) {
    return lb_barrier_op(c, lb_op_name(op));
}

static ff_status lb_exchange(ff_comm *c, const ff_comm_msg *sends, int n_sends, const ff_comm_msg *recvs, int n_recvs) {
    lb_world *w = W(c);
    const int me = c->rank;
    for (int i = 0; i < n_sends; i++) {
        lb_msg *m = malloc(sizeof *m + sends[i].bytes);
        if (!m) return FF_FAIL(FF_ERR_OOM, "loopback message: %zu bytes", sends[i].bytes);
        m->next = NULL;
        m->src = me;
        m->tag = 0;
        for (int j = 0; j < i; j++) m->tag += sends[j].peer == sends[i].peer;
        m->bytes = sends[i].bytes;
        if (m->bytes) {
            ff_status cst = ff_comm_copy(c, m->data, sends[i].buf, m->bytes);
            if (cst != FF_OK) {
                free(m);
                return cst;
            }
        }
        pthread_mutex_lock(&w->mu);
        lb_msg **q = &w->mail[sends[i].peer];
        while (*q) q = &(*q)->next;
        *q = m;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    ff_status st = FF_OK;
    pthread_mutex_lock(&w->mu);
    const double timeout = c->timeout_s;
    for (int i = 0; i < n_recvs && st == FF_OK; i++) {
        struct timespec until = lb_deadline(timeout);  // per message: each arrival is progress
        int tag = 0, src = recvs[i].peer;
        for (int j = 0; j < i; j++) tag += recvs[j].peer == src;
        for (;;) {
            lb_msg **q = &w->mail[me];
            while (*q && !((*q)->src == src && (*q)->tag == tag)) q = &(*q)->next;
            if (*q) {
                lb_msg *m = *q;
                *q = m->next;
                if (m->bytes != recvs[i].bytes)
                    st = FF_FAIL(FF_ERR_MPI,
                                 "loopback rank %d: message %d from rank %d has %zu "
                                 "bytes: the receive expects %zu",
                                 me, tag, src, m->bytes, recvs[i].bytes);
                else if (m->bytes)
                    st = ff_comm_copy(c, recvs[i].buf, m->data, m->bytes);
                free(m);
                break;
            }
            if (w->failed_rank >= 0 || w->finished[src]) {
                st = FF_FAIL(FF_ERR_MPI,
                             "loopback rank %d: receive %d from rank %d can never "
                             "complete: rank %d %s",
                             me, tag, src, w->failed_rank >= 0 ? w->failed_rank : src,
                             w->failed_rank >= 0 ? "failed" : "has returned without sending it");
                break;
            }
            if (lb_wait(w, timeout, &until) == ETIMEDOUT) {
                st = FF_FAIL(FF_ERR_MPI,
                             "loopback rank %d: receive %d from rank %d: no matching "
                             "message in %g s (sends and receives do not match, or rank %d is stuck)",
                             me, tag, src, timeout, src);
                break;
            }
        }
    }
    pthread_mutex_unlock(&w->mu);
    return st;
}

static ff_status lb_barrier(ff_comm *c) {
    lb_slot s = {.op = LB_BARRIER};
    FF_TRY(lb_enter(c, &s));
    return lb_leave(c, LB_BARRIER);
}

static ff_status lb_bcast(ff_comm *c, void *buf, size_t bytes, int root) {
    lb_slot s = {.op = LB_BCAST, .root = root, .recv = buf, .bytes = bytes};
    FF_TRY(lb_enter(c, &s));
    lb_slot *rs = &W(c)->slot[root];
    if (c->rank != root) {
        if (rs->bytes != bytes)
            return FF_FAIL(FF_ERR_MPI, "loopback bcast: rank %d expects %zu bytes, root sends %zu", c->rank, bytes,
                           rs->bytes);
        if (bytes) FF_TRY(ff_comm_copy(c, buf, rs->recv, bytes));
    }
    return lb_leave(c, LB_BCAST);
}

static ff_status lb_gatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs, const void *sendbuf,
                            size_t sendbytes, int root) {
    lb_slot s = {.op = LB_GATHERV, .root = root, .send = sendbuf, .bytes = sendbytes};
    FF_TRY(lb_enter(c, &s));
    if (c->rank == root) {
        for (int r = 0; r < c->size; r++) {
            lb_slot *o = &W(c)->slot[r];
            if (o->bytes != counts[r])
                return FF_FAIL(FF_ERR_MPI,
                               "loopback gatherv: rank %d sends %zu bytes, root "
                               "expects counts[%d] = %zu",
                               r, o->bytes, r, counts[r]);
            if (o->bytes) FF_TRY(ff_comm_copy(c, (char *)recvbuf + displs[r], o->send, o->bytes));
        }
    }
    return lb_leave(c, LB_GATHERV);
}

static ff_status lb_scatterv(ff_comm *c, void *recvbuf, size_t recvbytes, const void *sendbuf, const size_t *counts,
                             const size_t *displs, int root) {
    lb_slot s = {.op = LB_SCATTERV, .root = root, .send = sendbuf, .counts = counts, .displs = displs};
    FF_TRY(lb_enter(c, &s));
    lb_slot *rs = &W(c)->slot[root];
    if (rs->counts[c->rank] != recvbytes)
        return FF_FAIL(FF_ERR_MPI, "loopback scatterv: rank %d expects %zu bytes, root sends %zu", c->rank, recvbytes,
                       rs->counts[c->rank]);
    if (recvbytes) FF_TRY(ff_comm_copy(c, recvbuf, (const char *)rs->send + rs->displs[c->rank], recvbytes));
    return lb_leave(c, LB_SCATTERV);
}

static ff_status lb_allgatherv(ff_comm *c, void *recvbuf, const size_t *counts, const size_t *displs,
                               const void *sendbuf, size_t sendbytes) {
    lb_slot s = {.op = LB_ALLGATHERV, .send = sendbuf, .bytes = sendbytes};
    FF_TRY(lb_enter(c, &s));
    for (int r = 0; r < c->size; r++) {
        lb_slot *o = &W(c)->slot[r];
        if (o->bytes != counts[r])
            return FF_FAIL(FF_ERR_MPI,
                           "loopback allgatherv: rank %d sends %zu bytes, rank %d "
                           "expects counts[%d] = %zu",
                           r, o->bytes, c->rank, r, counts[r]);
        if (o->bytes) FF_TRY(ff_comm_copy(c, (char *)recvbuf + displs[r], o->send, o->bytes));
    }
    return lb_leave(c, LB_ALLGATHERV);
}

static ff_status lb_alltoallv(ff_comm *c, void *recvbuf, const size_t *recv_counts, const size_t *recv_displs,
                              const void *sendbuf, const size_t *send_counts, const size_t *send_displs) {
    lb_slot s = {.op = LB_ALLTOALLV, .send = sendbuf, .counts = send_counts, .displs = send_displs};
    FF_TRY(lb_enter(c, &s));
    const int me = c->rank;
    for (int r = 0; r < c->size; r++) {
        lb_slot *o = &W(c)->slot[r];
        if (o->counts[me] != recv_counts[r])
            return FF_FAIL(FF_ERR_MPI,
                           "loopback alltoallv: rank %d sends %zu bytes to rank %d, "
                           "which expects %zu",
                           r, o->counts[me], me, recv_counts[r]);
        if (recv_counts[r])
            FF_TRY(ff_comm_copy(c, (char *)recvbuf + recv_displs[r], (const char *)o->send + o->displs[me],
                                recv_counts[r]));
    }
    return lb_leave(c, LB_ALLTOALLV);
}

// All-reduce: every rank computes the same result in rank order into a private copy, then (after
// a barrier, since others still read our buffer) writes it back in place.
#define LB_ALLREDUCE(fname, T, OPID, COMBINE)                                         \
    static ff_status fname(ff_comm *c, T *buf, size_t n) {                            \
        lb_slot s = {.op = OPID, .send = buf, .bytes = n};                            \
        FF_TRY(lb_enter(c, &s));                                                      \
        for (int r = 0; r < c->size; r++)                                             \
            if (W(c)->slot[r].bytes != n)                                             \
                return FF_FAIL(FF_ERR_MPI,                                            \
                               "loopback %s: rank %d has %zu elements, rank %d "      \
                               "%zu",                                                 \
                               lb_op_name(OPID), r, W(c)->slot[r].bytes, c->rank, n); \
        T *tmp = malloc(sizeof(T) * (n ? n : 1));                                     \
        if (!tmp) return FF_FAIL(FF_ERR_OOM, "loopback all-reduce: %zu elements", n); \
        for (size_t i = 0; i < n; i++) {                                              \
            T acc = ((const T *)W(c)->slot[0].send)[i];                               \
            for (int r = 1; r < c->size; r++) {                                       \
                T v = ((const T *)W(c)->slot[r].send)[i];                             \
                COMBINE;                                                              \
            }                                                                         \
            tmp[i] = acc;                                                             \
        }                                                                             \
        ff_status st = lb_barrier_op(c, lb_op_name(OPID));                            \
        if (st == FF_OK) {                                                            \
            memcpy(buf, tmp, sizeof(T) * n);                                          \
            st = lb_leave(c, OPID);                                                   \
        }                                                                             \
        free(tmp);                                                                    \
        return st;                                                                    \
    }
LB_ALLREDUCE(lb_sum_f64, double, LB_SUM_F64, acc += v)
LB_ALLREDUCE(lb_max_i64, int64_t, LB_MAX_I64, if (v > acc) acc = v)
LB_ALLREDUCE(lb_sum_f32, float, LB_SUM_F32, acc += v)

static const ff_comm_ops lb_ops = {
    "loopback",    true,         "loopback (device copies)",
    false,         lb_exchange,  lb_barrier,
    lb_bcast,      lb_gatherv,   lb_scatterv,
    lb_allgatherv, lb_alltoallv, lb_sum_f64,
    lb_max_i64,    lb_sum_f32,   NULL,
    NULL,          NULL,         NULL,
    NULL,
};

static void *lb_thread(void *p) {
    lb_comm *lc = p;
    lb_world *w = lc->w;
    ff_clear_error();
    lc->status = lc->body(&lc->base, lc->arg);
    if (lc->status != FF_OK) {
        const char *m = ff_last_error();
        size_t n = strlen(m);
        if (n >= sizeof lc->message) n = sizeof lc->message - 1;
        memcpy(lc->message, m, n);
        lc->message[n] = 0;
    }
    pthread_mutex_lock(&w->mu);
    if (lc->status != FF_OK && w->failed_rank < 0) w->failed_rank = lc->base.rank;
    w->finished[lc->base.rank] = true;
    w->n_finished++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

ff_status ff_comm_loopback_run(int P, ff_comm_body body, void *arg) {
    if (P < 1 || P > 1024) return FF_FAIL(FF_ERR_INPUT, "loopback rank count %d: expected 1..1024", P);
    lb_world w;
    memset(&w, 0, sizeof w);
    w.P = P;
    w.failed_rank = -1;
    w.finished = calloc((size_t)P, sizeof(bool));
    w.mail = calloc((size_t)P, sizeof(lb_msg *));
    w.slot = calloc((size_t)P, sizeof(lb_slot));
    lb_comm *rank = calloc((size_t)P, sizeof(lb_comm));
    if (!w.finished || !w.mail || !w.slot || !rank) {
        free(w.finished);
        free(w.mail);
        free(w.slot);
        free(rank);
        return FF_FAIL(FF_ERR_OOM, "loopback: state for %d ranks", P);
    }
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    int started = 0;
    ff_status st = FF_OK;
    for (int r = 0; r < P; r++) {
        rank[r].base.ops = &lb_ops;
        rank[r].base.rank = r;
        rank[r].base.size = P;
        rank[r].base.local_rank = r;
        rank[r].base.local_size = P;
        rank[r].base.timeout_s = lb_timeout_s;
        rank[r].w = &w;
        rank[r].body = body;
        rank[r].arg = arg;
    }
    for (; started < P; started++)
        if (pthread_create(&rank[started].thread, NULL, lb_thread, &rank[started]) != 0) {
            // Ranks already running would wait for this one forever: mark it failed.
            pthread_mutex_lock(&w.mu);
            if (w.failed_rank < 0) w.failed_rank = started;
            pthread_cond_broadcast(&w.cv);
            pthread_mutex_unlock(&w.mu);
            st = FF_FAIL(FF_ERR_INTERNAL, "loopback: cannot start thread for rank %d of %d", started, P);
            break;
        }
    for (int r = 0; r < started; r++) pthread_join(rank[r].thread, NULL);
    if (st == FF_OK && w.failed_rank >= 0) {
        int r = w.failed_rank;
        st = FF_FAIL(rank[r].status, "rank %d of %d: %s", r, P, rank[r].message);
    }
    for (int r = 0; r < P; r++) {
        // A message nobody received means the two sides of a plan disagree: an error, as a
        // pending send at MPI_Finalize would be.
        if (w.mail[r] && st == FF_OK)
            st = FF_FAIL(FF_ERR_MPI,
                         "loopback: rank %d returned with an unreceived message "
                         "(%zu bytes from rank %d, tag %d)",
                         r, w.mail[r]->bytes, w.mail[r]->src, w.mail[r]->tag);
        while (w.mail[r]) {
            lb_msg *m = w.mail[r];
            w.mail[r] = m->next;
            free(m);
        }
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    free(w.finished);
    free(w.mail);
    free(w.slot);
    free(rank);
    return st;
}
