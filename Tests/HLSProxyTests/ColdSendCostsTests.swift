import Testing

@testable import HLSProxy

/// ``ColdSendCosts``: in `auto` the first sends of each way alternate, then the way measured cheaper is taken and the
/// other one send in ``ColdSendCosts/exploreEvery``; `memory` and `file` always take theirs and measure nothing.
@Suite struct ColdSendCostsTests {
    static let mib = 1 << 20

    /// `count` decisions.
    static func choices(_ costs: ColdSendCosts, _ count: Int) -> [ColdSendCosts.Way] {
        (0..<count).map { _ in costs.choose() }
    }

    /// `auto` with both ways measured: memory 150,000 ns per MiB, the file 100,000 (preferred).
    static func measuredFileCheaper() -> ColdSendCosts {
        let costs = ColdSendCosts(mode: .auto)
        for _ in 0..<ColdSendCosts.samplesToStart {
            costs.record(.memory, nanoseconds: 300_000, bytes: 2 * mib)
            costs.record(.file, nanoseconds: 200_000, bytes: 2 * mib)
        }
        return costs
    }

    @Test func forcedModesTakeTheirWayAndMeasureNothing() {
        for (mode, way) in [(ColdSendMode.memory, ColdSendCosts.Way.memory), (.file, .file)] {
            let costs = ColdSendCosts(mode: mode)
            #expect(Self.choices(costs, 200).allSatisfy { $0 == way })
            #expect(!costs.measures && costs.preferred == way)
            costs.record(.memory, nanoseconds: 1_000, bytes: Self.mib)
            costs.record(.file, nanoseconds: 1_000, bytes: Self.mib)
            #expect(costs.snapshot.memory.samples == 0 && costs.snapshot.file.samples == 0)
        }
    }

    @Test func theWaysAlternateUntilBothAreMeasured() {
        let costs = ColdSendCosts(mode: .auto)
        #expect(costs.measures && costs.preferred == nil)
        #expect(Self.choices(costs, 6) == [.memory, .file, .memory, .file, .memory, .file])
        // Only one way measured, however often: still alternating.
        for _ in 0..<50 { costs.record(.file, nanoseconds: 100_000, bytes: 2 * Self.mib) }
        #expect(costs.preferred == nil)
        #expect(Set(Self.choices(costs, 4)) == [.memory, .file])
        for _ in 0..<(ColdSendCosts.samplesToStart - 1) { costs.record(.memory, nanoseconds: 50_000, bytes: 2 * Self.mib) }
        #expect(costs.preferred == nil, "one sample short")
        costs.record(.memory, nanoseconds: 50_000, bytes: 2 * Self.mib)
        #expect(costs.preferred == .memory)
        #expect(costs.snapshot.memory.nanosecondsPerMiB == 25_000 && costs.snapshot.file.nanosecondsPerMiB == 50_000)
    }

    @Test func theCheaperWayIsTakenAndTheOtherExploredOnceIn64() {
        let costs = Self.measuredFileCheaper()
        #expect(costs.preferred == .file)
        let taken = Self.choices(costs, 64 * 5)
        #expect(taken.filter { $0 == .memory }.count == 5, "one in 64 explores the dearer way")
        #expect(taken.filter { $0 == .file }.count == 64 * 5 - 5)
    }

    /// The averages follow the machine: a way that becomes cheaper is preferred after a few samples of it.
    @Test func aChangeOfCostsChangesTheWay() {
        let costs = Self.measuredFileCheaper()
        #expect(costs.preferred == .file)
        var samples = 0
        while costs.preferred == .file && samples < 100 {
            costs.record(.memory, nanoseconds: 100_000, bytes: 2 * Self.mib)
            samples += 1
        }
        #expect(costs.preferred == .memory)
        #expect((2...10).contains(samples), "\(samples) samples to follow a change")
    }

    /// Small sends say little of a way's cost per byte: not counted.
    @Test func smallSendsAreNotCounted() {
        let costs = ColdSendCosts(mode: .auto)
        costs.record(.memory, nanoseconds: 1, bytes: ColdSendCosts.minimumSampleBytes - 1)
        costs.record(.file, nanoseconds: 1, bytes: 0)
        #expect(costs.snapshot.memory.samples == 0 && costs.snapshot.file.samples == 0)
        costs.record(.file, nanoseconds: 64_000, bytes: ColdSendCosts.minimumSampleBytes)
        #expect(costs.snapshot.file.samples == 1 && costs.snapshot.file.nanosecondsPerMiB == 1_024_000)
    }

    /// The thread's CPU clock moves with work done on the thread.
    @Test func theThreadCPUClockCountsWork() {
        let before = ColdSendCosts.threadCPUNanoseconds()
        var sum = 0
        for i in 0..<5_000_000 { sum &+= i &* i }
        #expect(sum != 1)
        #expect(ColdSendCosts.threadCPUNanoseconds() > before)
    }
}
