import Testing
@Test func placeholderArchiveTests() { #expect(1 + 1 == 2) }
