/// Why a ``StorageServer`` could not start, or stopped serving.
public struct StorageServerError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case rootNotFound
            case alreadyStarted
            case listenFailed
            case stoppedServing
        }

        private let value: Value

        /// The root folder is missing or is not a folder.
        public static let rootNotFound = Code(value: .rootNotFound)
        /// ``StorageServer/start()`` was called on a server that is starting or running.
        public static let alreadyStarted = Code(value: .alreadyStarted)
        /// The socket could not be bound or did not start listening in time.
        public static let listenFailed = Code(value: .listenFailed)
        /// The server stopped by itself while serving: accepting connections failed in a way it
        /// cannot wait out (running out of descriptors is waited out, and does not end it).
        public static let stoppedServing = Code(value: .stoppedServing)

        public var description: String { "\(value)" }
    }

    /// The kind of failure.
    public var code: Code
    /// What went wrong and how to fix it.
    public var message: String
    /// The error underneath, such as the failed socket call.
    public var underlying: (any Error)?

    /// An error of `code` with `message`, wrapping `underlying` when there is one.
    public init(code: Code, message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String {
        guard let underlying else { return message }
        return "\(message) (\(underlying))"
    }
}
