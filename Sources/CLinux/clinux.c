#define _GNU_SOURCE
#include <malloc.h>
#include "clinux.h"
#include <errno.h>
#include <limits.h>
#include <linux/openat2.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/prctl.h>

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

int clinux_take_write_lease(int fd) {
    // Should another process open the file while the lease is held, its break is signalled with
    // SIGURG, whose default is to be ignored, not with SIGIO, whose default ends the process.
    if (fcntl(fd, F_SETSIG, SIGURG) != 0) {
        return -1;
    }
    if (fcntl(fd, F_SETLEASE, F_WRLCK) != 0) {
        return errno == EAGAIN || errno == EBUSY ? 0 : -1;
    }
    return 1;
}

int clinux_give_back_lease(int fd) { return fcntl(fd, F_SETLEASE, F_UNLCK); }

int clinux_sole_opener(int fd) {
    int taken = clinux_take_write_lease(fd);
    if (taken == 1) {
        int saved = errno;
        (void)clinux_give_back_lease(fd);
        errno = saved;
    }
    return taken;
}

int clinux_lease_state(int fd, int *signal) {
    *signal = fcntl(fd, F_GETSIG);
    return fcntl(fd, F_GETLEASE);
}

long clinux_fgetxattr(int fd, const char *name, void *value, size_t size) {
    return (long)fgetxattr(fd, name, value, size);
}

int clinux_fsetxattr(int fd, const char *name, const void *value, size_t size) {
    return fsetxattr(fd, name, value, size, 0);
}

int clinux_open_tmpfile(const char *dir, int mode) {
    return clinux_openat_tmpfile(AT_FDCWD, dir, mode);
}

int clinux_link_fd(int fd, const char *target) {
    return clinux_linkat_fd(fd, AT_FDCWD, target);
}

int clinux_openat_tmpfile(int dirfd, const char *dir, int mode) {
#ifdef O_TMPFILE
    return openat(dirfd, dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
#else
    errno = EOPNOTSUPP;
    return -1;
#endif
}

/* Set once AT_EMPTY_PATH was refused: later links go through /proc first. */
static atomic_int clinux_empty_path_refused;

int clinux_linkat_fd(int fd, int dirfd, const char *target) {
    /* AT_EMPTY_PATH names the descriptor's file with no path walked (a /proc link costs a
       lookup through procfs: a third of each link's time). Kernels before 6.10 allow it only
       with CAP_DAC_READ_SEARCH and answer ENOENT otherwise; then /proc, as any other
       process would. EEXIST and the like are the target's, and /proc would say the same. */
    if (!atomic_load_explicit(&clinux_empty_path_refused, memory_order_relaxed)) {
        if (linkat(fd, "", dirfd, target, AT_EMPTY_PATH) == 0) return 0;
        if (errno != ENOENT && errno != EPERM && errno != EINVAL) return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, path, dirfd, target, AT_SYMLINK_FOLLOW) == 0) {
        atomic_store_explicit(&clinux_empty_path_refused, 1, memory_order_relaxed);
        return 0;
    }
    if (errno != ENOENT) return -1;
    /* No /proc either: AT_EMPTY_PATH's answer stands. */
    return linkat(fd, "", dirfd, target, AT_EMPTY_PATH);
}

int clinux_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int clinux_spawn_chdir(posix_spawn_file_actions_t *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np(actions, path);
}

int clinux_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int clinux_errno(void) { return errno; }

int clinux_o_path(void) { return O_PATH; }

int clinux_ofd_lock(int fd, long long offset, long long length, int kind, int wait) {
    struct flock lock = {0};
    lock.l_type = kind == 0 ? F_UNLCK : (kind == 1 ? F_RDLCK : F_WRLCK);
    lock.l_whence = SEEK_SET;
    lock.l_start = (off_t)offset;
    lock.l_len = (off_t)length;
    lock.l_pid = 0;
    int result;
    do {
        result = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &lock);
    } while (result != 0 && errno == EINTR);
    return result;
}

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI, ext4 and LevelDB use it. */
static uint32_t clinux_crc32c_table[256];
static int clinux_crc32c_table_ready;

static void clinux_crc32c_make_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        clinux_crc32c_table[n] = c;
    }
    __atomic_store_n(&clinux_crc32c_table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t clinux_crc32c_portable(uint32_t crc, const unsigned char *p, size_t n) {
    if (!__atomic_load_n(&clinux_crc32c_table_ready, __ATOMIC_ACQUIRE)) clinux_crc32c_make_table();
    while (n--) crc = clinux_crc32c_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t clinux_crc32c_sse42(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

uint32_t clinux_crc32c(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    crc = ~crc;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) return ~clinux_crc32c_sse42(crc, p, count);
#endif
    return ~clinux_crc32c_portable(crc, p, count);
}

int clinux_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

int clinux_limit_malloc_arenas(int count) {
    return mallopt(M_ARENA_MAX, count);
}

int clinux_is_mount_root(const char *path) {
    struct statx info;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &info) != 0) return -1;
    if (!(info.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) return -1;
    return (info.stx_attributes & STATX_ATTR_MOUNT_ROOT) ? 1 : 0;
}

int clinux_peer_credentials(int socket, int *pid, unsigned int *uid) {
    struct ucred credentials;
    socklen_t size = sizeof credentials;
    if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    return 0;
}

int clinux_open_beneath(int dirfd, const char *path, int flags) {
#ifdef SYS_openat2
    struct open_how how;
    memset(&how, 0, sizeof how);
    /* Not O_NOFOLLOW: with O_PATH it would open a last-name link itself; without it,
       RESOLVE_NO_SYMLINKS refuses the link (ELOOP). */
    how.flags = (unsigned long long)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long opened = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (opened >= 0) return (int)opened;
    if (errno != ENOSYS && errno != EPERM && errno != ENAMETOOLONG && errno != EAGAIN) return -1;
#endif
    return clinux_open_beneath_by_name(dirfd, path, flags);
}

int clinux_open_beneath_by_name(int dirfd, const char *path, int flags) {
    /* One name at a time: every folder on the way opened with O_NOFOLLOW. */
    if (path[0] == '/') { errno = EXDEV; return -1; }
    int current = dirfd;
    const char *name = path;
    for (;;) {
        const char *slash = strchr(name, '/');
        size_t length = slash ? (size_t)(slash - name) : strlen(name);
        if (length >= NAME_MAX + 1) {
            if (current != dirfd) close(current);
            errno = ENAMETOOLONG;
            return -1;
        }
        char component[NAME_MAX + 1];
        memcpy(component, name, length);
        component[length] = 0;
        if (strcmp(component, "..") == 0) {
            if (current != dirfd) close(current);
            errno = EXDEV;
            return -1;
        }
        int last = slash == NULL || slash[1] == 0;
        int next = length == 0 ? -1 : openat(current, component,
            last ? (flags | O_NOFOLLOW) : (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (length == 0) {
            /* "a//b" or a trailing slash: nothing to open here. */
            if (last) {
                next = openat(current, ".", flags);
            } else {
                name = slash + 1;
                continue;
            }
        }
        int code = errno;
        if (current != dirfd) close(current);
        if (next < 0) { errno = code; return -1; }
        /* O_PATH | O_NOFOLLOW opens a link itself: never one to go through, nor to return. */
        struct stat info;
        if (fstat(next, &info) != 0 || S_ISLNK(info.st_mode)) {
            close(next);
            errno = ELOOP;
            return -1;
        }
        if (last) return next;
        current = next;
        name = slash + 1;
    }
}
