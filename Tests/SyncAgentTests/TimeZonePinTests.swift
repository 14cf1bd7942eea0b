import Testing

@testable import SyncAgent

/// `sync-agent` sets `TZ` only where the operator left it unset (see `SyncAgent.pinTimeZone`).
@Suite struct TimeZonePinTests {
    @Test(
        arguments: [
            (nil, ":/etc/localtime"),
            ("UTC", nil),
            ("Europe/Berlin", nil),
            ("", nil), // set, even if empty: glibc then means UTC, and that is the operator's choice
        ] as [(String?, String?)])
    func anUnsetZoneIsPinnedToTheSystemsFileAndAnyOtherIsLeft(current: String?, pinned: String?) {
        #expect(SyncAgent.pinnedTimeZone(current: current) == pinned)
    }
}
