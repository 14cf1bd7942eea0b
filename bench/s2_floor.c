// A measured floor for S2 (the 1.0 -> 1.1 replay: 2,100 new files, 2,000 x 4 KiB + 100 x 1 MiB):
// an "ideal client" doing only the work any implementation of our design cannot avoid. It fetches
// the new files as byte ranges of the archive (sync-agent's 54 ranges, over 8 keep-alive connections
// on 2 threads, one curl multi handle each), parses each stored entry's local header as the bytes
// stream in, SHA-256-hashes each entry's data while writing it into an unnamed file
// (O_TMPFILE in its folder), checks the digest against the change list's, and names the file with
// linkat. No planning, no change lists read, no state database, no staging folder and no switch:
// the manifest (bench/s2_floor_manifest.py) hands it the ranges, offsets, sizes and digests.
// No fsync or syncfs either (sync-agent does one syncfs at the switch), so this is a lower bound
// of what sync-agent's S2 update can cost, to set next to `curl --parallel --parallel-max 8`
// fetching the same 2,100 files one request each (bench/s2_floor.sh) in the same run.
//
//   python3 bench/s2_floor_manifest.py /tmp/content-sync-bench/scenarios/www/s2 /tmp/s2floor/manifest
//   cc -O2 -Wall -Wextra -o /tmp/s2floor/s2_floor bench/s2_floor.c -lcurl -lcrypto -lpthread
//   /tmp/s2floor/s2_floor MANIFEST ARCHIVE_URL OUT_DIR [THREADS=2] [CONNECTIONS=8]
//
// ARCHIVE_URL is the served RXCacheContent.zip (bench/nginx.sh's nginx_start on
// /tmp/content-sync-bench/scenarios/www gives http://127.0.0.1:$NGINX_PORT/s2/RXCacheContent.zip);
// OUT_DIR is created if missing and must not hold the files yet (linkat does not replace). The
// manifest's ranges are dealt round-robin to the threads in the manifest's order (sync-agent's
// launch order); each thread keeps CONNECTIONS/THREADS requests in flight, reusing its easy handles
// (and so their connections). Every answer must be 206. S2_FLOOR_PROC_FD=1 names every file
// through /proc/self/fd/N (the fallback when linkat's AT_EMPTY_PATH is refused) instead.
//
// Prints one line to stderr: files placed, data bytes, mismatches, ranges, wall time (from before
// the folders are made to the last file named). Exits 0 only if every file was placed and verified.
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECEIVE_BUFFER (256 << 10)  // curl's receive buffer: the largest chunk one callback gets

struct file { uint64_t offset, size; unsigned char sha[32]; int dir; char *name; };
struct range { uint64_t start, end; size_t first, count; };  // files[first ..< first + count]

static struct file *files;
static struct range *ranges;
static char **dirs;
static int *dirfds;
static size_t nfiles, nranges, ndirs;
static const char *url;
static const EVP_MD *sha256;
static atomic_int use_proc_fd;  // set once linkat(AT_EMPTY_PATH) is refused: use /proc/self/fd/N
static atomic_ulong placed, placed_bytes, received, mismatches, failures;

enum phase { HEADER, SKIP, DATA };

// One request in flight: where it is in its range and in the entry it is reading.
struct xfer {
    CURL *easy;
    const struct range *r;
    uint64_t pos;           // archive offset of the next byte to arrive
    size_t next;            // index in files of the entry being read (or the next one)
    enum phase phase;
    unsigned char hdr[30];  // the local header, gathered across callbacks
    size_t have;            // bytes of it gathered
    uint64_t left;          // bytes left of the name and extra field (SKIP) or of the data (DATA)
    int fd, checked, failed;
    EVP_MD_CTX *md;
};

static void die(const char *what) { perror(what); exit(2); }

static unsigned le16(const unsigned char *p) { return p[0] | p[1] << 8; }

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

// Gives the unnamed file `fd` its name in `dirfd`.
static int name_file(int fd, int dirfd, const char *name) {
    if (!atomic_load(&use_proc_fd)) {
        if (linkat(fd, "", dirfd, name, AT_EMPTY_PATH) == 0) return 0;
        if (errno != ENOENT && errno != EPERM) return -1;
        atomic_store(&use_proc_fd, 1);  // no CAP_DAC_READ_SEARCH (before Linux 6.10): not again
    }
    char proc[32];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW);
}

// The entry's header, name and extra field are read: its data starts.
static int begin_data(struct xfer *x, const struct file *f) {
    x->fd = openat(dirfds[f->dir], ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (x->fd < 0) { perror("open O_TMPFILE"); return -1; }
    EVP_DigestInit_ex(x->md, sha256, NULL);
    x->left = f->size;
    x->phase = DATA;
    return 0;
}

// The entry's data is all in: check the digest, name the file if it matches, close it.
static int end_data(struct xfer *x, const struct file *f) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    int ok = 0;
    EVP_DigestFinal_ex(x->md, digest, NULL);
    if (memcmp(digest, f->sha, 32) != 0) {
        atomic_fetch_add(&mismatches, 1);  // not named: the unnamed file goes with its fd
    } else if (name_file(x->fd, dirfds[f->dir], f->name) != 0) {
        fprintf(stderr, "linkat %s/%s: %s\n", dirs[f->dir], f->name, strerror(errno));
        ok = -1;
    } else {
        atomic_fetch_add(&placed, 1);
        atomic_fetch_add(&placed_bytes, f->size);
    }
    close(x->fd);
    x->fd = -1;
    x->next++;
    x->phase = HEADER;
    return ok;
}

// curl's write callback: walks the chunk in place, entry by entry; returning less than the
// chunk's length aborts the transfer (CURLE_WRITE_ERROR).
static size_t on_data(char *p, size_t size, size_t nmemb, void *arg) {
    struct xfer *x = arg;
    size_t len = size * nmemb, total = len;
    if (!x->checked) {  // the first bytes of the body: the status line is in
        long code = 0;
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code != 206) { fprintf(stderr, "range %lu-%lu: HTTP %ld\n", (unsigned long)x->r->start,
                                   (unsigned long)x->r->end, code); x->failed = 1; return 0; }
        x->checked = 1;
    }
    atomic_fetch_add(&received, len);
    while (len > 0) {
        size_t k = len;
        if (x->next == x->r->first + x->r->count) { x->pos += len; break; }  // past the last entry
        const struct file *f = &files[x->next];
        if (x->phase == HEADER && x->pos < f->offset) {  // bytes of entries not wanted: skipped
            if (k > f->offset - x->pos) k = (size_t)(f->offset - x->pos);
        } else if (x->phase == HEADER) {
            if (x->pos != f->offset + x->have) { x->failed = 1; return 0; }
            if (k > 30 - x->have) k = 30 - x->have;
            memcpy(x->hdr + x->have, p, k);
            x->have += k;
            if (x->have == 30) {
                x->have = 0;
                if (memcmp(x->hdr, "PK\3\4", 4) != 0 || le16(x->hdr + 8) != 0) {
                    fprintf(stderr, "%s/%s: no stored entry at %lu\n", dirs[f->dir], f->name,
                            (unsigned long)f->offset);
                    x->failed = 1;
                    return 0;
                }
                x->left = le16(x->hdr + 26) + le16(x->hdr + 28);  // name + extra field
                x->phase = SKIP;
                if (x->left == 0 && begin_data(x, f) != 0) { x->failed = 1; return 0; }
                if (x->phase == DATA && x->left == 0 && end_data(x, f) != 0) { x->failed = 1; return 0; }
            }
        } else if (x->phase == SKIP) {
            if (k > x->left) k = (size_t)x->left;
            x->left -= k;
            if (x->left == 0 && begin_data(x, f) != 0) { x->failed = 1; return 0; }
            if (x->phase == DATA && x->left == 0 && end_data(x, f) != 0) { x->failed = 1; return 0; }
        } else {  // DATA: hash and write the bytes where curl received them
            if (k > x->left) k = (size_t)x->left;
            EVP_DigestUpdate(x->md, p, k);
            if (write_all(x->fd, p, k) != 0) { perror("write"); x->failed = 1; return 0; }
            x->left -= k;
            if (x->left == 0 && end_data(x, f) != 0) { x->failed = 1; return 0; }
        }
        p += k, len -= k, x->pos += k;
    }
    return total;
}

static void start(struct xfer *x, const struct range *r) {
    char spec[48];
    snprintf(spec, sizeof spec, "%lu-%lu", (unsigned long)r->start, (unsigned long)r->end);
    curl_easy_setopt(x->easy, CURLOPT_RANGE, spec);  // curl copies it
    x->r = r, x->pos = r->start, x->next = r->first, x->phase = HEADER;
    x->have = 0, x->fd = -1, x->checked = 0, x->failed = 0;
}

// A request ended: every entry of its range must have been read to its end.
static void finish(struct xfer *x, CURLcode result) {
    if (x->fd >= 0) close(x->fd);
    x->fd = -1;
    if (result != CURLE_OK || x->failed || x->next != x->r->first + x->r->count) {
        fprintf(stderr, "range %lu-%lu failed: %s\n", (unsigned long)x->r->start,
                (unsigned long)x->r->end, curl_easy_strerror(result));
        atomic_fetch_add(&failures, 1);
    }
}

struct worker { pthread_t thread; size_t *mine, count; int connections; };

// One thread: one multi handle, `connections` easy handles, its ranges in order.
static void *run(void *arg) {
    struct worker *w = arg;
    CURLM *multi = curl_multi_init();
    struct xfer *xs = calloc((size_t)w->connections, sizeof *xs);
    size_t next = 0;
    int active = 0;
    for (int i = 0; i < w->connections; i++) {
        struct xfer *x = &xs[i];
        x->easy = curl_easy_init();
        x->md = EVP_MD_CTX_new();
        curl_easy_setopt(x->easy, CURLOPT_URL, url);
        curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
        curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(x->easy, CURLOPT_BUFFERSIZE, (long)RECEIVE_BUFFER);
        if (next < w->count) { start(x, &ranges[w->mine[next++]]); curl_multi_add_handle(multi, x->easy); active++; }
    }
    while (active > 0) {
        int running, queued;
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) { fprintf(stderr, "curl_multi_perform: %s\n", curl_multi_strerror(mc)); exit(2); }
        CURLMsg *m;
        while ((m = curl_multi_info_read(multi, &queued)) != NULL) {
            if (m->msg != CURLMSG_DONE) continue;
            struct xfer *x;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            finish(x, m->data.result);
            curl_multi_remove_handle(multi, x->easy);
            active--;
            if (next < w->count) { start(x, &ranges[w->mine[next++]]); curl_multi_add_handle(multi, x->easy); active++; }
        }
        if (active > 0) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    for (int i = 0; i < w->connections; i++) { curl_easy_cleanup(xs[i].easy); EVP_MD_CTX_free(xs[i].md); }
    curl_multi_cleanup(multi);
    free(xs);
    return NULL;
}

static void *grow(void *p, size_t count, size_t size) {  // room for one more after `count`
    if ((count == 0 || (count >= 16 && (count & (count - 1)) == 0)) &&
        (p = realloc(p, (count ? 2 * count : 16) * size)) == NULL)
        die("realloc");
    return p;
}

static void read_manifest(const char *path) {
    FILE *in = fopen(path, "r");
    if (!in) die(path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0) {
        if (line[n - 1] == '\n') line[--n] = '\0';
        unsigned long a, b;
        size_t count;
        int dir, rest = 0;
        char hex[65];
        if (line[0] == 'D' && line[1] == ' ') {
            dirs = grow(dirs, ndirs, sizeof *dirs);
            dirs[ndirs++] = strdup(line + 2);
        } else if (sscanf(line, "R %lu %lu %zu", &a, &b, &count) == 3) {
            ranges = grow(ranges, nranges, sizeof *ranges);
            ranges[nranges++] = (struct range){a, b, nfiles, count};
        } else if (sscanf(line, "F %lu %lu %64s %d %n", &a, &b, hex, &dir, &rest) == 4 && rest > 0 &&
                   strlen(hex) == 64 && dir >= 0 && (size_t)dir < ndirs && nranges > 0) {
            files = grow(files, nfiles, sizeof *files);
            struct file *f = &files[nfiles++];
            char *slash = strrchr(line + rest, '/');
            *f = (struct file){a, b, {0}, dir, strdup(slash ? slash + 1 : line + rest)};
            for (int i = 0; i < 32; i++) sscanf(hex + 2 * i, "%2hhx", &f->sha[i]);
        } else if (line[0] != '#' && line[0] != '\0') {
            fprintf(stderr, "%s: bad line: %s\n", path, line);
            exit(2);
        }
    }
    free(line);
    fclose(in);
    for (size_t i = 0; i < nranges; i++)
        if (ranges[i].first + ranges[i].count != (i + 1 < nranges ? ranges[i + 1].first : nfiles)) {
            fprintf(stderr, "%s: range %zu does not list its %zu entries\n", path, i, ranges[i].count);
            exit(2);
        }
}

static void mkdir_p(char *path) {  // every prefix of path, as mkdir -p
    for (char *s = path + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) die(path);
        *s = c;
        if (c == '\0') return;
    }
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: %s MANIFEST ARCHIVE_URL OUT_DIR [THREADS=2] [CONNECTIONS=8]\n", argv[0]);
        return 2;
    }
    int threads = argc > 4 ? atoi(argv[4]) : 2, connections = argc > 5 ? atoi(argv[5]) : 8;
    if (threads < 1 || connections < threads) { fprintf(stderr, "need 1 <= THREADS <= CONNECTIONS\n"); return 2; }
    url = argv[2];
    if (getenv("S2_FLOOR_PROC_FD") && atoi(getenv("S2_FLOOR_PROC_FD")) == 1) use_proc_fd = 1;
    read_manifest(argv[1]);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);  // fetched once, not per digest
    if (!sha256) die("EVP_MD_fetch");

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    // The folders: made and opened once; each unnamed file is opened and named relative to its own.
    dirfds = malloc(ndirs * sizeof *dirfds);
    for (size_t i = 0; i < ndirs; i++) {
        size_t length = strlen(argv[3]) + strlen(dirs[i]) + 2;
        char *path = malloc(length);
        snprintf(path, length, "%s/%s", argv[3], dirs[i]);
        mkdir_p(path);
        if ((dirfds[i] = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) die(path);
        free(path);
    }
    // The ranges, round-robin to the threads in the manifest's order.
    struct worker *ws = calloc((size_t)threads, sizeof *ws);
    for (int t = 0; t < threads; t++) {
        ws[t].mine = malloc((nranges / (size_t)threads + 1) * sizeof *ws[t].mine);
        ws[t].connections = connections / threads + (t < connections % threads);
    }
    for (size_t i = 0; i < nranges; i++) ws[i % (size_t)threads].mine[ws[i % (size_t)threads].count++] = i;
    for (int t = 0; t < threads; t++)
        if (pthread_create(&ws[t].thread, NULL, run, &ws[t]) != 0) die("pthread_create");
    for (int t = 0; t < threads; t++) pthread_join(ws[t].thread, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);

    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    fprintf(stderr, "s2_floor: %lu/%zu files placed, %lu bytes of data (%lu received), %lu mismatches, "
            "%zu ranges (%lu failed), %d threads, %d connections%s, %.1f ms\n",
            atomic_load(&placed), nfiles, atomic_load(&placed_bytes), atomic_load(&received),
            atomic_load(&mismatches), nranges, atomic_load(&failures), threads, connections,
            atomic_load(&use_proc_fd) ? ", named through /proc/self/fd" : "", ms);
    return atomic_load(&placed) == nfiles && atomic_load(&mismatches) == 0 && atomic_load(&failures) == 0 ? 0 : 1;
}
