import GRDB
import Transport

extension DiskTier {
    /// The index's tables. Migrations are never edited once shipped: add a new one instead.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE item (
                        id INTEGER PRIMARY KEY,
                        key TEXT NOT NULL UNIQUE,
                        context TEXT NOT NULL,
                        url TEXT,
                        size INTEGER NOT NULL,
                        created REAL NOT NULL,
                        accessed REAL NOT NULL,
                        expires REAL,
                        mustRevalidate INTEGER NOT NULL DEFAULT 0,
                        pinned INTEGER NOT NULL DEFAULT 0,
                        etag TEXT,
                        lastModified TEXT,
                        contentType TEXT,
                        metadata TEXT,
                        inlineValue BLOB,
                        file TEXT
                    );
                    CREATE INDEX item_lru ON item(accessed) WHERE pinned = 0;
                    CREATE INDEX item_expiry ON item(expires) WHERE pinned = 0 AND expires IS NOT NULL;
                    CREATE INDEX item_url ON item(url);
                    CREATE INDEX item_context ON item(context);
                    CREATE TABLE itemGroup (
                        itemId INTEGER NOT NULL REFERENCES item(id) ON DELETE CASCADE,
                        name TEXT NOT NULL,
                        PRIMARY KEY (name, itemId)
                    ) WITHOUT ROWID;
                    CREATE INDEX itemGroup_item ON itemGroup(itemId);
                    CREATE TABLE stats (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        bytes INTEGER NOT NULL,
                        count INTEGER NOT NULL
                    );
                    INSERT INTO stats VALUES (1, 0, 0);
                    CREATE TRIGGER item_inserted AFTER INSERT ON item BEGIN
                        UPDATE stats SET bytes = bytes + NEW.size, count = count + 1 WHERE id = 1;
                    END;
                    CREATE TRIGGER item_deleted AFTER DELETE ON item BEGIN
                        UPDATE stats SET bytes = bytes - OLD.size, count = count - 1 WHERE id = 1;
                    END;
                    CREATE TRIGGER item_resized AFTER UPDATE OF size ON item BEGIN
                        UPDATE stats SET bytes = bytes - OLD.size + NEW.size WHERE id = 1;
                    END;
                    """)
        }
        // The disk limit belongs to the folder, not to one process's configuration: every
        // process enforces the one last set (NULL: the default).
        migrator.registerMigration("v2-disk-limit") { db in
            try db.execute(sql: "ALTER TABLE stats ADD COLUMN diskLimit INTEGER")
        }
        // A copy of the item's groups in its row (names joined by U+001F, '' for none), so a get
        // reads them without a second B-tree lookup (measured: that subquery cost about a third
        // of a 4 KiB get). `itemGroup` stays the table queries use. NULL: a row written before
        // this migration (or by an older version sharing the folder), read through `itemGroup`.
        migrator.registerMigration("v3-group-names") { db in
            try db.execute(sql: "ALTER TABLE item ADD COLUMN groupNames TEXT")
        }
        // The value's CRC-32C, checked on every read from disk (inline or file): other bytes
        // than were stored are a miss, never served. NULL: a row written before checksums (or
        // by an older version sharing the folder), checked by size only.
        migrator.registerMigration("v4-checksum") { db in
            try db.execute(sql: "ALTER TABLE item ADD COLUMN checksum INTEGER")
        }
        // The last failed fetch of a key, so processes that waited for that fetch share its
        // failure instead of each trying in turn (ItemLoader's cross-process coalescing).
        migrator.registerMigration("v5-fetch-failure") { db in
            try db.execute(
                sql: """
                    CREATE TABLE fetchFailure (
                        key TEXT PRIMARY KEY,
                        at REAL NOT NULL,
                        code TEXT NOT NULL,
                        message TEXT NOT NULL
                    ) WITHOUT ROWID
                    """)
        }
        // The folder's footprint, not only its values' bytes (issue 20): `cost` adds up what
        // each row takes on disk, a file's value rounded up to whole 4 KiB blocks, plus a
        // row's own overhead in the index (``DiskTier/rowOverhead``). Eviction keeps it under
        // the limit less the log's and the folder's own reserve.
        migrator.registerMigration("v6-footprint") { db in
            try db.execute(
                sql: "ALTER TABLE stats ADD COLUMN cost INTEGER NOT NULL DEFAULT 0;"
                    + DiskTier.footprintTriggers(cost: DiskTier.valueCostSQL, resizedOn: "size, file"))
        }
        // Most items have no context: a partial index leaves them out, so storing one writes
        // one index page fewer (measured: 10 log frames a 4 KiB set, now 9). A query for a
        // context repeats the index's condition (`ItemQuery.request`) so SQLite can use it.
        migrator.registerMigration("v7-context-index") { db in
            try db.execute(
                sql: """
                    DROP INDEX item_context;
                    CREATE INDEX item_context ON item(context) WHERE context <> '';
                    """)
        }
        // The HTTP response an item came from (issue 21): its status, header lines and age
        // base (`HTTPResponseRecord.encoded`), for freshness, 304 updates and `--include`;
        // NULL for an item stored directly. And each origin's failures, so that every process
        // sharing the folder backs off a failing origin together.
        migrator.registerMigration("v8-http-response") { db in
            try db.execute(
                sql: """
                    ALTER TABLE item ADD COLUMN response TEXT;
                    CREATE TABLE originFailure (
                        origin TEXT PRIMARY KEY,
                        failures INTEGER NOT NULL,
                        at REAL NOT NULL,
                        retryAt REAL NOT NULL,
                        message TEXT NOT NULL,
                        status INTEGER
                    ) WITHOUT ROWID;
                    """)
        }
        // Counters the folder keeps for every process that shares it (ImageCache: variants
        // made, hits, refusals), added to by each process when it closes.
        migrator.registerMigration("v9-counters") { db in
            try db.execute(
                sql: "CREATE TABLE counter (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID")
        }
        // A row's footprint counts what else it keeps besides its value (``DiskTier/costSQL(_:)``:
        // the response record, metadata, validators, long keys and URLs); the triggers count it
        // from now on, and the total is counted again.
        migrator.registerMigration("v10-row-footprint") { db in
            try db.execute(sql: DiskTier.footprintTriggers(cost: DiskTier.costSQL, resizedOn: DiskTier.costColumns))
        }
        // Keys once kept a secret query value (`?access_token=…`) or a token as the user name
        // in the clear; they now join as digests (``CacheKey/digest(_:)``). The rows keeping one
        // go, erased in place (`secure_delete`), and their files with the opening's
        // reconciliation: a later fetch stores them under the new key.
        migrator.registerMigration("v11-secret-free-keys") { db in
            let items = try Row.fetchAll(db, sql: "SELECT id, url FROM item WHERE url IS NOT NULL").compactMap {
                row -> Int64? in
                guard let url = row["url"] as String? else { return nil }
                return Redaction.urls(url) == url ? nil : row["id"]
            }
            let failures = try String.fetchAll(db, sql: "SELECT key FROM fetchFailure").filter {
                Redaction.urls($0) != $0
            }
            guard !items.isEmpty || !failures.isEmpty else { return }
            try db.execute(sql: "PRAGMA secure_delete = ON")
            for id in items { try db.execute(sql: "DELETE FROM item WHERE id = ?", arguments: [id]) }
            for key in failures { try db.execute(sql: "DELETE FROM fetchFailure WHERE key = ?", arguments: [key]) }
            try db.execute(sql: "PRAGMA secure_delete = OFF")
        }
        return migrator
    }

    /// The triggers that keep `stats` (bytes, count and the footprint `cost`, by `cost`) in step
    /// with every insert, delete and change of the `resizedOn` columns, made anew, and the
    /// footprint counted again from the rows.
    static func footprintTriggers(cost: (String) -> String, resizedOn columns: String) -> String {
        """
        DROP TRIGGER item_inserted;
        DROP TRIGGER item_deleted;
        DROP TRIGGER item_resized;
        CREATE TRIGGER item_inserted AFTER INSERT ON item BEGIN
            UPDATE stats SET bytes = bytes + NEW.size, count = count + 1, cost = cost + \(cost("NEW")) WHERE id = 1;
        END;
        CREATE TRIGGER item_deleted AFTER DELETE ON item BEGIN
            UPDATE stats SET bytes = bytes - OLD.size, count = count - 1, cost = cost - \(cost("OLD")) WHERE id = 1;
        END;
        CREATE TRIGGER item_resized AFTER UPDATE OF \(columns) ON item BEGIN
            UPDATE stats SET bytes = bytes - OLD.size + NEW.size, cost = cost - \(cost("OLD")) + \(cost("NEW")) WHERE id = 1;
        END;
        UPDATE stats SET cost = (SELECT coalesce(sum(\(cost("item"))), 0) FROM item) WHERE id = 1;
        """
    }
}
