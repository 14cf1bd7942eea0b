import PercentDecoding

/// A request target's path, percent-decoded and checked so that it cannot leave the served root.
///
/// The check refuses rather than repairs: a request for `/a/../b` is answered 404 like any other
/// name the root does not hold, which is what a static host does for names it never published.
struct RequestPath: Hashable, Sendable {
    /// The decoded path components, each non-empty, none `.` or `..`, none holding `/` or NUL.
    let components: [String]

    /// The decoded path with a leading `/`, as recorded in the request log and matched by faults.
    var decoded: String { "/" + components.joined(separator: "/") }

    /// Decodes the raw, still percent-encoded path of a request target (the part before `?`).
    /// Returns `nil` for anything that is not a plain path below the root.
    init?(percentEncoded raw: String) {
        guard raw.utf8.first == UInt8(ascii: "/") else { return nil }
        let body = Substring(raw.utf8.dropFirst())
        if body.isEmpty {
            components = []
            return
        }
        var parts: [String] = []
        // Split on the "/" byte, not the Character: "/" plus a combining mark is one Character.
        for encoded in body.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(
            Substring.init)
        {
            // Decoding happens per component so that `%2F` can never act as a separator.
            guard !encoded.isEmpty,
                let part = PercentDecoding.decode(encoded),
                part != ".", part != "..",
                !part.utf8.contains(UInt8(ascii: "/")), !part.utf8.contains(0)
            else { return nil }
            parts.append(part)
        }
        components = parts
    }

    /// The best readable form of a path that failed the checks, for the request log.
    static func loggable(_ raw: String) -> String {
        PercentDecoding.decode(raw) ?? raw
    }
}
