internal import CCurl
import Foundation
import Synchronization
import ThreadKit

/// Drives one `curl_multi` handle on a thread of its own.
///
/// libcurl's transfer loop blocks, and Swift's cooperative pool has as few threads as the
/// machine has cores (2 here), so the loop must never run on it. Tasks hand transfers over
/// through a mutex-guarded inbox and wake the loop with `curl_multi_wakeup`; the loop resumes
/// their continuations when libcurl reports them done. Connections, TLS sessions and DNS stay
/// cached in the multi handle between transfers, and HTTP/2 streams are multiplexed.
final class CurlMultiLoop: @unchecked Sendable {
    private enum Command {
        case add(CurlTransfer)
        case cancel(CurlTransfer)
    }

    private struct Inbox {
        var commands: [Command] = []
        /// No command is accepted once set; the loop fails what it holds and ends.
        var stopping = false
        /// The loop has ended and freed the multi handle.
        var finished = false
        /// ``shutdown()`` callers waiting for the loop to end.
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Guarded by `inbox`'s lock: it is the only state other threads touch.
    private let inbox = Mutex(Inbox())
    /// Owned by the loop thread after `init` returns.
    private let multi: UnsafeMutableRawPointer
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// The multi handle's sockets, for each transfer to find its own. Owned by the loop thread.
    let sockets = LoopSockets()
    /// Transfers handed to this loop and not yet finished, for ``CurlTransport`` to pick the least busy loop.
    let inFlight = Atomic<Int>(0)
    /// Senders between queueing a command (under the lock, before any shutdown) and waking the
    /// loop (outside it): the loop frees the multi handle only once none is left.
    private let wakers = Atomic<Int>(0)

    init(maxConnectionsPerHost: Int, name: String) throws(TransportError) {
        CurlMultiLoop.globalInit
        guard let multi = curl_multi_init() else {
            throw TransportError(
                code: .invalidRequest, message: "libcurl could not create a multi handle (out of memory?)")
        }
        let options: [(CURLMoption, Int, String)] = [
            (CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX), "CURLMOPT_PIPELINING"),
            (CURLMOPT_MAX_HOST_CONNECTIONS, maxConnectionsPerHost, "CURLMOPT_MAX_HOST_CONNECTIONS"),
            (CURLMOPT_MAXCONNECTS, max(16, maxConnectionsPerHost * 2), "CURLMOPT_MAXCONNECTS"),
        ]
        for (option, value, name) in options {
            let code = ccurl_multi_setopt_long(multi, option, value)
            guard code == CURLM_OK else {
                curl_multi_cleanup(multi)
                throw TransportError(
                    code: .invalidRequest,
                    message:
                        "libcurl refused \(name): \(String(cString: curl_multi_strerror(code))) (curlm \(code.rawValue)); "
                        + "this transport needs libcurl 7.85 or later")
            }
        }
        self.multi = multi
        do {
            try DetachedThread.start(name: name, stackSize: 1 << 20) { [self] in run() }
        } catch {
            // Without its thread no transfer would ever end.
            curl_multi_cleanup(multi)
            throw TransportError(code: .threadLimit, message: "the transport \(error)")
        }
    }

    /// libcurl's global init is not thread-safe; a static let runs it exactly once.
    private static let globalInit: Void = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()

    /// Hands `transfer` to the loop; after shutdown it fails at once.
    func add(_ transfer: CurlTransfer) {
        if !send(.add(transfer)) { transfer.fail(.shutDown(transfer.url)) }
    }

    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelled.store(true, ordering: .relaxed)
        _ = send(.cancel(transfer))
    }

    /// Fails every running transfer as cancelled and ends the thread, without waiting for it
    /// (``CurlTransport``'s deinit, the fallback when nobody called ``shutdown()``: a wait there
    /// could stall a cooperative thread). The loop stays alive until its thread has cleaned up,
    /// since the thread holds it.
    func beginShutdown() {
        inbox.withLock { inbox in
            guard !inbox.stopping else { return }
            inbox.stopping = true
            curl_multi_wakeup(multi)
        }
    }

    /// Fails every running transfer as cancelled, ends the thread and returns once it has freed
    /// the multi handle. Safe to call more than once.
    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let finished = inbox.withLock { inbox -> Bool in
                if inbox.finished { return true }
                inbox.waiters.append(continuation)
                if !inbox.stopping {
                    inbox.stopping = true
                    curl_multi_wakeup(multi)
                }
                return false
            }
            if finished { continuation.resume() }
        }
    }

    /// Queues a command and wakes the loop; false once the loop is stopping. The wakeup (a write
    /// to the loop's wakeup pipe) happens outside the lock, so the loop never waits on a sender's
    /// system call; a sender that queued before the stop is counted in `wakers`, and the loop
    /// frees the handle only after the last one has woken it.
    private func send(_ command: Command) -> Bool {
        let accepted = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            inbox.commands.append(command)
            wakers.add(1, ordering: .sequentiallyConsistent)
            return true
        }
        guard accepted else { return false }
        curl_multi_wakeup(multi)
        wakers.subtract(1, ordering: .sequentiallyConsistent)
        return true
    }

    private func run() {
        var running: Int32 = 0
        while true {
            let (commands, stopping) = inbox.withLock { box -> ([Command], Bool) in
                defer { box.commands.removeAll(keepingCapacity: true) }
                return (box.commands, box.stopping)
            }
            for command in commands {
                switch command {
                case .add(let transfer):
                    if transfer.isCancelled {
                        transfer.fail(.cancelled(transfer.url))
                        continue
                    }
                    transfer.socket = -1
                    transfer.sockets =
                        sockets.attach(transfer.easy, transfer: Unmanaged.passUnretained(transfer).toOpaque())
                        ? sockets : nil
                    if curl_multi_add_handle(multi, transfer.easy) == CURLM_OK {
                        active[transfer.easy] = transfer
                    } else {
                        transfer.fail(
                            TransportError(
                                code: .invalidRequest,
                                message: "libcurl refused the transfer for \(Redaction.url(transfer.url))",
                                url: transfer.url))
                    }
                case .cancel(let transfer):
                    if active.removeValue(forKey: transfer.easy) != nil {
                        curl_multi_remove_handle(multi, transfer.easy)
                        transfer.fail(.cancelled(transfer.url))
                    }
                }
            }
            if stopping {
                for transfer in active.values {
                    curl_multi_remove_handle(multi, transfer.easy)
                    transfer.fail(.cancelled(transfer.url))
                }
                active.removeAll()
                // Senders that queued before the stop may still be inside curl_multi_wakeup.
                while wakers.load(ordering: .sequentiallyConsistent) > 0 { sched_yield() }
                let waiters = inbox.withLock { inbox -> [CheckedContinuation<Void, Never>] in
                    curl_multi_cleanup(multi)
                    inbox.finished = true
                    defer { inbox.waiters = [] }
                    return inbox.waiters
                }
                for waiter in waiters { waiter.resume() }
                return
            }
            // A transfer whose task or group was cancelled goes before libcurl runs again, even if
            // its own cancel command has not come yet: an update cancels its transfers one by one,
            // and removing the first frees a connection that libcurl would give the next queued
            // one, which then sent its request after the cancellation. Its ``TransferGroup``,
            // cancelled first, marks them all at once.
            if active.values.contains(where: { $0.isCancelled }) {
                for (easy, transfer) in active where transfer.isCancelled {
                    curl_multi_remove_handle(multi, easy)
                    active.removeValue(forKey: easy)
                    transfer.fail(.cancelled(transfer.url))
                }
            }
            curl_multi_perform(multi, &running)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard ccurl_msg_kind(message) == CURLMSG_DONE, let easy = ccurl_msg_handle(message) else { continue }
                let result = ccurl_msg_result(message)
                curl_multi_remove_handle(multi, easy)
                active.removeValue(forKey: easy)?.complete(result: result)
            }
            // Sleeps until a socket is ready, a timeout is due, or curl_multi_wakeup is called.
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }
}
