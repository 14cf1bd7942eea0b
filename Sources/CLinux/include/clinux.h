#ifndef CLINUX_H
#define CLINUX_H
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>
#include <spawn.h>

/// renameat2(RENAME_EXCHANGE): atomically swaps two paths. Returns 0 or -1 with errno set.
int clinux_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
/// renameat2(RENAME_NOREPLACE): renames only if newpath does not exist.
int clinux_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
/// syncfs(2): flushes the filesystem that holds fd, once per version instead of an fsync per file.
int clinux_syncfs(int fd);

/// 1 when the folder at `path` is the root of a mount (statx's STATX_ATTR_MOUNT_ROOT), 0 when it
/// is not, -1 when the kernel does not say (before 5.8) or statx fails.
int clinux_is_mount_root(const char *path);
/// Whether fd (opened for writing, on a file of the caller's) is the file's only open
/// description: a write lease (fcntl F_SETLEASE F_WRLCK) is taken and given back at once, which
/// the kernel grants only when no other descriptor or memory mapping has the file open. 1 when
/// granted; 0 when another opener exists, or -1 with errno where leases are not supported. A
/// break while it is held is signalled with SIGURG (ignored by default), never SIGIO.
int clinux_sole_opener(int fd);
/// The first half of clinux_sole_opener: takes the write lease (break signal SIGURG) and keeps
/// it. 1 when granted, 0 when another opener exists, -1 with errno where unsupported.
int clinux_take_write_lease(int fd);
/// Gives back a lease clinux_take_write_lease took (fcntl F_SETLEASE F_UNLCK): 0 or -1.
int clinux_give_back_lease(int fd);
/// The lease fd holds now (fcntl F_GETLEASE: F_UNLCK, F_RDLCK or F_WRLCK, or -1) and, in
/// *signal, the signal a lease break sends (F_GETSIG; 0 means SIGIO): what tests check.
int clinux_lease_state(int fd, int *signal);
/// fgetxattr(2): the value of the extended attribute `name` of fd into value (at most size
/// bytes). Its length, or -1 with errno (ENODATA when absent, ENOTSUP where unsupported).
long clinux_fgetxattr(int fd, const char *name, void *value, size_t size);
/// fsetxattr(2) with no flags: sets the extended attribute `name` of fd. 0, or -1 with errno.
int clinux_fsetxattr(int fd, const char *name, const void *value, size_t size);
/// open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode): an unnamed regular file on dir's
/// filesystem that vanishes when closed unless linked. -1 with errno (EOPNOTSUPP, EISDIR or
/// EINVAL where the filesystem or kernel lacks it).
int clinux_open_tmpfile(const char *dir, int mode);
/// Gives the unnamed file fd (from clinux_open_tmpfile) the name target: linkat with
/// AT_EMPTY_PATH, else (a kernel that refuses it, remembered) through /proc/self/fd. Fails
/// with EEXIST when target exists.
int clinux_link_fd(int fd, const char *target);
/// clinux_open_tmpfile relative to the open folder dirfd (or AT_FDCWD): for paths longer than
/// the kernel takes in one piece.
int clinux_openat_tmpfile(int dirfd, const char *dir, int mode);
/// clinux_link_fd with target relative to the open folder dirfd (or AT_FDCWD).
int clinux_linkat_fd(int fd, int dirfd, const char *target);
/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34+): the child closes every descriptor
/// from `from` up. Returns 0 or an error number.
int clinux_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);
/// posix_spawn_file_actions_addchdir_np (glibc 2.29+): the child changes to `path` before it
/// runs the program. Returns 0 or an error number.
int clinux_spawn_chdir(posix_spawn_file_actions_t *actions, const char *path);
/// mallopt(M_ARENA_MAX, count): glibc makes at most `count` malloc arenas from now on. Returns 1
/// on success, 0 on error.
int clinux_limit_malloc_arenas(int count);
/// pipe2(fds, O_CLOEXEC): a pipe no child started concurrently by another thread inherits.
/// Returns 0, or -1 with errno.
int clinux_pipe_cloexec(int fds[2]);
/// prctl(PR_SET_NAME): names the calling thread (the kernel keeps the first 15 bytes). Returns
/// 0, or -1 with errno.
int clinux_set_thread_name(const char *name);
/// errno of the calling thread (Swift cannot read the macro reliably across modules).
int clinux_errno(void);
/// getsockopt(SO_PEERCRED) of a connected Unix socket: the peer's PID and user (struct ucred
/// needs _GNU_SOURCE, which Glibc's Swift overlay lacks). Returns 0, or -1 with errno.
int clinux_peer_credentials(int socket, int *pid, unsigned int *uid);
/// Opens `path` (relative, no `..`) below the folder `dirfd` without following any symlink on
/// the way, its last name included: openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or,
/// where the kernel refuses openat2 (ENOSYS before Linux 5.6, EPERM under some seccomp filters)
/// or the path is too long for it, one name at a time with O_NOFOLLOW. `flags` as for openat
/// (O_PATH is allowed; no O_CREAT). Returns the descriptor, or -1 with errno (ELOOP or ENOTDIR
/// where a symlink stood, EXDEV where the path leaves the folder).
int clinux_open_beneath(int dirfd, const char *path, int flags);
/// The name-by-name walk of ``clinux_open_beneath`` alone (its fallback), for tests.
int clinux_open_beneath_by_name(int dirfd, const char *path, int flags);
/// O_PATH, which Glibc's Swift overlay does not expose (it needs _GNU_SOURCE): a descriptor
/// that names a folder for *at calls without opening it for reading.
int clinux_o_path(void);
/// An open-file-description lock (F_OFD_SETLK / F_OFD_SETLKW) on `length` bytes at `offset` of fd:
/// kind 0 releases, 1 takes a shared lock, 2 an exclusive one; `wait` blocks until granted.
/// Locks belong to the open file description, so they keep processes (and separately opened
/// descriptors) apart and vanish when the last descriptor closes or the process dies.
/// Returns 0, or -1 with errno (EAGAIN or EACCES when another holder has it and `wait` is 0).
int clinux_ofd_lock(int fd, long long offset, long long length, int kind, int wait);
/// CRC-32C (Castagnoli) of `count` bytes, continuing from `crc` (0 to start): SSE4.2's crc32
/// instruction where the processor has it, a table otherwise. The item cache's value checksum.
uint32_t clinux_crc32c(uint32_t crc, const void *bytes, size_t count);
#endif
