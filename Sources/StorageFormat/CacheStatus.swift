import Foundation

/// `RXCacheConfig/cacheStatus.json`: the storage's current version and where to get it.
public struct CacheStatus: Sendable, Equatable {
    /// The version the storage publishes now.
    public var actualVersion: CacheVersion
    /// Clients below this version restore from the archive instead of replaying changes.
    public var minimalVersion: CacheVersion
    /// Where the list of change lists is (already rebased onto the configured base).
    public var updateListURL: URL
    /// Where the archive of the whole content is (already rebased).
    public var archiveURL: URL
    /// The archive's declared size in bytes (the file gives MiB).
    public var zippedBytes: Int64
    /// The content's declared unpacked size in bytes.
    public var unzippedBytes: Int64
    /// The integrity extension's data, when the publisher wrote it.
    public var integrity: StorageIntegrity?

    /// Bytes in one "MB" of the size fields. The original format never said; reading it as the
    /// larger MiB errs on the side of room.
    public static let bytesPerMB: Double = 1_048_576

    /// What a field should hold, for messages.
    package static func example(of key: String) -> String {
        switch key {
        case "actualCacheVersion", "minimalCacheVersion": return "a version such as \"1.5\""
        case "zippedArchiveSizeInMB", "unzippedArchiveSizeInMB": return "a size in MB such as \"12.5\""
        default: return "a URL"
        }
    }

    /// Parses the status file. `layout` learns the storage's published base from it.
    public static func parse(_ data: Data, from url: URL, layout: inout StorageLayout) throws(StorageFormatError)
        -> CacheStatus
    {
        let name = url.absoluteString
        let root = try JSONValue.parseStorageDocument(data, name: name, code: .invalidStatus)
        func text(_ key: String, aliases: [String] = []) throws(StorageFormatError) -> String {
            for candidate in [key] + aliases {
                guard let value = root[candidate] else { continue }
                guard let text = value.scalarText else {
                    throw StorageFormatError(
                        code: .invalidStatus,
                        message: "\(name): \"\(candidate)\" must be a string or number, found \(value.kindName)")
                }
                // Said as it is: an empty string is a string, so "must be a string" would mislead.
                guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
                    throw StorageFormatError(
                        code: .invalidStatus,
                        message: "\(name): \"\(candidate)\" is empty; the publisher must write \(Self.example(of: key))"
                    )
                }
                return text
            }
            throw StorageFormatError(
                code: .invalidStatus, message: "\(name): required key \"\(key)\" is missing; the publisher must add it")
        }
        func version(_ key: String, aliases: [String] = []) throws(StorageFormatError) -> CacheVersion {
            let raw = try text(key, aliases: aliases)
            do { return try CacheVersion(raw) } catch {
                throw StorageFormatError(code: .invalidStatus, message: "\(name): \"\(key)\": \(error)")
            }
        }
        func size(_ key: String) throws(StorageFormatError) -> Int64 {
            let raw = try text(key)
            guard let megabytes = Double(raw.trimmingCharacters(in: .whitespaces)), megabytes.isFinite, megabytes >= 0,
                megabytes < 1e9
            else {
                throw StorageFormatError(
                    code: .invalidStatus, message: "\(name): \"\(key)\" is '\(raw)', not a size in MB such as \"12.5\"")
            }
            return Int64((megabytes * bytesPerMB).rounded(.up))
        }
        // "actucalCacheVersion" is a misspelling in the original documentation; accept it.
        let actual = try version("actualCacheVersion", aliases: ["actucalCacheVersion"])
        let minimal = try version("minimalCacheVersion")
        let listText = try text("urlAtListOfURLsToUpdatesByVersion")
        let archiveText = try text("urlAtZipArchiveOfCacheContent")
        guard let rawListURL = URL(string: listText, relativeTo: url)?.absoluteURL else {
            throw StorageFormatError(
                code: .invalidStatus, message: "\(name): urlAtListOfURLsToUpdatesByVersion '\(listText)' is not a URL")
        }
        layout.inferPublishedBase(fromUpdateListURL: rawListURL)
        guard let listURL = layout.resolve(listText, relativeTo: url) else {
            throw StorageFormatError(
                code: .invalidStatus,
                message: "\(name): urlAtListOfURLsToUpdatesByVersion '\(listText)' is not an http(s) URL")
        }
        guard let archiveURL = layout.resolve(archiveText, relativeTo: url) else {
            throw StorageFormatError(
                code: .invalidStatus,
                message: "\(name): urlAtZipArchiveOfCacheContent '\(archiveText)' is not an http(s) URL")
        }
        if minimal > actual {
            throw StorageFormatError(
                code: .invalidStatus,
                message:
                    "\(name): minimalCacheVersion \(minimal) is above actualCacheVersion \(actual); the publisher must fix the status file"
            )
        }
        let integrity = try root["integrity"].map { (value: JSONValue) throws(StorageFormatError) -> StorageIntegrity in
            try StorageIntegrity.parse(value, name: name, statusURL: url, layout: layout)
        }
        return CacheStatus(
            actualVersion: actual, minimalVersion: minimal, updateListURL: listURL, archiveURL: archiveURL,
            zippedBytes: try size("zippedArchiveSizeInMB"), unzippedBytes: try size("unzippedArchiveSizeInMB"),
            integrity: integrity)
    }
}
