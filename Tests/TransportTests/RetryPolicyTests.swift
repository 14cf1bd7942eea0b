import Foundation
import Testing
import Transport

@Suite(.timeLimit(.minutes(3)))
struct RetryPolicyTests {
    static let policy: RetryPolicy = {
        var policy = RetryPolicy()
        policy.maxAttempts = 8
        policy.baseDelay = .milliseconds(100)
        policy.maxDelay = .seconds(1)
        policy.maxRetryAfter = .seconds(10)
        return policy
    }()

    static func status(_ code: Int, retryAfter: Double? = nil) -> TransportError {
        TransportError(code: .httpStatus, message: "HTTP \(code)", statusCode: code, retryAfter: retryAfter)
    }

    static func failure(_ code: TransportError.Code) -> TransportError {
        TransportError(code: code, message: "\(code)")
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var error: TransportError
        var attempt: Int
        var jitter: Double
        /// Expected delay in milliseconds, or nil for "give up".
        var expected: Double?
        var testDescription: String {
            "\(error.code) \(error.statusCode.map(String.init) ?? "") attempt \(attempt) jitter \(jitter)"
        }
    }

    @Test(arguments: [
        // Not transient: never retried.
        Case(error: status(404), attempt: 1, jitter: 0, expected: nil),
        Case(error: status(403), attempt: 1, jitter: 0, expected: nil),
        Case(error: status(416), attempt: 1, jitter: 0, expected: nil),
        Case(error: failure(.tooLarge), attempt: 1, jitter: 0, expected: nil),
        Case(error: failure(.fileSystem), attempt: 1, jitter: 0, expected: nil),
        Case(error: failure(.cancelled), attempt: 1, jitter: 0, expected: nil),
        Case(error: failure(.invalidRequest), attempt: 1, jitter: 0, expected: nil),
        // Attempts exhausted: attempt 8 of 8 was the last.
        Case(error: status(503), attempt: 8, jitter: 0, expected: nil),
        Case(error: failure(.network), attempt: 9, jitter: 0, expected: nil),
        // Exponential growth: base × 2^(attempt-1), scaled by 0.5 + jitter/2.
        Case(error: status(503), attempt: 1, jitter: 0, expected: 50),
        Case(error: failure(.network), attempt: 2, jitter: 0, expected: 100),
        Case(error: failure(.timeout), attempt: 3, jitter: 0, expected: 200),
        Case(error: status(500), attempt: 4, jitter: 0, expected: 400),
        Case(error: status(502), attempt: 1, jitter: 0.5, expected: 75),
        Case(error: status(504), attempt: 2, jitter: 0.999, expected: 199.9),
        Case(error: status(408), attempt: 1, jitter: 0, expected: 50),
        // Capped at maxDelay before jitter: 100 ms × 2^4 = 1.6 s → 1 s.
        Case(error: status(503), attempt: 5, jitter: 0, expected: 500),
        Case(error: status(503), attempt: 7, jitter: 0.999, expected: 999.5),
        // Retry-After wins when longer than the backoff, and loses when shorter.
        Case(error: status(429, retryAfter: 3), attempt: 1, jitter: 0, expected: 3_000),
        Case(error: status(503, retryAfter: 2), attempt: 4, jitter: 0, expected: 2_000),
        Case(error: status(429, retryAfter: 0.01), attempt: 3, jitter: 0, expected: 200),
        Case(error: status(429, retryAfter: 10), attempt: 1, jitter: 0, expected: 10_000),
        // Retry-After past maxRetryAfter: give up rather than wait.
        Case(error: status(429, retryAfter: 11), attempt: 1, jitter: 0, expected: nil),
        Case(error: status(503, retryAfter: 3_600), attempt: 1, jitter: 0, expected: nil),
        // Past any duration (a hostile server's number, or a caller's infinity): give up, never trap.
        Case(error: status(503, retryAfter: 1e300), attempt: 1, jitter: 0, expected: nil),
        Case(error: status(503, retryAfter: 1e16), attempt: 1, jitter: 0, expected: nil),
        Case(error: status(503, retryAfter: .infinity), attempt: 1, jitter: 0, expected: nil),
        Case(error: status(503, retryAfter: .nan), attempt: 1, jitter: 0, expected: nil),
        Case(error: status(503, retryAfter: -1), attempt: 1, jitter: 0, expected: 50),
    ])
    func delayFollowsBackoffCapAndRetryAfter(_ row: Case) {
        let delay = Self.policy.delay(after: row.error, attempt: row.attempt, jitter: row.jitter)
        guard let expected = row.expected else {
            #expect(delay == nil)
            return
        }
        let milliseconds = delay.map {
            Double($0.components.seconds) * 1_000 + Double($0.components.attoseconds) / 1e15
        }
        #expect(milliseconds.map { abs($0 - expected) < 0.01 } == true, "got \(String(describing: milliseconds)) ms")
    }

    @Test func delayNeverExceedsMaxDelayEvenForHugeAttemptNumbers() {
        var policy = Self.policy
        policy.maxAttempts = .max
        for attempt in [10, 21, 22, 64, 1_000] {
            let delay = policy.delay(after: Self.status(503), attempt: attempt, jitter: 0.999)
            #expect(delay != nil)
            #expect(delay.map { $0 <= .seconds(1) } == true, "attempt \(attempt)")
        }
    }

    /// A policy that waits for any `Retry-After` (`maxRetryAfter` as long as a `Duration` goes)
    /// takes one past `Int64` milliseconds as the wait it is, without a trap.
    @Test func aLimitlessPolicyWaitsAsLongAsAsked() {
        var policy = Self.policy
        policy.maxRetryAfter = .seconds(Int64.max)
        #expect(policy.delay(after: Self.status(503, retryAfter: 1e17), attempt: 1, jitter: 0) == .seconds(1e17))
        #expect(policy.delay(after: Self.status(503, retryAfter: 1e300), attempt: 1, jitter: 0) == nil)
    }

    @Test func noneAllowsASingleAttempt() {
        #expect(RetryPolicy.none.maxAttempts == 1)
        #expect(RetryPolicy.none.delay(after: Self.status(503), attempt: 1, jitter: 0) == nil)
        #expect(RetryPolicy().delay(after: Self.status(503), attempt: 1, jitter: 0) == .milliseconds(125))
    }

    @Test(arguments: [
        ("120", 120.0),
        ("0", 0.0),
        (" 5 ", 5.0),
        ("1.5", 1.5),
    ])
    func parseRetryAfterReadsDeltaSeconds(_ value: String, _ expected: Double) {
        #expect(RetryPolicy.parseRetryAfter(value) == expected)
    }

    @Test func parseRetryAfterReadsAnHTTPDateRelativeToNow() throws {
        // Wed, 21 Oct 2015 07:28:00 GMT
        let date = Date(timeIntervalSince1970: 1_445_412_480)
        let header = "Wed, 21 Oct 2015 07:28:00 GMT"

        #expect(RetryPolicy.parseRetryAfter(header, now: date.addingTimeInterval(-90)) == 90)
        #expect(RetryPolicy.parseRetryAfter(header, now: date) == 0)
        // A date already past means "now", never a negative wait.
        #expect(RetryPolicy.parseRetryAfter(header, now: date.addingTimeInterval(3_600)) == 0)
    }

    @Test(arguments: [
        "", "soon", "-5", "21 Oct 2015", "Wed, 32 Oct 2015 07:28:00 GMT", "inf", "-inf", "infinity", "nan",
    ])
    func parseRetryAfterRejectsNonsense(_ value: String) {
        #expect(RetryPolicy.parseRetryAfter(value) == nil)
    }
}
