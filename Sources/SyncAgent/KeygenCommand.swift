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
        if FileManager.default.fileExists(atPath: out) {
            throw CLIFailure(code: 6, message: "\(out) exists; refusing to overwrite a key")
        }
        let key = SigningKey()
        let fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CLIFailure(code: 5, message: "cannot create \(out): \(String(cString: strerror(errno)))")
        }
        let line = Array(key.fileText.utf8)
        let written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == line.count else { throw CLIFailure(code: 5, message: "cannot write \(out)") }
        try key.publicKeyFileText.write(toFile: out + ".pub", atomically: true, encoding: .utf8)
        Console.print("private key: \(out)\npublic key:  \(out).pub (key id \(key.keyID))")
    }
}
