import Testing

@testable import ContentSync

@Suite("The start gate holds early work until next/ is ready", .timeLimit(.minutes(3)))
struct StartGateTests {
    /// Waiters parked before the gate opens, and those that come after, all get its one decision.
    @Test(arguments: [true, false])
    func everyWaiterGetsTheFirstDecision(go: Bool) async {
        let gate = StartGate()
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask { await gate.wait() }
            }
            // Most of them are parked by now (none can get past a gate that is not open).
            try? await Task.sleep(for: .milliseconds(20))
            gate.open(go)
            gate.open(!go) // only the first decision counts
            var answers: [Bool] = []
            for await answer in group { answers.append(answer) }
            #expect(answers == Array(repeating: go, count: 8))
        }
        #expect(await gate.wait() == go, "a waiter after the gate opened")
    }

    /// A waiter whose task is cancelled is let through with false, whether it was parked before
    /// the cancellation or came after it, and the gate still opens for the others.
    @Test func aCancelledWaiterGetsFalseWithoutTheGateOpening() async {
        let gate = StartGate()
        let parked = Task { await gate.wait() }
        try? await Task.sleep(for: .milliseconds(20))
        parked.cancel()
        #expect(await parked.value == false)
        let late = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await gate.wait()
        }
        #expect(await late.value == false)
        let other = Task { await gate.wait() }
        gate.open(true)
        #expect(await other.value == true)
    }
}
