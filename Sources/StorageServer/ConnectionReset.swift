import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Turns the close of one accepted connection into a TCP reset, for ``Fault/reset(afterBytes:)``.
///
/// FlyingFox hides its sockets, so the connection's socket is found among the process's open
/// descriptors by its two ends: the peer the request came from and the local port it reached.
/// `SO_LINGER` with a zero timeout makes the next `close` discard unsent bytes and send `RST`
/// instead of `FIN`, which the client reads as `ECONNRESET` (a crashed proxy, a load balancer
/// dropping the flow), not as the end of the body.
enum ConnectionReset {
    /// One connection's two ends, as the request saw them.
    struct Ends: Sendable, Equatable {
        var peerIP: String
        var peerPort: UInt16
        /// The port the client connected to (from `Host`), when it says; checked when known.
        var localPort: UInt16?
    }

    /// Arms the reset of the connection with `ends`; false when no open socket has them (the
    /// client already hung up).
    @discardableResult
    static func arm(_ ends: Ends) -> Bool {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return false }
        for case let descriptor? in names.map({ Int32($0) }) {
            // A descriptor listed here may be closed or reused by now: the ends are read from
            // the descriptor as it is when the option is set, never from the listing.
            guard let peer = address(descriptor, getpeername), peer.ip == ends.peerIP, peer.port == ends.peerPort
            else { continue }
            if let localPort = ends.localPort {
                guard let local = address(descriptor, getsockname), local.port == localPort else { continue }
            }
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            return setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                == 0
        }
        return false
    }

    /// The IPv4 or IPv6 address `read` (`getpeername` or `getsockname`) gives for `descriptor`.
    private static func address(
        _ descriptor: Int32, _ read: (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?) -> Int32
    ) -> (ip: String, port: UInt16)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let read = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { read(descriptor, $0, &length) }
        }
        guard read == 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var ip = address.pointee.sin_addr
                    guard inet_ntop(AF_INET, &ip, &text, socklen_t(text.count)) != nil else { return nil }
                    return (String(cString: text), UInt16(bigEndian: address.pointee.sin_port))
                }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var ip = address.pointee.sin6_addr
                    guard inet_ntop(AF_INET6, &ip, &text, socklen_t(text.count)) != nil else { return nil }
                    return (String(cString: text), UInt16(bigEndian: address.pointee.sin6_port))
                }
            }
        default:
            return nil
        }
    }
}
