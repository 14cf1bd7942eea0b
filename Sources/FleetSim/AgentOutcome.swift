/// What one agent did in a run: its checks, failures and updates, and where it ended. The JSON
/// report holds one per agent; the summary aggregates them.
struct AgentOutcome: Codable, Sendable {
    /// One check that changed the folder.
    struct Update: Codable, Sendable {
        /// When the check started, in seconds since the run's start.
        var start: Double
        /// How long the check took, in seconds.
        var seconds: Double
        /// `replayed` or `restored`.
        var outcome: String
        var from: String?
        var to: String
        /// Content files downloaded (for a restore: extracted from the archive).
        var files: Int
        /// Content bytes downloaded.
        var bytes: Int64
    }

    var agent: Int
    var checks = 0
    var failures = 0
    var upToDate = 0
    var replayed = 0
    var restored = 0
    /// When each check started, in seconds since the run's start (rounded to milliseconds).
    var checkStarts: [Double] = []
    var updates: [Update] = []
    /// The newest failure's message, if any check failed.
    var lastError: String?
    /// Whether the newest check succeeded (false also when the agent never checked).
    var lastCheckSucceeded = false
    /// The agent stopped early on an error that retrying cannot fix, as `watch` does.
    var stoppedOnPermanentError = false
    /// The version the folder held at the end (nil: none).
    var finalVersion: String?
}
