// Peer processes on this node that a communication deadline found lost.
//
// A rank that stops answering (asleep, stopped, busy) is found by its peers' deadlines (the MPI
// comm's timeout message); the job must then end. MPI_Abort asks the launcher to end every
// process, and MPICH's Hydra nearly always does; once (this project's CI, the test cli_mpi_crash)
// its proxy "terminated badly" in that cleanup, the silent rank was never ended, and the job hung.
// So the comm notes each lost peer it can see on this node (its process id, gathered when the comm
// was made), and the command front end ends those processes (SIGKILL) before it ends the job: the
// launcher then sees a rank die, the case it handles at once, and no process is left to wait for.
// The library only records; ending processes is the caller's decision (ff_lost_peers_end).
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { FF_LOST_PEERS_MAX = 16 };

// Notes that rank `rank`, process `pid` on this node, is lost (kept once; at most
// FF_LOST_PEERS_MAX). Process-wide: the MPI comm calls it from the thread that runs MPI.
void ff_lost_peers_note(int rank, long pid);
int ff_lost_peers_count(void);
void ff_lost_peers_clear(void);

// Ends (SIGKILL) every noted process that still exists and still runs this program's executable
// (a process id that was reused by another program is left alone). out: "rank 1 (pid 22624)",
// comma-separated, for the ones ended. Returns how many were ended; the notes are cleared.
int ff_lost_peers_end(char *out, size_t cap);

#ifdef __cplusplus
}
#endif
