#ifndef CLINUX_H
#define CLINUX_H
#include <sys/types.h>

/// renameat2(RENAME_EXCHANGE): atomically swaps two paths. Returns 0 or -1 with errno set.
int clinux_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
/// renameat2(RENAME_NOREPLACE): renames only if newpath does not exist.
int clinux_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
/// syncfs(2): flushes the filesystem that holds fd, once per version instead of an fsync per file.
int clinux_syncfs(int fd);
/// errno of the calling thread (Swift cannot read the macro reliably across modules).
int clinux_errno(void);
#endif
