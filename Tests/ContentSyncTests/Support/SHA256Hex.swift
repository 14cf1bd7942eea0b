import ContentPublishing
import Crypto
import FileKit
import Foundation
import StorageFormat

enum SHA256Hex {
    static func of(file path: String) -> String {
        let data = FileManager.default.contents(atPath: path) ?? Data()
        return of(data)
    }

    static func of(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }
}
