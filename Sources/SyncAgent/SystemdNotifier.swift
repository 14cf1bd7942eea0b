import Foundation
import Glibc

/// systemd's notification protocol (`sd_notify(3)`), spoken directly: one datagram per message to
/// the Unix socket named by `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace). No
/// libsystemd: the protocol is a documented, stable datagram of `KEY=value` lines.
///
/// `watch` sends `READY=1` after its first check, `STATUS=…` after each, `WATCHDOG=1` every half
/// of `$WATCHDOG_USEC`, and `STOPPING=1` when it stops. Without `$NOTIFY_SOCKET` (not under a
/// `Type=notify` unit) there is no notifier and nothing is sent.
struct SystemdNotifier: Sendable {
    /// The socket's address: a path, or an abstract name starting with `@`.
    let socketPath: String

    /// The notifier of this process's unit, or nil when systemd is not listening.
    static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment)
        -> SystemdNotifier?
    {
        guard let path = environment["NOTIFY_SOCKET"], path.hasPrefix("/") || path.hasPrefix("@"), path.utf8.count < 108
        else { return nil }
        return SystemdNotifier(socketPath: path)
    }

    /// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC`, when the watchdog is on and meant
    /// for this process (`$WATCHDOG_PID`, when set, is ours).
    static func watchdogInterval(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0 else {
            return nil
        }
        if let pid = environment["WATCHDOG_PID"], pid != String(getpid()) { return nil }
        return .microseconds(Int64(microseconds / 2))
    }

    /// Sends `message` (lines of `KEY=value`); best effort: a failure is returned, never thrown,
    /// because a lost notification must not stop the agent.
    @discardableResult
    func send(_ message: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var name = Array(socketPath.utf8)
        if name.first == UInt8(ascii: "@") { name[0] = 0 } // the abstract namespace
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        let length = pathOffset + name.count + (name.first == 0 ? 0 : 1)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            bytes.copyBytes(from: name)
        }
        let bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                sendto(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL), socketAddress, socklen_t(length))
            }
        }
        return sent == bytes.count
    }
}
