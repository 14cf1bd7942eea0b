internal import FlyingFox
internal import FlyingSocks
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Turns the close of one accepted connection into a TCP reset, for ``Fault/reset(afterBytes:)``.
///
/// FlyingFox hides its sockets, so the connection's socket is found among the process's open
/// descriptors by its two ends: the peer the request came from and the local port it reached,
/// both read with FlyingSocks' own `remotePeer()` and `sockname()`, which made the request's
/// address. `SO_LINGER` with a zero timeout makes the next `close` discard unsent bytes and send
/// `RST` instead of `FIN`, which the client reads as `ECONNRESET` (a crashed proxy, a load
/// balancer dropping the flow), not as the end of the body.
enum ConnectionReset {
    /// One connection's two ends, as the request saw them.
    struct Ends: Sendable, Equatable {
        var peer: Endpoint
        /// The port the client connected to (from `Host`), when it says; checked when known.
        var localPort: UInt16?

        /// The ends of the connection `request` came on; nil without an IP peer.
        init?(of request: HTTPRequest) {
            switch request.remoteAddress {
            case .ip4(let ip, let port)?, .ip6(let ip, let port)?: peer = Endpoint(ip: ip, port: port)
            default: return nil
            }
            // `Host: 127.0.0.1:PORT` names the local port; without one, the peer alone decides.
            localPort = request.headers[.host].flatMap { $0.split(separator: ":").last.flatMap { UInt16($0) } }
        }
    }

    struct Endpoint: Sendable, Equatable {
        var ip: String
        var port: UInt16

        init(ip: String, port: UInt16) {
            self.ip = ip
            self.port = port
        }

        init?(_ address: Socket.Address?) {
            switch address {
            case .ip4(let ip, let port)?, .ip6(let ip, let port)?: self.init(ip: ip, port: port)
            default: return nil
            }
        }
    }

    /// Arms the reset of the connection with `ends`; false when no open socket has them (the
    /// client already hung up).
    @discardableResult
    static func arm(_ ends: Ends) -> Bool {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return false }
        for case let descriptor? in names.map({ Int32($0) }) {
            // A descriptor listed here may be closed or reused by now: the ends are read from
            // the descriptor as it is when the option is set, never from the listing.
            let socket = Socket(file: Socket.FileDescriptor(rawValue: descriptor))
            guard Endpoint(try? socket.remotePeer()) == ends.peer else { continue }
            if let localPort = ends.localPort, Endpoint(try? socket.sockname())?.port != localPort { continue }
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            return setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                == 0
        }
        return false
    }
}
