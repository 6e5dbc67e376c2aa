// Lost peer processes (fivefold/lost_peers.h): the front end ends a noted peer that still runs
// this program, and leaves alone a process that does not (a reused process id), one that has
// exited, and this process itself.
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fivefold/lost_peers.h"

// In a child: off this test's output (a child left behind by a failed assertion must not hold
// the runner's pipe open) and gone after 30 s whatever happens.
static void detach_child(void) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    alarm(30);
}

// A child of this program that sleeps until it is ended (what a silent rank looks like).
static pid_t sleeping_copy(void) {
    pid_t pid = fork();
    if (pid == 0) {
        detach_child();
        for (;;) pause();
    }
    assert_true(pid > 0);
    return pid;
}

// A child that runs another program (sleep(1)): the same process id, a different executable.
static pid_t other_program(void) {
    pid_t pid = fork();
    if (pid == 0) {
        detach_child();  // the alarm survives exec
        execl("/bin/sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    assert_true(pid > 0);
    // exec replaces the image; wait until /proc shows it (the comparison reads /proc/PID/exe)
    char path[64], target[256];
    snprintf(path, sizeof path, "/proc/%ld/exe", (long)pid);
    for (int i = 0; i < 200; i++) {
        ssize_t k = readlink(path, target, sizeof target - 1);
        if (k > 0) {
            target[k] = 0;
            if (strstr(target, "sleep")) break;
        }
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    return pid;
}

// The signal that ended `pid`, or 0 if it still runs after 2 s.
static int ended_by(pid_t pid) {
    for (int i = 0; i < 200; i++) {
        int status = 0;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) return WIFSIGNALED(status) ? WTERMSIG(status) : -1;
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void ends_a_silent_copy_and_names_it(void **state) {
    (void)state;
    ff_lost_peers_clear();
    pid_t a = sleeping_copy(), b = sleeping_copy();
    ff_lost_peers_note(1, (long)a);
    ff_lost_peers_note(1, (long)a);  // noted twice (several deadlines): kept once
    ff_lost_peers_note(3, (long)b);
    assert_int_equal(ff_lost_peers_count(), 2);
    char out[256];
    assert_int_equal(ff_lost_peers_end(out, sizeof out), 2);
    char want[128];
    snprintf(want, sizeof want, "rank 1 (pid %ld), rank 3 (pid %ld)", (long)a, (long)b);
    assert_string_equal(out, want);
    assert_int_equal(ended_by(a), SIGKILL);
    assert_int_equal(ended_by(b), SIGKILL);
    assert_int_equal(ff_lost_peers_count(), 0);  // cleared: a second call ends nothing
    assert_int_equal(ff_lost_peers_end(out, sizeof out), 0);
    assert_string_equal(out, "");
}

static void leaves_other_programs_exited_processes_and_itself(void **state) {
    (void)state;
    ff_lost_peers_clear();
    pid_t other = other_program(), gone = sleeping_copy();
    kill(gone, SIGKILL);
    assert_int_equal(ended_by(gone), SIGKILL);  // reaped: its id names nothing now
    ff_lost_peers_note(1, (long)other);
    ff_lost_peers_note(2, (long)gone);
    ff_lost_peers_note(0, (long)getpid());  // never this process
    ff_lost_peers_note(4, 0);               // nor an unknown id
    ff_lost_peers_note(5, -1);
    assert_int_equal(ff_lost_peers_count(), 2);
    char out[256];
    assert_int_equal(ff_lost_peers_end(out, sizeof out), 0);
    assert_string_equal(out, "");
    assert_int_equal(ended_by(other), 0);  // still running: it is not a copy of this program
    kill(other, SIGKILL);
    assert_int_equal(ended_by(other), SIGKILL);
}

static void keeps_at_most_the_limit(void **state) {
    (void)state;
    ff_lost_peers_clear();
    for (int i = 0; i < FF_LOST_PEERS_MAX + 4; i++) ff_lost_peers_note(i, 1000000 + i);
    assert_int_equal(ff_lost_peers_count(), FF_LOST_PEERS_MAX);
    ff_lost_peers_clear();
    assert_int_equal(ff_lost_peers_count(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ends_a_silent_copy_and_names_it),
        cmocka_unit_test(leaves_other_programs_exited_processes_and_itself),
        cmocka_unit_test(keeps_at_most_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
