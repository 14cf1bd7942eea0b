import ArgumentParser
import ContentPublishing
import ContentSync
import FileKit
import Foundation
import Logging
import StorageFormat
import SyncDaemon
import Synchronization
import Transport

/// A failure the CLI reports as one line on stderr with a specific exit code.
package struct CLIFailure: Error, CustomStringConvertible {
    package var code: Int32
    package var message: String

    package init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }

    init(_ error: any Error) {
        if let error = error as? PublishError {
            self.init(publish: error)
            return
        }
        if let error = error as? StorageFormatError {
            self.init(SyncError(error))
            return
        }
        guard let error = error as? SyncError else {
            self.init(code: 1, message: "\(error)")
            return
        }
        let code: Int32
        switch error.code {
        case .network: code = 3
        // The storage is at fault: malformed, unsafe, or not what its own integrity data or
        // signature says (including a file over its declared size, and a missing signature).
        case .invalidStatus, .invalidUpdateList, .invalidChangeList, .unsafePath, .archive, .integrity, .signature:
            code = 4
        case .fileSystem, .insufficientSpace, .stateStore: code = 5
        case .configuration, .busy: code = 6
        case .cancelled, .connectionNotAllowed: code = 130
        // The operator's own pre-switch hook refused the new version: nothing is broken, the folder kept its version.
        case .vetoed: code = 10
        default: code = 1
        }
        let hint = error.remedy.map(Self.hint(for:)) ?? error.setting.map(Self.hint(for:)) ?? Self.hint(for: error.code)
        self.init(code: code, message: hint.map { error.message + "; " + $0 } ?? error.message)
    }

    /// What the CLI adds to the library's message: the command or option that helps, which the
    /// library does not know about.
    static func hint(for code: SyncError.Code) -> String? {
        switch code {
        case .busy: "`sync-agent status` with the same --dir names the process"
        case .stateStore: "the state database is the file --state names (by default one per --dir)"
        default: nil
        }
    }

    /// The command that performs a library remedy.
    static func hint(for remedy: SyncError.Remedy) -> String {
        switch remedy {
        case .reset: "`sync-agent reset` with the same --dir and --state resets it"
        }
    }

    /// The option that sets a library setting, and how it helps.
    static func hint(for setting: SyncConfiguration.Setting) -> String {
        switch setting {
        case .baseURL: "see --base-url"
        case .contentDirectory: "see --dir"
        case .stateDatabasePath: "pass --state elsewhere"
        case .allowReplacingUnknownContent: "--force (in a watch config, `force: true`) allows replacing it"
        case .trustedSigningKeys:
            "give the storage's public key with --trust-key, or run `sync-agent forget-keys` with the same --dir and --state to accept an unsigned storage"
        case .verifyIntegrity:
            "the CLI always checks integrity data; only the library's SyncConfiguration.verifyIntegrity turns it off"
        }
    }

    /// A publish failure: the content or the storage at fault exits 4, like a sync's.
    init(publish error: PublishError) {
        let code: Int32
        switch error.code {
        case .invalidContent, .invalidStorage, .archive: code = 4
        case .fileSystem, .insufficientSpace: code = 5
        case .configuration, .busy: code = 6
        case .interrupted: code = 130
        // Published here, not on the remote: running the same publish again uploads it.
        case .upload: code = 11
        default: code = 1
        }
        let message = Self.namingFlags(error.message)
        self.init(code: code, message: error.option.map { "\(Self.flag(for: $0)): " + message } ?? message)
    }

    /// The library settings its messages name, and the flags that set them here.
    static let settingFlags = [
        ("PublishOptions.initialize", "--init"), ("CacheConfiguration.diskLimit", "--max-size"),
        ("CacheConfiguration.sharing = .group", "--shared-group"),
    ]

    /// `message` with each library setting it names written as its flag: the library's
    /// messages name no CLI flag, and an operator has no use for the API's name
    /// (`CacheConfiguration.diskLimit` → `--max-size`).
    static func namingFlags(_ message: String) -> String {
        settingFlags.reduce(message) { text, pair in
            text.replacingOccurrences(of: pair.0, with: pair.1)
        }
    }

    /// The `publish` flag that sets a library option.
    static func flag(for option: PublishOptions.Option) -> String {
        switch option {
        case .storage: "--storage"
        case .content: "--content"
        case .version: "--version"
        case .minimal: "--minimal"
        case .baseURL: "--base-url"
        case .initialize: "--init"
        case .dryRun: "--dry-run"
        case .signingKey: "--sign-key"
        }
    }

    package var description: String { message }
}

extension CLIFailure {
    /// Prints the reason as one line and exits with the code.
    func exit() -> Never {
        // Redacted here too, whatever built the message: a URL's password or token never shows.
        // One line: a list of problems joins with spaces, and any other control character a
        // storage or server wrote into the message is escaped.
        let line = LogText.escaped(Redaction.text(message).replacingOccurrences(of: "\n", with: " "))
        if let logger = Self.fatalLogger.withLock({ $0 }) {
            // In the log format the command chose (`watch`): journald gets its priority, a JSON
            // reader an object, not a bare text line at info priority.
            logger.critical("sync-agent: \(line)")
        } else {
            Console.standardError("sync-agent: \(line)\n")
        }
        Foundation.exit(code)
    }

    /// The logger ``exit()`` writes its line through, once a command chose a log format
    /// (`watch`); nil: a plain line on stderr.
    static let fatalLogger = Mutex<Logger?>(nil)
}
