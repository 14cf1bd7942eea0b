import Foundation

extension JSONValue {
    /// Parses a storage file that must be a JSON object, failing with `code` and a message that
    /// names the file and says what the publisher must fix.
    package static func parseStorageDocument(_ data: Data, name: String, code: StorageFormatError.Code)
        throws(StorageFormatError) -> JSONValue
    {
        let root: JSONValue
        do {
            root = try JSONValue.parse(data)
        } catch {
            throw StorageFormatError(
                code: code, message: "\(name): \(error); the storage must publish valid JSON", underlying: error)
        }
        guard case .object = root else {
            throw StorageFormatError(
                code: code,
                message: "\(name): expected a JSON object, found \(root.kindName); the storage must publish an object")
        }
        return root
    }
}
