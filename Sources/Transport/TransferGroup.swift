import Synchronization

/// Transfers that stop together: once the group is cancelled, none of them sends another byte,
/// queued or running, and none starts.
///
/// Task cancellation reaches the children of a task group one at a time. When the transfers of
/// one job wait for a shared connection limit, removing the first cancelled one frees a
/// connection, and libcurl can hand it to the next queued transfer before that transfer's own
/// cancellation arrives: a request then starts after the job was stopped. Cancelling the group
/// first closes that window, because the transport checks the group before libcurl runs again.
///
/// Transfers join the group that is ``current`` in the task that starts them, and child tasks
/// inherit it: run the job inside `TransferGroup.$current.withValue(group)`, and to stop it call
/// ``cancel()`` on the group before cancelling the job's task.
public final class TransferGroup: Sendable {
    private let cancelled = Atomic<Bool>(false)

    /// A group that is not cancelled yet.
    public init() {}

    /// Stops the group's transfers: the queued ones never start, and the running ones end at their
    /// next callback (within a second when no byte arrives). Call it before cancelling the tasks
    /// that wait for them, which then fail as cancelled at once.
    public func cancel() {
        cancelled.store(true, ordering: .sequentiallyConsistent)
    }

    /// The group was cancelled.
    public var isCancelled: Bool {
        cancelled.load(ordering: .sequentiallyConsistent)
    }

    /// The group that the transfers started by the current task join; none by default.
    @TaskLocal public static var current: TransferGroup?
}
