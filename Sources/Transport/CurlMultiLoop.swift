internal import CCurl
import Foundation
import Synchronization

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
        var stopping = false
    }

    /// Guarded by `inbox`'s lock: it is the only state other threads touch.
    private let inbox = Mutex(Inbox())
    /// Owned by the loop thread after `init` returns.
    private let multi: UnsafeMutableRawPointer
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// Transfers handed to this loop and not yet finished, for ``CurlTransport`` to pick the least busy loop.
    let inFlight = Atomic<Int>(0)

    init(maxConnectionsPerHost: Int, name: String) {
        CurlMultiLoop.globalInit
        multi = curl_multi_init()
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxConnectionsPerHost)
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(16, maxConnectionsPerHost * 2))
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// libcurl's global init is not thread-safe; a static let runs it exactly once.
    private static let globalInit: Void = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()

    func add(_ transfer: CurlTransfer) {
        send(.add(transfer))
    }

    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelled.store(true, ordering: .relaxed)
        send(.cancel(transfer))
    }

    /// Fails every running transfer as cancelled and ends the thread, without waiting for it: the
    /// caller is ``CurlTransport``'s deinit, often on one of the two cooperative threads, and a
    /// semaphore wait there stalled every task in the process (the loop stays alive until its
    /// thread has cleaned up, since the thread holds it).
    func shutdown() {
        // The wakeup happens under the lock: the loop reads `stopping` under it before it cleans
        // up, so the handle cannot be freed between setting the flag and waking it.
        inbox.withLock { inbox in
            inbox.stopping = true
            curl_multi_wakeup(multi)
        }
    }

    private func send(_ command: Command) {
        inbox.withLock { $0.commands.append(command) }
        curl_multi_wakeup(multi)
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
                    if transfer.cancelled.load(ordering: .relaxed) {
                        transfer.fail(.cancelled(transfer.url))
                    } else if curl_multi_add_handle(multi, transfer.easy) == CURLM_OK {
                        active[transfer.easy] = transfer
                    } else {
                        transfer.fail(TransportError(code: .invalidRequest,
                                                     message: "libcurl refused the transfer for \(transfer.url.absoluteString)",
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
                curl_multi_cleanup(multi)
                return
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
