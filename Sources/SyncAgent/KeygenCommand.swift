import ArgumentParser
import ContentPublishing
import ContentSync
import Crypto
import FileKit
import Foundation
import StorageFormat

/// `sync-agent keygen`: an ed25519 key pair for signing storages.
struct KeygenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract:
            "Make an ed25519 key pair: FILE (private, mode 0600) and FILE.pub, each a label line and a line of base64.")

    @Option(name: .long, help: "The private key file to create (the public key goes to FILE.pub).")
    var out: String

    func run() async throws {
        // Neither file is ever replaced: clients may trust the public one, and the private one
        // may be the only copy. A link at either name counts as taken (it is not followed).
        for path in [out, out + ".pub"] {
            var info = stat()
            if lstat(path, &info) == 0 {
                throw CLIFailure(
                    code: 6, message: "\(path) exists; refusing to overwrite a key: give --out another name")
            }
        }
        let key = SigningKey()
        try Self.create(out, text: key.fileText, mode: 0o600)
        do {
            try Self.create(out + ".pub", text: key.publicKeyFileText, mode: 0o644)
        } catch {
            // No private key without its public one.
            unlink(out)
            throw error
        }
        try Console.output("private key: \(out)\npublic key:  \(out).pub (key id \(key.keyID))\n")
    }

    /// Creates `path` (never an existing file or link) with `text` and `mode`, flushed; a file
    /// that could not be written whole is removed.
    private static func create(_ path: String, text: String, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else {
            let code: Int32 = errno == EEXIST ? 6 : 5
            throw CLIFailure(code: code, message: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced else {
            unlink(path)
            throw CLIFailure(code: 5, message: "cannot write \(path): check the free space of its folder")
        }
    }
}
