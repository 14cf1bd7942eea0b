import FileKit

/// What a scan knew of a tree's files before it (a ``FileStamp`` and fingerprint by path, e.g.
/// the publisher's index of its last version) and what it found: every file's stamp. A file
/// whose stamp equals its record is not read again: it holds the recorded bytes.
package final class StampLedger {
    package struct Record: Sendable, Equatable {
        package var stamp: FileStamp
        package var fingerprint: FileFingerprint
        /// The identity of what the file's bytes were copied from, when the recorder knew it (the
        /// publisher's `--content` source); scans ignore it.
        package var source: [UInt8]?

        package init(stamp: FileStamp, fingerprint: FileFingerprint, source: [UInt8]? = nil) {
            self.stamp = stamp
            self.fingerprint = fingerprint
            self.source = source
        }
    }

    /// The records to trust, by path (``SafeRelativePath/string``).
    package let known: [String: Record]
    /// Every regular file the scan found, by path, with its stamp.
    package private(set) var seen: [String: FileStamp] = [:]
    /// How many files a record matched (read from the record, not from the disk).
    package private(set) var matched = 0

    package init(known: [String: Record] = [:]) {
        self.known = known
    }

    /// Notes the file at `path`; returns its recorded fingerprint when the record matches `stamp`.
    package func see(_ path: String, _ stamp: FileStamp) -> FileFingerprint? {
        seen[path] = stamp
        guard let record = known[path], record.stamp == stamp else { return nil }
        matched += 1
        return record.fingerprint
    }

    /// Whether the file at `path` was found as its record says.
    package func matches(_ path: String) -> Bool {
        guard let record = known[path], let stamp = seen[path] else { return false }
        return record.stamp == stamp
    }
}
