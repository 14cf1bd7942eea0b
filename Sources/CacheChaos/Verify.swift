import FileKit
import Foundation
import GRDB
import ItemCache
import ToolSupport

/// What `verify` found; printed as JSON.
struct VerifyReport: Encodable {
    var orphanFilesReconciled = 0
    var orphanRowsReconciled = 0
    var rows = 0
    var fileRows = 0
    var files = 0
    var bytes: Int64 = 0
    var limit: Int64 = 0
    var integrity = ""
    var tornValues = 0
    var rowsWithoutTheirFile = 0
    var unreconciledOrphanFiles = 0
    var expectations: ExpectationReport?
    var violationCount = 0
    /// The first 20 violations, in words.
    var violations: [String] = []

    mutating func violation(_ text: String) {
        violationCount += 1
        if violations.count < 20 { violations.append(text) }
    }
}

/// `verify`: opens the cache (which reconciles the index and the files), then checks with its
/// own eyes, reading `index.sqlite` and `blobs/` directly: every value whole and under its own
/// key, each row's file present with the row's size, each file named by a row, the totals
/// right and within the limit, SQLite's integrity check, and what the writers' stdout
/// (`--expect`) says must have survived. Returns the exit status.
func runVerify(_ options: ToolOptions) throws -> Int32 {
    let folder = try options.string("cache")
    var configuration = CacheConfiguration(folder: folder)
    configuration.diskLimit = try options.limit()
    configuration.memory = MemoryLimits(totalBytes: 0)
    let store = try ItemStore(configuration: configuration)
    var report = VerifyReport()
    (report.orphanFilesReconciled, report.orphanRowsReconciled) = (
        store.openingRepairs.orphanFiles, store.openingRepairs.orphanRows
    )
    if report.orphanRowsReconciled > 0 {
        // A kill never leaves a row without its file (files are linked before their row
        // commits); only a power loss or damage does.
        report.violation("opening removed \(report.orphanRowsReconciled) rows whose file was missing or short")
    }

    var readOnly = Configuration()
    readOnly.readonly = true
    let index = try DatabaseQueue(path: folder + "/index.sqlite", configuration: readOnly)
    let (rows, integrity, totals) = try index.read { db in
        (
            try Row.fetchAll(db, sql: "SELECT key, size, inlineValue, file FROM item"),
            try String.fetchAll(db, sql: "PRAGMA integrity_check").joined(separator: "; "),
            try Row.fetchOne(db, sql: "SELECT bytes, count FROM stats WHERE id = 1")
        )
    }
    report.integrity = integrity
    if integrity != "ok" { report.violation("SQLite integrity check: \(integrity)") }

    let blobs = folder + "/blobs"
    var files: [String: Int64] = [:]
    for shard in (try? FileManager.default.contentsOfDirectory(atPath: blobs)) ?? [] {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: blobs + "/" + shard)) ?? [] {
            var status = stat()
            files[shard + "/" + name] = stat("\(blobs)/\(shard)/\(name)", &status) == 0 ? Int64(status.st_size) : -1
        }
    }
    report.files = files.count

    var present: [String: UInt64] = [:]
    var named = Set<String>()
    var sum: Int64 = 0
    for row in rows {
        let key: String = row[0]
        let size: Int64 = row[1]
        sum += size
        let data: Data
        if let file: String = row[3] {
            report.fileRows += 1
            named.insert(file)
            guard files[file] == size, let contents = FileManager.default.contents(atPath: blobs + "/" + file) else {
                report.rowsWithoutTheirFile += 1
                report.violation(
                    "row \(key) names \(file) of \(size) bytes; on disk: \(files[file].map { "\($0) bytes" } ?? "no file")"
                )
                continue
            }
            data = contents
        } else {
            data = row[2] ?? Data()
        }
        switch ChaosValue.check(data) {
        case .failure(let why):
            report.tornValues += 1
            report.violation("torn value under \(key): \(why)")
        case .success(let value):
            guard (try? CacheKey.custom(value.name).rawValue) == key, Int64(data.count) == size else {
                report.tornValues += 1
                report.violation("row \(key) (\(size) bytes) holds \(data.count) bytes of \(value.name)")
                continue
            }
            present[value.name] = value.generation
            // The library's own read path must agree with the raw bytes.
            let read = try store.blockingItem(for: CacheKey.custom(value.name))?.item.data
            if read != data {
                report.violation("ItemStore reads \(read?.count ?? 0) other bytes for \(key) than the index holds")
            }
        }
    }
    report.rows = rows.count
    for name in files.keys where !named.contains(name) {
        report.unreconciledOrphanFiles += 1
        report.violation("blobs/\(name) is named by no row")
    }
    report.bytes = sum
    report.limit = try store.blockingStatistics().limit
    if totals?[0] != sum || totals?[1] != rows.count {
        report.violation(
            "the stats row says \(totals?[0] as Int64? ?? -1) bytes in \(totals?[1] as Int? ?? -1) items; the rows add up to \(sum) in \(rows.count)"
        )
    }
    if sum > report.limit { report.violation("\(sum) bytes stored, over the limit of \(report.limit)") }

    if let paths = try? options.string("expect") {
        let evictions = try options.string("evictions", "allowed") == "allowed"
        var expectations = ExpectationReport()
        for path in paths.split(separator: ",") {
            let text = try String(contentsOfFile: String(path), encoding: .utf8)
            Expectations(text).check(against: present, evictions: evictions, into: &expectations) {
                report.violation("\(path): \($0)")
            }
        }
        report.expectations = expectations
    }
    try store.blockingClose()

    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    emit(String(decoding: try encoder.encode(report), as: UTF8.self))
    return report.violationCount == 0 ? 0 : 1
}

/// How a writer's lines compared with the disk.
struct ExpectationReport: Encodable {
    /// Keys whose last durable line is a store or update, and how many of those are on disk.
    var committed = 0, committedPresent = 0
    /// Committed keys gone, allowed only with evictions.
    var evicted = 0
    /// Keys whose last durable line is a remove.
    var removed = 0
    /// Stores still pending when the writer stopped, and how many of them did not survive.
    var pendingAtEnd = 0, pendingLost = 0
    /// Removes under way at a kill (said "removing", never "removed") whose key is gone: the
    /// remove had committed.
    var removedInFlight = 0
}

/// What a writer's stdout (several runs appended, each from its `start` line) says must be on
/// disk: each key's last durable step, the stores still pending at the end, and the removes a
/// kill stopped before they said whether they committed.
struct Expectations {
    enum Fate {
        case committed(UInt64)
        case removed(UInt64)
    }
    var fates: [String: Fate] = [:]
    var pending: [String: UInt64] = [:]
    /// Keys whose remove was under way at a kill: gone, or as their fate says.
    var removing: [String: UInt64] = [:]

    init(_ text: String) {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            let name = fields.count == 3 ? String(fields[1]) : ""
            let generation = fields.count == 3 ? UInt64(fields[2]) : nil
            switch (fields.first, generation) {
            case ("start", _): pending = [:]
            case ("pending", let generation?): pending[name] = generation
            case ("flushed", _):
                for (name, generation) in pending {
                    fates[name] = .committed(generation)
                    removing[name] = nil
                }
                pending = [:]
            case ("committed", let generation?):
                fates[name] = .committed(generation)
                pending[name] = nil
                removing[name] = nil
            case ("removing", let generation?):
                // The remove takes the key out of the group at once; "removed" says it committed.
                removing[name] = generation
                pending[name] = nil
            case ("removed", let generation?):
                fates[name] = .removed(generation)
                pending[name] = nil
                removing[name] = nil
            default: break // flushing, closed, a line cut by the kill
            }
        }
    }

    /// Compares with the generations on disk, by key name; calls `violation` for each breach.
    func check(
        against present: [String: UInt64], evictions: Bool, into report: inout ExpectationReport,
        violation: (String) -> Void
    ) {
        for (name, fate) in fates {
            if removing[name] != nil && present[name] == nil {
                report.removedInFlight += 1
                continue
            }
            switch fate {
            case .committed(let generation):
                report.committed += 1
                if let found = present[name] {
                    report.committedPresent += 1
                    if found < generation {
                        violation("\(name): generation \(generation) was committed, the disk holds the older \(found)")
                    }
                } else if evictions {
                    report.evicted += 1
                } else {
                    violation("\(name): generation \(generation) was committed and is missing")
                }
            case .removed(let generation):
                report.removed += 1
                if let found = present[name], found < generation {
                    violation("\(name): removed at step \(generation), but generation \(found) from before is on disk")
                }
            }
        }
        for (name, generation) in pending {
            report.pendingAtEnd += 1
            if (present[name] ?? 0) < generation { report.pendingLost += 1 }
        }
    }
}
