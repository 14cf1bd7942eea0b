/// Request parameters in the order given, a name as often as it comes (`tag=a&tag=b`): what
/// ``ItemLoader`` merges into a URL's query and ``CacheKey`` into the key.
///
/// Names and values are the decoded text; they are percent-encoded byte for byte (every byte
/// but RFC 3986's unreserved ones), so `a+b` reaches the server as `a%2Bb`, a plus sign, not a
/// space. A dictionary literal works too: `["page": "2"]`; a `[String: String]` is taken in
/// order of its names.
public struct RequestParameters: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    /// The parameters in order.
    public var pairs: [(name: String, value: String)]

    /// Parameters in the order given.
    public init(_ pairs: [(name: String, value: String)] = []) {
        self.pairs = pairs
    }

    /// The parameters of a dictionary, ordered by name.
    public init(_ dictionary: [String: String]) {
        pairs = dictionary.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map {
            (name: $0.key, value: $0.value)
        }
    }

    /// `["name": "value", …]`, in the literal's order.
    public init(dictionaryLiteral elements: (String, String)...) {
        pairs = elements.map { (name: $0.0, value: $0.1) }
    }

    /// Whether there are none.
    public var isEmpty: Bool { pairs.isEmpty }

    /// The query text of the parameters, each name and value percent-encoded byte for byte.
    public var percentEncodedQuery: String {
        pairs.map { CacheKey.encode(Array($0.name.utf8)) + "=" + CacheKey.encode(Array($0.value.utf8)) }.joined(
            separator: "&")
    }

    /// Parameters are equal when they hold the same pairs in the same order.
    public static func == (lhs: RequestParameters, rhs: RequestParameters) -> Bool {
        lhs.pairs.elementsEqual(rhs.pairs) { $0.name == $1.name && $0.value == $1.value }
    }
}
