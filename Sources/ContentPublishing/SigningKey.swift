import Crypto
internal import DateText
import Foundation
import StorageFormat

/// The publisher's ed25519 signing key: it signs `cacheStatus.json`, and its public half is what
/// clients trust. Only the publishing target can sign; a syncing app links none of this.
public struct SigningKey: Sendable {
    /// The raw key.
    public let key: Curve25519.Signing.PrivateKey

    /// A new random key.
    public init() {
        key = Curve25519.Signing.PrivateKey()
    }

    /// Reads a private key file: an optional label line, then one line of base64 of the 32-byte
    /// raw key. A file labelled as a public key is refused by name.
    public init(fileText text: String) throws(PublishError) {
        let (kind, line) = StatusSignature.read(text)
        if kind == .publicKey {
            throw PublishError(
                code: .configuration,
                message:
                    "this is an ed25519 public key, which only verifies; signing needs the private key it was made with",
                option: .signingKey)
        }
        guard let data = Data(base64Encoded: line),
            let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: data)
        else {
            throw PublishError(
                code: .configuration, message: "not an ed25519 private key (expected one line of base64 of 32 bytes)",
                option: .signingKey)
        }
        self.key = key
    }

    /// The private key file's text: a label line, then one line of base64 of the raw key.
    public var fileText: String {
        StatusSignature.privateKeyLabel + "\n" + key.rawRepresentation.base64EncodedString() + "\n"
    }

    /// The public key file's text, what clients trust (`StatusSignature.fileText(of:)`).
    public var publicKeyFileText: String { StatusSignature.fileText(of: key.publicKey) }

    /// The key id clients see in signatures.
    public var keyID: String { StatusSignature.keyID(of: key.publicKey) }

    /// The status object with its signature (value included) added, valid until `expires`.
    func sign(_ status: JSONValue, expires: Date) throws(PublishError) -> JSONValue {
        guard case .object(var members) = status else {
            throw PublishError(code: .invalidStorage, message: "a status must be an object to be signed")
        }
        var signature: [String: JSONValue] = [
            "alg": .string("ed25519"),
            "keyId": .string(keyID),
            // Whole seconds, rounded up: never earlier than asked, so no lifetime ends before it is written.
            "expires": .string(
                InternetDateTime.format(Date(timeIntervalSince1970: expires.timeIntervalSince1970.rounded(.up)))),
        ]
        members["signature"] = .object(signature)
        let payload = JSONValue.object(members).canonicalData
        guard let value = try? key.signature(for: payload) else {
            throw PublishError(code: .configuration, message: "signing the status failed", option: .signingKey)
        }
        signature["value"] = .string(value.base64EncodedString())
        members["signature"] = .object(signature)
        return .object(members)
    }
}
