// The floor under ItemCache's disk tier: what bare SQLite (the C API, prepared statements, no
// Swift, no GRDB) costs on this machine for the operations `cache-bench get` and `set` time, on
// a table shaped like ItemCache's `item` (same columns, indexes and stats trigger), in WAL mode
// with synchronous=NORMAL and mmap, as ItemCache and diskcache run.
//
//   gcc -O2 -o /tmp/sqlite_floor bench/sqlite_floor.c -lsqlite3
//   /tmp/sqlite_floor /dev/shm/floor.db        # and a path on ext4
//
// Prints the median and p99 of: a set of a new 4 KiB value (BEGIN IMMEDIATE, INSERT, the stats
// read, COMMIT), with ItemCache's indexes and with only the key's; a get of one of 2,000 values
// by key (one autocommit SELECT of the get's columns, value copied out); and the same SELECT of
// the row id alone (the read transaction and the index lookup, no value).
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { COUNT = 2000, GETS = 5000, SIZE = 4096 };

static unsigned long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000ULL + t.tv_nsec;
}

static int compare(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, unsigned long long *ns, int count) {
    qsort(ns, count, sizeof *ns, compare);
    printf("%-58s median %7.2f us   p99 %8.2f us\n", what, ns[count / 2] / 1000.0, ns[count * 99 / 100] / 1000.0);
}

static sqlite3 *db;

static void check(int code, const char *what) {
    if (code != SQLITE_OK && code != SQLITE_ROW && code != SQLITE_DONE) {
        fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

static sqlite3_stmt *prepare(const char *sql) {
    sqlite3_stmt *statement;
    check(sqlite3_prepare_v2(db, sql, -1, &statement, NULL), sql);
    return statement;
}

static void run(sqlite3_stmt *statement) {
    check(sqlite3_step(statement), sqlite3_sql(statement));
    sqlite3_reset(statement);
}

/// A fresh database at `path` with ItemCache's table and, when `indexes`, its four other indexes.
static void open_fresh(const char *path, int indexes) {
    char name[1024];
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s%s", path, suffixes[i]);
        unlink(name);
    }
    if (db) sqlite3_close(db);
    check(sqlite3_open(path, &db), path);
    check(sqlite3_exec(db,
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA mmap_size = 67108864;"
        "CREATE TABLE item (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, context TEXT NOT NULL, url TEXT,"
        " size INTEGER NOT NULL, created REAL NOT NULL, accessed REAL NOT NULL, expires REAL,"
        " mustRevalidate INTEGER NOT NULL DEFAULT 0, pinned INTEGER NOT NULL DEFAULT 0, etag TEXT, lastModified TEXT,"
        " contentType TEXT, metadata TEXT, inlineValue BLOB, file TEXT, groupNames TEXT);"
        "CREATE TABLE stats (id INTEGER PRIMARY KEY CHECK (id = 1), bytes INTEGER NOT NULL, count INTEGER NOT NULL);"
        "INSERT INTO stats VALUES (1, 0, 0);"
        "CREATE TRIGGER item_inserted AFTER INSERT ON item BEGIN"
        " UPDATE stats SET bytes = bytes + NEW.size, count = count + 1 WHERE id = 1; END;",
        NULL, NULL, NULL), "schema");
    if (indexes) {
        check(sqlite3_exec(db,
            "CREATE INDEX item_lru ON item(accessed) WHERE pinned = 0;"
            "CREATE INDEX item_expiry ON item(expires) WHERE pinned = 0 AND expires IS NOT NULL;"
            "CREATE INDEX item_url ON item(url); CREATE INDEX item_context ON item(context);",
            NULL, NULL, NULL), "indexes");
    }
}

/// COUNT sets of new 4 KiB values, each its own transaction, as ItemCache's `storeNow` does.
static void sets(const char *what) {
    sqlite3_stmt *begin = prepare("BEGIN IMMEDIATE"), *commit = prepare("COMMIT");
    sqlite3_stmt *usage = prepare("SELECT bytes FROM stats WHERE id = 1");
    sqlite3_stmt *insert = prepare(
        "INSERT INTO item (key, context, url, size, created, accessed, expires, inlineValue, groupNames)"
        " VALUES (?1, '', ?1, 4096, ?2, ?2, ?3, ?4, '') ON CONFLICT(key) DO NOTHING");
    static char value[SIZE];
    static unsigned long long ns[COUNT];
    for (int i = 0; i < SIZE; i++) value[i] = (char)rand();
    for (int i = 0; i < COUNT; i++) {
        char key[64];
        snprintf(key, sizeof key, "https://bench.example/get/%d", i);
        memcpy(value, &i, sizeof i);
        unsigned long long start = now_ns();
        run(begin);
        sqlite3_bind_text(insert, 1, key, -1, SQLITE_TRANSIENT);
        sqlite3_bind_double(insert, 2, start / 1e9);
        sqlite3_bind_double(insert, 3, start / 1e9 + 86400);
        sqlite3_bind_blob(insert, 4, value, SIZE, SQLITE_TRANSIENT);
        run(insert);
        run(usage);
        run(commit);
        ns[i] = now_ns() - start;
    }
    report(what, ns, COUNT);
    sqlite3_finalize(begin);
    sqlite3_finalize(commit);
    sqlite3_finalize(usage);
    sqlite3_finalize(insert);
}

/// GETS autocommit SELECTs of random stored keys after 200 untimed ones; `value` copies the
/// value out as a get must.
static void gets(const char *what, const char *sql, int value) {
    sqlite3_stmt *select = prepare(sql);
    static unsigned long long ns[GETS];
    long sum = 0;
    srand(1);
    for (int round = -200; round < GETS; round++) {
        char key[64];
        snprintf(key, sizeof key, "https://bench.example/get/%d", rand() % COUNT);
        unsigned long long start = now_ns();
        sqlite3_bind_text(select, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(select) != SQLITE_ROW) {
            fprintf(stderr, "%s: no row\n", key);
            exit(1);
        }
        if (value) {
            int bytes = sqlite3_column_bytes(select, value);
            char *copy = malloc(bytes);
            memcpy(copy, sqlite3_column_blob(select, value), bytes);
            sum += copy[9];
            free(copy);
        } else {
            sum += sqlite3_column_int64(select, 0);
        }
        sqlite3_reset(select);
        if (round >= 0) ns[round] = now_ns() - start;
    }
    report(what, ns, GETS);
    sqlite3_finalize(select);
    if (sum == 42) puts("");  // keeps the reads
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DATABASE_PATH (created anew)\n", argv[0]);
        return 64;
    }
    open_fresh(argv[1], 0);
    sets("set 4 KiB, key index only");
    open_fresh(argv[1], 1);
    sets("set 4 KiB, ItemCache's five indexes");
    gets("get 4 KiB (ItemCache's get columns, value copied)",
         "SELECT id, size, created, accessed, expires, mustRevalidate, pinned, etag, lastModified, contentType,"
         " metadata, groupNames, inlineValue, file FROM item WHERE key = ?", 12);
    gets("get of the row id alone (read transaction + index lookup)", "SELECT id FROM item WHERE key = ?", 0);
    sqlite3_close(db);
    return 0;
}
