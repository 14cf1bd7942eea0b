import Testing
@Test func placeholderContentSyncTests() { #expect(1 + 1 == 2) }
