#define _GNU_SOURCE
#include "clinux.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

int clinux_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, RENAME_EXCHANGE);
}

int clinux_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE);
}

int clinux_syncfs(int fd) { return syncfs(fd); }

int clinux_errno(void) { return errno; }
