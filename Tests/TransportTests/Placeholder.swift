import Testing
@Test func placeholderTransportTests() { #expect(1 + 1 == 2) }
