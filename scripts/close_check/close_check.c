// An LD_PRELOAD shim that records every close(2) failing with EBADF in a program built by this
// repository (its path starts with CLOSE_CHECK_PREFIX) to CLOSE_CHECK_LOG, with a backtrace.
//
// Closing a descriptor that is not open is always a bug, and the harmless-looking case hides the
// harmful one: a descriptor closed twice is, the second time, whatever another thread opened
// under the same number meanwhile, and that thread then writes, reads or links through a
// descriptor it no longer has (or, worse, one that now names another file). The EBADF this shim
// sees is the case where nothing reused the number in between: the same bug, caught reliably.
// scripts/close_check/run.sh builds it, runs a command under it and fails on any record.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int (*real_close)(int);

static void record(int fd) {
    const char *log = getenv("CLOSE_CHECK_LOG");
    const char *prefix = getenv("CLOSE_CHECK_PREFIX");
    if (!log || !prefix) return;
    char exe[4096];
    ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (length <= 0) return;
    exe[length] = 0;
    if (strncmp(exe, prefix, strlen(prefix)) != 0) return;
    int out = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (out < 0) return;
    char line[4300];
    int n = snprintf(line, sizeof line, "=== close(%d) failed with EBADF in %s (pid %d)\n", fd, exe, (int)getpid());
    if (n > 0) (void)!write(out, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    void *frames[32];
    int count = backtrace(frames, 32);
    backtrace_symbols_fd(frames, count, out);
    real_close(out);
}

int close(int fd) {
    if (!real_close) real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    int result = real_close(fd);
    if (result != 0 && errno == EBADF && fd >= 0) {
        int saved = errno;
        record(fd);
        errno = saved;
    }
    return result;
}
