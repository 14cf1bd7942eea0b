import ArgumentParser
import ContentSync
import Foundation

/// A failure the CLI reports as one line on stderr with a specific exit code.
struct CLIFailure: Error, CustomStringConvertible {
    var code: Int32
    var message: String

    init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }

    init(_ error: any Error) {
        guard let error = error as? SyncError else {
            self.init(code: 1, message: "\(error)")
            return
        }
        let code: Int32
        switch error.code {
        case .network: code = 3
        // The storage is at fault: malformed, unsafe, or not what its own integrity data or
        // signature says (including a file over its declared size, and a missing signature).
        case .invalidStatus, .invalidUpdateList, .invalidChangeList, .unsafePath, .archive, .integrity: code = 4
        case .fileSystem, .insufficientSpace, .stateStore: code = 5
        case .configuration: code = 6
        case .cancelled, .connectionNotAllowed: code = 130
        default: code = 1
        }
        self.init(code: code, message: error.message)
    }

    var description: String { message }
}

extension CLIFailure {
    /// Prints the reason as one line and exits with the code.
    func exit() -> Never {
        let line = message.replacingOccurrences(of: "\n", with: " ")
        Console.standardError("sync-agent: \(line)\n")
        Foundation.exit(code)
    }
}
