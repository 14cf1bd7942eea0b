import FileKit
import Foundation

/// The net result of one or more change lists: the complete tree of version `to`, and for each
/// file where its bytes come from.
///
/// The stager builds `to` beside the current content from this plan alone: folders are created,
/// ``reused`` files are hard-linked from the current content (so renames and moves cost nothing),
/// and ``downloads`` are fetched from their final place in the storage.
public struct SyncPlan: Sendable, Equatable {
    /// A file of the new version whose bytes already exist in the current content.
    public struct Reuse: Sendable, Equatable, Hashable {
        /// Where the file goes in the new version.
        public var target: SafeRelativePath
        /// The file of the current content with the same bytes, hard-linked to ``target``.
        public var source: SafeRelativePath
    }

    /// The version the plan starts from: the current content's.
    public var from: CacheVersion
    /// The version the plan builds.
    public var to: CacheVersion
    /// Every folder of the new version, sorted (parents before children).
    public var folders: [SafeRelativePath]
    /// Files carried over from the current content, sorted by target.
    public var reused: [Reuse]
    /// Files fetched from the storage at their final place, sorted.
    public var downloads: [SafeRelativePath]
    /// Tolerated mistakes found in the change lists (a move of a missing file, say).
    public var warnings: [String]
    /// Integrity extension: the size and SHA-256 each download must have, where the change lists
    /// gave them. Downloads are verified against these and stopped at the size.
    public var expectedFingerprints: [SafeRelativePath: FileFingerprint] = [:]

    /// Set on a lazy plan widened to cover more folders (``VirtualTree/cover(_:)``): the identity
    /// of the plan it widens, whose tree it builds.
    package var widenedFrom: String?

    /// A stable fingerprint of what the plan builds; a resumed update continues only the same plan.
    public var identity: String {
        if let widenedFrom { return widenedFrom }
        // Each entry is one combined text ("d:PATH", "l:TARGET<SOURCE", "g:PATH"), fed piece by
        // piece: the same value as combining the joined text, without building it.
        var hasher = FNV1a64()
        hasher.combine("\(from.text)>\(to.text)")
        for folder in folders {
            hasher.feed("d:")
            hasher.feed(folder)
            hasher.endText()
        }
        for reuse in reused {
            hasher.feed("l:")
            hasher.feed(reuse.target)
            hasher.feed("<")
            hasher.feed(reuse.source)
            hasher.endText()
        }
        for download in downloads {
            hasher.feed("g:")
            hasher.feed(download)
            hasher.endText()
        }
        return String(hasher.value, radix: 16)
    }
}

/// FNV-1a, 64-bit: a stable, dependency-free fingerprint (not a security hash).
package struct FNV1a64 {
    package private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    package init() {}

    /// Adds `text` and ends it (a 0xFF byte, which no UTF-8 text holds).
    package mutating func combine(_ text: String) {
        feed(text)
        endText()
    }

    /// Adds the bytes of `text`, not ended: several feeds and one ``endText()`` hash the same as
    /// combining the texts joined.
    package mutating func feed(_ text: String) {
        for byte in text.utf8 {
            value ^= UInt64(byte)
            value = value &* 0x0000_0100_0000_01B3
        }
    }

    /// Adds `path` as its ``SafeRelativePath/string`` (components joined by `/`), not ended.
    package mutating func feed(_ path: SafeRelativePath) {
        for (index, component) in path.components.enumerated() {
            if index > 0 { feed("/") }
            feed(component)
        }
    }

    /// Ends the text fed so far.
    package mutating func endText() {
        value ^= 0xFF
        value = value &* 0x0000_0100_0000_01B3
    }
}
