import Crypto
import Synchronization

/// SHA-256 of a download computed as its chunks arrive (``Transport``'s `onBodyChunk`), so that
/// verifying a file does not read it back from disk.
final class StreamingDigest: Sendable {
    private struct State {
        var hasher = SHA256()
        var bytes: Int64 = 0
    }

    private let state = Mutex(State())

    func update(_ chunk: UnsafeRawBufferPointer) {
        state.withLock {
            $0.hasher.update(bufferPointer: chunk)
            $0.bytes += Int64(chunk.count)
        }
    }

    /// The fingerprint of the whole file, when the chunks seen are exactly it: a body that was
    /// not resumed and whose size matches. Nil otherwise (read the file instead).
    func fingerprint(ofFileWithSize size: Int64, resumedFrom: Int64) -> FileFingerprint? {
        state.withLock { state in
            guard resumedFrom == 0, state.bytes == size else { return nil }
            let digest = HexDigest.string(state.hasher.finalize())
            return FileFingerprint(size: size, sha256: digest)
        }
    }
}
