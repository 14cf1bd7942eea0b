import Foundation

extension URL {
    /// The URL's origin as one text, `scheme://host[:port]`, lower-cased, without user info or
    /// path, the scheme's default port left out (`https://h:443/x` and `https://H/y` are one
    /// origin); nil for a URL with no host. What the item cache's backoff is kept by, and what a
    /// storage's headers are limited to.
    package var httpOrigin: String? {
        guard let components = URLComponents(url: self, resolvingAgainstBaseURL: true),
            let scheme = components.scheme?.lowercased(), let host = components.host?.lowercased(), !host.isEmpty
        else { return nil }
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        let port = components.port.flatMap { $0 == defaultPort ? nil : $0 }
        return scheme + "://" + host + (port.map { ":\($0)" } ?? "")
    }
}
