import Dispatch

/// Runs blocking filesystem work (tree scans, hard-linking thousands of files, deleting trees)
/// on a dedicated queue, so it never occupies one of Swift's cooperative threads, of which
/// there are only as many as cores.
enum BlockingWork {
    private static let queue = DispatchQueue(label: "content-sync.blocking-files", qos: .utility, attributes: .concurrent)

    static func run<T: Sendable>(_ body: @escaping @Sendable () throws(SyncError) -> T) async throws(SyncError) -> T {
        let result: Result<T, SyncError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(SyncError) -> T in try body() })
            }
        }
        return try result.get()
    }
}
