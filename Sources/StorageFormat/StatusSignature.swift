import Crypto
internal import DateText
import FileKit
import Foundation

/// Ed25519 signatures over `cacheStatus.json` (TUF-style, optional): the client's half, reading
/// public keys and verifying. Signing is the publisher's (`SigningKey` in ContentPublishing).
///
/// The status carries `"signature": {"alg": "ed25519", "keyId": …, "expires": RFC 3339, "value": base64}`.
/// The signed bytes are ``JSONValue/canonicalData`` of the whole status with only
/// `signature.value` removed, so the expiry and key id are covered too.
public enum StatusSignature {
    /// A key's id: the first 16 hex digits of the SHA-256 of its raw public key.
    public static func keyID(of key: Curve25519.Signing.PublicKey) -> String {
        String(FileDigest.sha256(key.rawRepresentation).prefix(16))
    }

    /// What a key file says it holds.
    public enum KeyKind: Sendable, Equatable {
        /// The signing key: it stays with the publisher.
        case privateKey
        /// The verifying key: clients trust it.
        case publicKey
    }

    /// The first line of a private key file.
    package static let privateKeyLabel =
        "# content-sync ed25519 private key: it signs storages; keep it secret and give clients the public key"
    /// The first line of a public key file, before the key id.
    package static let publicKeyLabel = "# content-sync ed25519 public key"

    /// A public key file's text: a label line with the key id, then one line of base64 of the raw key.
    public static func fileText(of key: Curve25519.Signing.PublicKey) -> String {
        publicKeyLabel + " (key id \(keyID(of: key)))\n" + key.rawRepresentation.base64EncodedString() + "\n"
    }

    /// The kind a key file's label names (nil for a bare line of base64, as older files are) and
    /// its base64 line.
    package static func read(_ text: String) -> (kind: KeyKind?, base64: String) {
        var kind: KeyKind?
        var base64 = ""
        for line in text.split(whereSeparator: \.isNewline).map({ $0.trimmingCharacters(in: .whitespaces) })
        where !line.isEmpty {
            if line.hasPrefix("#") {
                if line.hasPrefix("# content-sync ed25519 private key") { kind = .privateKey }
                if line.hasPrefix(publicKeyLabel) { kind = .publicKey }
            } else if base64.isEmpty {
                base64 = line
            }
        }
        return (kind, base64)
    }

    /// Reads a public key file: an optional label line, then one line of base64 of the 32-byte
    /// raw key. A file labelled as a private key is refused by name, so a signing key is never
    /// handed to clients by mistake.
    public static func publicKey(base64 text: String) throws(StorageFormatError) -> Curve25519.Signing.PublicKey {
        let (kind, line) = read(text)
        if kind == .privateKey {
            throw StorageFormatError(
                code: .invalidKey,
                message: "this is an ed25519 private key, which signs storages and must stay with the publisher; "
                    + "a client trusts the public key, written beside it with the same name plus .pub")
        }
        guard let data = Data(base64Encoded: line), let key = try? Curve25519.Signing.PublicKey(rawRepresentation: data)
        else {
            throw StorageFormatError(
                code: .invalidKey, message: "not an ed25519 public key (expected one line of base64 of 32 bytes)")
        }
        return key
    }

    /// Whether `status` is unsigned, or signed with a key id none of `trustedKeys` has: a refusal
    /// the client's choice of keys decides (an altered or expired signature it does not).
    package static func isSignedByNone(of trustedKeys: [Curve25519.Signing.PublicKey], _ status: JSONValue) -> Bool {
        guard case .object(let members) = status, case .object(let signature)? = members["signature"] else {
            return true
        }
        guard case .string(let keyID)? = signature["keyId"] else { return false } // malformed: the publisher's
        return !trustedKeys.contains { Self.keyID(of: $0) == keyID }
    }

    /// Verifies a status against trusted keys. Throws a message naming what is wrong.
    package static func verify(
        _ status: JSONValue, trustedKeys: [Curve25519.Signing.PublicKey], now: Date, name: String
    ) throws(StorageFormatError) {
        guard case .object(var members) = status, case .object(var signature)? = members["signature"] else {
            throw StorageFormatError(
                code: .signature,
                message: "\(name) is not signed, but this client requires a signature from a trusted key; refusing it")
        }
        guard case .string("ed25519")? = signature["alg"], case .string(let keyID)? = signature["keyId"],
            case .string(let expiresText)? = signature["expires"], case .string(let valueText)? = signature["value"],
            let value = Data(base64Encoded: valueText)
        else {
            throw StorageFormatError(
                code: .signature,
                message:
                    "\(name): the signature is malformed (needs alg ed25519, keyId, expires, value); the publisher must sign it again; refusing it"
            )
        }
        guard let key = trustedKeys.first(where: { Self.keyID(of: $0) == keyID }) else {
            throw StorageFormatError(
                code: .signature,
                message: "\(name) is signed by key \(keyID), which this client does not trust; refusing it")
        }
        signature["value"] = nil
        members["signature"] = .object(signature)
        guard key.isValidSignature(value, for: JSONValue.object(members).canonicalData) else {
            throw StorageFormatError(
                code: .signature,
                message:
                    "\(name) has a wrong signature for key \(keyID): it was altered after signing (by its host, a proxy or an attacker); the publisher must publish it again; refusing it"
            )
        }
        guard let expires = InternetDateTime.parse(expiresText) else {
            throw StorageFormatError(
                code: .signature,
                message:
                    "\(name): signature expiry '\(expiresText)' is not an RFC 3339 time (2026-12-31T23:59:59Z); refusing it"
            )
        }
        if expires < now {
            throw StorageFormatError(
                code: .signature,
                message:
                    "\(name)'s signature expired at \(expiresText); the publisher must re-sign it (a stale or replayed status); refusing it"
            )
        }
    }
}
