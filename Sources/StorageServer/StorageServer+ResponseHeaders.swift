extension StorageServer {
    /// Sends `headers` with every answer that serves the file at `path` (decoded, with or without
    /// a leading `/`, such as `/a b.json`), replacing the headers set for that path before; `[:]`
    /// removes them.
    ///
    /// Use it for caching headers such as `Cache-Control`, `Expires`, `Age` or `Vary`. They go on
    /// the 200, 206, 304 and 416 answers for the file, not on a 404, a redirect or a
    /// ``Fault/status(_:headers:body:)`` answer. A header of the same name the server sends
    /// itself, such as `ETag` or `Last-Modified`, is replaced, though conditional requests are
    /// still judged by the file's own tag and time.
    ///
    /// - Precondition: `headers` holds no `Content-Length`, `Content-Range` or
    ///   `Transfer-Encoding`: they frame the body, which faults such as
    ///   ``Fault/misstatedLength(claimed:)`` misstate instead.
    public func setResponseHeaders(_ headers: [String: String], forPath path: String) {
        for name in headers.keys {
            Self.checkNotFraming(name, caller: "setResponseHeaders(_:forPath: \"\(path)\")")
        }
        state.setResponseHeaders(headers, for: Self.decodedPath(path))
    }

    /// The headers ``setResponseHeaders(_:forPath:)`` and ``setCacheControl(_:forPath:)`` set for
    /// `path`, without ``defaultCacheControl``.
    public func responseHeaders(forPath path: String) -> [String: String] {
        state.responseHeaders(for: Self.decodedPath(path))
    }

    /// Sends `Cache-Control: value` with every answer that serves the file at `path` (decoded,
    /// with or without a leading `/`), in place of ``defaultCacheControl``; `nil` removes it, so
    /// the path falls back to the default.
    ///
    /// The header travels with the path's other ``setResponseHeaders(_:forPath:)`` headers,
    /// which it leaves alone.
    public func setCacheControl(_ value: String?, forPath path: String) {
        state.setResponseHeader("Cache-Control", to: value, for: Self.decodedPath(path))
    }

    /// The `Cache-Control` sent with every file answer whose path sets none with
    /// ``setCacheControl(_:forPath:)`` or ``setResponseHeaders(_:forPath:)``; `nil`, the default,
    /// sends none.
    public var defaultCacheControl: String? {
        get { state.defaultCacheControl }
        set { state.defaultCacheControl = newValue }
    }

    private static func checkNotFraming(_ name: String, caller: String) {
        let lowered = name.lowercased()
        guard lowered != "content-length", lowered != "content-range", lowered != "transfer-encoding" else {
            preconditionFailure(
                "StorageServer.\(caller): '\(name)' frames the body and cannot be set; use a Fault such as .misstatedLength or .shiftedRange to misstate it"
            )
        }
    }
}
