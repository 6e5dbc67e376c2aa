// Peer processes found lost on this node, and ending them (see lost_peers.h).
#include "fivefold/lost_peers.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static struct {
    int rank;
    long pid;
} lost[FF_LOST_PEERS_MAX];
static int n_lost;

void ff_lost_peers_note(int rank, long pid) {
    if (pid <= 0 || (pid_t)pid == getpid()) return;
    for (int i = 0; i < n_lost; i++)
        if (lost[i].pid == pid) return;
    if (n_lost == FF_LOST_PEERS_MAX) return;
    lost[n_lost].rank = rank;
    lost[n_lost].pid = pid;
    n_lost++;
}

int ff_lost_peers_count(void) {
    return n_lost;
}

void ff_lost_peers_clear(void) {
    n_lost = 0;
}

// True when process `pid` runs the same executable as this one: the peer noted, not a process
// that took over its id after it exited.
static bool runs_this_program(long pid) {
    char path[64], mine[4096], theirs[4096];
    ssize_t a = readlink("/proc/self/exe", mine, sizeof mine - 1);
    snprintf(path, sizeof path, "/proc/%ld/exe", pid);
    ssize_t b = readlink(path, theirs, sizeof theirs - 1);
    if (a <= 0 || b <= 0) return false;
    mine[a] = 0;
    theirs[b] = 0;
    return strcmp(mine, theirs) == 0;
}

int ff_lost_peers_end(char *out, size_t cap) {
    size_t k = 0;
    int ended = 0;
    if (cap) out[0] = 0;
    for (int i = 0; i < n_lost; i++) {
        const pid_t pid = (pid_t)lost[i].pid;
        if (!runs_this_program(lost[i].pid)) continue;
        if (kill(pid, SIGKILL) != 0) continue;  // exited meanwhile (ESRCH): nothing to end
        ended++;
        if (k < cap)
            k += (size_t)snprintf(out + k, cap - k, "%srank %d (pid %ld)", ended > 1 ? ", " : "", lost[i].rank,
                                  lost[i].pid);
    }
    n_lost = 0;
    return ended;
}
