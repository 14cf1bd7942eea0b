/// What a `Range` request header asks of a file of a given size (RFC 9110 §14).
///
/// Only single byte ranges are honoured. A multi-range or malformed header is ignored and the
/// whole file is served, which RFC 9110 permits and which is what the client code must cope with
/// when a real host does the same.
enum ByteRange: Hashable, Sendable {
    /// Serve the whole file with 200.
    case whole
    /// Serve these bytes with 206.
    case partial(Range<Int>)
    /// Answer 416 with `Content-Range: bytes */size`.
    case unsatisfiable

    init(header: String?, size: Int) {
        guard let header else {
            self = .whole
            return
        }
        let value = header.trimmingWhitespace()
        guard value.lowercased().hasPrefix("bytes=") else {
            self = .whole
            return
        }
        let spec = value.dropFirst("bytes=".count).trimmingWhitespace()
        guard !spec.contains(","),
            let dash = spec.firstIndex(of: "-")
        else {
            self = .whole
            return
        }
        let first = String(spec[..<dash])
        let last = String(spec[spec.index(after: dash)...])

        switch (Self.position(first), Self.position(last)) {
        case (let start?, let end?):
            guard start <= end else {
                self = .whole
                return
            }
            // `end` may be Int.max: clamped before the + 1 (it trapped `serve`).
            self = start < size ? .partial(start..<(min(end, size - 1) + 1)) : .unsatisfiable
        case (let start?, nil) where last.isEmpty:
            self = start < size ? .partial(start..<size) : .unsatisfiable
        case (nil, let suffix?) where first.isEmpty:
            self = suffix > 0 && size > 0 ? .partial(max(0, size - suffix)..<size) : .unsatisfiable
        default:
            self = .whole
        }
    }

    /// A byte position: ASCII digits only, so `+5` or ` 5` are not positions.
    private static func position(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's optional whitespace).
    func trimmingWhitespace() -> String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !isBlank($0) }),
            let end = lastIndex(where: { !isBlank($0) })
        else { return "" }
        return String(self[start...end])
    }
}
