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
        /// Longest ``StorageServer/start()`` waits for the socket to listen. Default 3 minutes: a
        /// hang detector only, since a socket that cannot bind (a port in use) fails `start()` at
        /// once; a shorter one failed starts that only waited for a thread on a loaded machine.
        public var startTimeout: Duration = .seconds(180)

        /// A configuration with every default, listening on `port`.
        public init(port: UInt16 = 0) {
            self.port = port
        }
    }
}
