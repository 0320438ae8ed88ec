import Testing

@testable import LogStoreEngine

/// The lock order (historyCompaction → storeState → logState) as the debug-build checker sees it.
@Suite struct LockOrderTests {
    @Test func takingAnInnerLockUnderAnOuterOneIsAllowed() {
        #expect(LockOrder.violation(acquiring: .storeState, holding: []) == nil)
        #expect(LockOrder.violation(acquiring: .storeState, holding: [.historyCompaction]) == nil)
        #expect(LockOrder.violation(acquiring: .logState, holding: [.historyCompaction, .storeState]) == nil)
    }

    @Test func takingAnOuterLockUnderAnInnerOneIsAViolationNamingBoth() throws {
        let violation = try #require(LockOrder.violation(acquiring: .historyCompaction, holding: [.storeState]))
        #expect(violation.contains("historyCompaction") && violation.contains("storeState"))
        #expect(LockOrder.violation(acquiring: .storeState, holding: [.logState]) != nil)
    }

    @Test func takingTheSameLevelTwiceIsAViolation() {
        // Two store states at once (two stores, or re-entry) could deadlock against each other.
        #expect(LockOrder.violation(acquiring: .logState, holding: [.logState]) != nil)
    }

    @Test func balancedAcquisitionsLeaveNothingHeld() {
        LockOrder.willAcquire(.historyCompaction)
        LockOrder.willAcquire(.storeState)
        LockOrder.willAcquire(.logState)
        LockOrder.didRelease(.logState)
        LockOrder.didRelease(.storeState)
        LockOrder.didRelease(.historyCompaction)
        // Nothing held: any level may be taken again.
        LockOrder.willAcquire(.historyCompaction)
        LockOrder.didRelease(.historyCompaction)
    }
}
