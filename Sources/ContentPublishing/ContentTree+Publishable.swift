import FileKit
import StorageFormat

extension ContentTree {
    /// Reads a folder to publish and hashes every file (blocking). Refuses what a storage cannot carry:
    /// symlinks and special files, and names that break the path rules.
    public static func scan(_ directory: String) throws(PublishError) -> ContentTree {
        try scan(directory, cache: nil)
    }

    /// ``scan(_:)``, taking the fingerprints of files whose identity `cache` knows, or whose
    /// stamp `ledger` has a record of (where the stamps found are noted).
    static func scan(_ directory: String, cache: FingerprintCache?, ledger: StampLedger? = nil) throws(PublishError)
        -> ContentTree
    {
        let local = try fileWork { () throws(FileSystemError) in
            try scanLocal(directory, cache: cache, ledger: ledger)
        }
        guard let intruder = local.intruders.first else { return local.tree }
        let shown = directory + "/" + intruder.shownPath
        switch intruder.kind {
        // Exit 6, as docs/protocol.md §8.5 lists them: --content names something a storage cannot carry.
        case .symlink, .fifo, .socket, .device:
            throw PublishError(
                code: .configuration,
                message:
                    "\(shown) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it"
            )
        case .normalizationTwin:
            // Swift compares names by canonical equivalence: "é" (U+00E9) and "e" + U+0301
            // are one key, though Linux keeps two files. Refuse rather than drop one.
            throw PublishError(
                code: .configuration,
                message:
                    "\(shown) has a sibling whose name differs only in Unicode normalization (for example precomposed 'é' and 'e' + combining accent); a storage cannot carry both: rename one"
            )
        case .undecodableName:
            throw PublishError(
                code: .invalidContent,
                message: "\(shown): the name is not UTF-8, and storages name files in UTF-8; rename it")
        case .unreadable:
            // Not asked for here (scanLocal fails on the file instead); said plainly all the same.
            throw PublishError(
                code: .configuration, message: "\(shown) cannot be read (\(intruder.detail ?? "")); make it readable")
        case .unsafeName:
            throw PublishError(
                code: .invalidContent,
                message: "\(shown): \(intruder.detail ?? "the path rules refuse the name"); rename it")
        }
    }
}
