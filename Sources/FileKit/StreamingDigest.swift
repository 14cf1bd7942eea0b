import Crypto
import Synchronization

/// SHA-256 of a file computed as its chunks arrive (a download's body chunks, say), so that
/// verifying a file does not read it back from disk.
public final class StreamingDigest: Sendable {
    private struct State {
        var hasher = SHA256()
        var bytes: Int64 = 0
    }

    private let state = Mutex(State())

    /// Adds the next chunk.
    public func update(_ chunk: UnsafeRawBufferPointer) {
        state.withLock {
            $0.hasher.update(bufferPointer: chunk)
            $0.bytes += Int64(chunk.count)
        }
    }

    /// A digest of nothing yet.
    public init() {}

    /// The SHA-256 (lower-case hex) of the whole file, when the chunks seen are exactly it: a body that was
    /// not resumed and whose size matches. Nil otherwise (read the file instead).
    public func sha256(ofFileWithSize size: Int64, resumedFrom: Int64) -> String? {
        state.withLock { state in
            guard resumedFrom == 0, state.bytes == size else { return nil }
            return HexDigest.string(state.hasher.finalize())
        }
    }
}
