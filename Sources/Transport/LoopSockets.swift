internal import CCurl
import Foundation
import Synchronization

/// The sockets of one multi handle's connections, so that a transfer can find its own.
///
/// libcurl tells a transfer the ports of the connection it runs on (`CURLOPT_PREREQFUNCTION`,
/// for a new connection and for a reused one alike) but not its descriptor while it runs
/// (`CURLINFO_ACTIVESOCKET` names a connection only once a transfer is done). So every socket
/// the multi handle opens is noted here (`CURLOPT_SOCKOPTFUNCTION`) and forgotten as it is
/// closed (`CURLOPT_CLOSESOCKETFUNCTION`, which closes it), and a transfer looks its ports up.
/// A wrong answer could only send an early acknowledgement on another of these connections.
///
/// libcurl calls back from inside `curl_multi_perform` and `curl_multi_cleanup`, on the loop's
/// thread; the lock is for readers elsewhere (tests), and is taken only as a socket opens or
/// closes or a transfer starts. It lives as long as its ``CurlMultiLoop``, which outlives the
/// multi handle whose connections call back into it.
final class LoopSockets: Sendable {
    struct Ports: Equatable, Sendable {
        var local: Int
        var remote: Int
    }

    /// The sockets open, with their ports once known (a socket is noted before it connects).
    private let open = Mutex<[curl_socket_t: Ports?]>([:])

    func opened(_ socket: curl_socket_t) {
        open.withLock { $0[socket] = .some(nil) }
    }

    func closed(_ socket: curl_socket_t) {
        open.withLock { $0[socket] = nil }
    }

    /// The open socket connected from `local` to `remote` (ports), if any.
    func socket(local: Int, remote: Int) -> curl_socket_t? {
        let wanted = Ports(local: local, remote: remote)
        return open.withLock { open in
            for (socket, known) in open {
                var ports = known ?? nil
                if ports == nil {
                    ports = Self.ports(of: socket)
                    if let ports { open[socket] = ports }
                }
                if ports == wanted { return socket }
            }
            return nil
        }
    }

    /// The sockets open now, each with its ports if a transfer has looked them up.
    var snapshot: [curl_socket_t: Ports?] { open.withLock { $0 } }

    /// The local and remote ports of a connected TCP socket (IPv4 or IPv6).
    static func ports(of socket: curl_socket_t) -> Ports? {
        guard let local = port(of: socket, peer: false), let remote = port(of: socket, peer: true) else { return nil }
        return Ports(local: local, remote: remote)
    }

    private static func port(of socket: curl_socket_t, peer: Bool) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                peer ? getpeername(socket, $0, &length) : getsockname(socket, $0, &length)
            }
        }
        guard result == 0 else { return nil }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin6_port))
                }
            }
        default:
            return nil
        }
    }

    /// Sets the callbacks that keep this registry on `easy`, with `transfer` told its socket
    /// before each request. False when libcurl refuses one (the transfer then runs without).
    func attach(_ easy: UnsafeMutableRawPointer, transfer: UnsafeMutableRawPointer) -> Bool {
        let registry = Unmanaged.passUnretained(self).toOpaque()
        let codes = [
            ccurl_easy_setopt_pointer(easy, CURLOPT_SOCKOPTDATA, registry),
            ccurl_easy_setopt_sockopt_callback(easy) { registry, socket, _ in
                Unmanaged<LoopSockets>.fromOpaque(registry!).takeUnretainedValue().opened(socket)
                return CURL_SOCKOPT_OK
            },
            ccurl_easy_setopt_pointer(easy, CURLOPT_CLOSESOCKETDATA, registry),
            ccurl_easy_setopt_closesocket_callback(easy) { registry, socket in
                Unmanaged<LoopSockets>.fromOpaque(registry!).takeUnretainedValue().closed(socket)
                return close(socket)
            },
            ccurl_easy_setopt_pointer(easy, CURLOPT_PREREQDATA, transfer),
            ccurl_easy_setopt_prereq_callback(easy) { transfer, _, _, remotePort, localPort in
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(transfer!).takeUnretainedValue()
                transfer.socket = transfer.sockets?.socket(local: Int(localPort), remote: Int(remotePort)) ?? -1
                return CURL_PREREQFUNC_OK
            },
        ]
        return codes.allSatisfy { $0 == CURLE_OK }
    }
}
