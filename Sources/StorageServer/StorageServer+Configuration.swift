extension StorageServer {
    /// How a ``StorageServer`` listens, streams and misbehaves.
    public struct Configuration: Sendable {
        /// TCP port on 127.0.0.1; 0 lets the system pick a free one. Default 0.
        public var port: UInt16 = 0
        /// Bytes read from disk and written to the socket at a time. Default 64 KiB.
        public var chunkSize = 64 * 1024
        /// Body bytes a ``Fault/stall`` response sends before going silent. Default 100.
        public var stallAfterBytes = 100
        /// Longest a ``Fault/stall`` response holds its connection before closing it. Default 60 s.
        public var stallLimit: Duration = .seconds(60)
        /// Unused: ``StorageServer/start()`` binds and listens before it returns, so there is
        /// nothing to wait for. Kept so that code setting it still builds.
        @available(*, deprecated, message: "start() listens before it returns; remove the setting")
        public var startTimeout: Duration = .seconds(180)
        /// What one client may hold: the head's size and time, idle connections, how many are open.
        var limits = Connections.Limits()

        /// A configuration with every default, listening on `port`.
        public init(port: UInt16 = 0) {
            self.port = port
        }
    }
}
