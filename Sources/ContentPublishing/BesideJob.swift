import Foundation
import ThreadKit

/// Work run on a thread of its own while the caller does something else: a publish builds the
/// archive beside the diff, the change list and the content manifest, which need none of it, so
/// two cores do both at once.
///
/// ``value()`` waits for the work and returns what it returned or threw. The caller waits on every
/// path, an error's included, so no thread is left writing in a work folder being deleted.
final class BesideJob<Value>: @unchecked Sendable {
    // Written by the job's thread before `finished` is signalled, read only after waiting on it.
    private let body: () throws(PublishError) -> Value
    private var outcome: Result<Value, PublishError>?
    private let finished = DispatchSemaphore(value: 0)
    private var waited = false
    /// False when no thread could be made (a task limit): ``value()`` then runs the work itself.
    private var started = true

    /// Starts `body` on a new thread named `name`.
    init(name: String, _ body: @escaping () throws(PublishError) -> Value) {
        self.body = body
        do {
            try DetachedThread.start(name: name) { [self] in
                outcome = Result { () throws(PublishError) -> Value in try self.body() }
                finished.signal()
            }
        } catch {
            started = false
        }
    }

    /// Waits for the work; its result, or the error it threw. Call it from one thread; a later
    /// call returns the same without waiting.
    func value() throws(PublishError) -> Value {
        if !waited {
            if started {
                finished.wait()
            } else {
                outcome = Result { () throws(PublishError) -> Value in try body() }
            }
            waited = true
        }
        return try outcome!.get()
    }
}
