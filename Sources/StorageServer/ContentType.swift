/// The `Content-Type` a static host would send for a file name, chosen by extension.
enum ContentType {
    static let fallback = "application/octet-stream"

    private static let byExtension: [String: String] = [
        "json": "application/json",
        "txt": "text/plain; charset=utf-8",
        "md": "text/markdown; charset=utf-8",
        "html": "text/html; charset=utf-8",
        "htm": "text/html; charset=utf-8",
        "css": "text/css; charset=utf-8",
        "js": "text/javascript; charset=utf-8",
        "xml": "application/xml",
        "plist": "application/xml",
        "csv": "text/csv; charset=utf-8",
        "zip": "application/zip",
        "gz": "application/gzip",
        "tar": "application/x-tar",
        "pdf": "application/pdf",
        "png": "image/png",
        "jpg": "image/jpeg",
        "jpeg": "image/jpeg",
        "gif": "image/gif",
        "webp": "image/webp",
        "svg": "image/svg+xml",
        "mp3": "audio/mpeg",
        "mp4": "video/mp4",
        "wasm": "application/wasm",
    ]

    /// The type for `name`, matching its extension case-insensitively.
    static func forFileName(_ name: String) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return fallback }
        let ext = name[name.index(after: dot)...].lowercased()
        return byExtension[ext] ?? fallback
    }
}
