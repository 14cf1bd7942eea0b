import ContentSync
import Synchronization
import Testing

/// Every event a manager sends from the moment of subscription, for tests that wait for a
/// point in an update ("three files downloaded") or check what an observer was told.
final class EventLog: Sendable {
    private let events = Mutex<[CacheManagerEvent]>([])

    /// Subscribes to `manager`'s events now.
    static func recording(_ manager: CacheManager) async -> EventLog {
        let log = EventLog()
        let stream = await manager.events()
        Task { [weak log] in
            for await event in stream {
                guard let log else { return }
                log.events.withLock { $0.append(event) }
            }
        }
        return log
    }

    /// The events so far, by name: `stateChanged(working)`, `progress`, `finished(1.4)`, `failed(network)`, …
    var names: [String] {
        events.withLock { $0.map(Self.name) }
    }

    /// The events so far, progress left out.
    var outcomes: [String] {
        names.filter { $0 != "progress" }
    }

    static func name(_ event: CacheManagerEvent) -> String {
        switch event {
        case .stateChanged(let state): "stateChanged(\(state))"
        case .progress: "progress"
        case .connectionNotAllowed: "connectionNotAllowed"
        case .suspended: "suspended"
        case .finished(let report): "finished(\(report.toVersion))"
        case .failed(let error): "failed(\(error.code))"
        }
    }

    /// Waits until an event satisfies `condition`; records an issue after 20 s.
    func waitFor(
        _ what: Comment, sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: (CacheManagerEvent) -> Bool
    ) async throws {
        for _ in 0..<1000 {
            if events.withLock({ $0.contains(where: condition) }) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("never saw \(what); events: \(names)", sourceLocation: sourceLocation)
    }

    /// Waits until a replay's progress says `count` files are downloaded.
    func waitForDownloadedFiles(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await waitFor("\(count) files downloaded", sourceLocation: sourceLocation) { event in
            if case .progress(let progress) = event {
                progress.phase == .downloadingFiles && progress.filesDone >= count
            } else {
                false
            }
        }
    }
}

/// Publishes 1.4 to a host whose client holds 1.2. The replay downloads six files; the three
/// under styles/ stall (only the first time each is asked for), so an update started now stays
/// mid-download once the other three have arrived.
func publishVersionThatStalls(_ host: ExampleHost) {
    host.publish("1.4")
    host.server.injectFault(.stall, times: 3, where: { $0.hasPrefix("/RXCacheContent/styles/") })
    host.server.resetLog()
}
