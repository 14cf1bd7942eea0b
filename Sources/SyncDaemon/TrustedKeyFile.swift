import FileKit
import Foundation
import StorageFormat

/// A publisher's public key file (from `sync-agent keygen`), as `--trust-key` and a config
/// file's `trust-key:` name it: read and checked once, for both.
public enum TrustedKeyFile {
    /// What is wrong with a key file and how to fix it; callers put the setting's name in front.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        /// `/etc/k.pub: …; make a pair with …`.
        public var description: String
    }

    /// The key's text (base64 of the 32-byte ed25519 public key). A private key is refused
    /// (labelled, or an unlabelled file readable by its owner only with a `.pub` beside it), so
    /// that it is never handed to a client.
    public static func read(_ path: String) throws(Problem) -> String {
        let text: String
        do {
            text = try SmallTextFile.read(path)
        } catch {
            throw Problem(
                description:
                    "\(path) \(error); give the publisher's public key file (FILE.pub from `sync-agent keygen --out FILE`)"
            )
        }
        do {
            _ = try StatusSignature.publicKey(base64: text)
        } catch {
            throw Problem(
                description:
                    "\(path): \(error.message); make a pair with `sync-agent keygen --out FILE` and give FILE.pub")
        }
        var info = stat()
        if !text.contains("#"), stat(path, &info) == 0, info.st_mode & 0o077 == 0,
            FileManager.default.fileExists(atPath: path + ".pub")
        {
            throw Problem(
                description:
                    "\(path) looks like a private key (readable by its owner only, with \(path).pub beside it); give \(path).pub, the public key"
            )
        }
        return text
    }
}
