import Testing

@testable import HLSProxy

/// ``ColdSendCosts``: in `auto` the ways open to a body take turns until each is measured, then the way measured
/// cheapest is taken and another one send in ``ColdSendCosts/exploreEvery``; `memory`, `file` and `mapped` always take
/// theirs (`memory` only for a held copy) and measure nothing.
@Suite struct ColdSendCostsTests {
    static let mib = 1 << 20

    /// `count` decisions.
    static func choices(_ costs: ColdSendCosts, _ count: Int, held: Bool = true) -> [ColdSendCosts.Way] {
        (0..<count).map { _ in costs.choose(held: held) }
    }

    /// `auto` with every way measured: memory 150,000 ns per MiB, `sendfile` 100,000 (preferred), a mapping 125,000.
    static func measuredFileCheaper() -> ColdSendCosts {
        let costs = ColdSendCosts(mode: .auto)
        for _ in 0..<ColdSendCosts.samplesToStart {
            costs.record(.memory, nanoseconds: 300_000, bytes: 2 * mib)
            costs.record(.file, nanoseconds: 200_000, bytes: 2 * mib)
            costs.record(.mapped, nanoseconds: 250_000, bytes: 2 * mib)
        }
        return costs
    }

    @Test func forcedModesTakeTheirWayAndMeasureNothing() {
        let cases: [(ColdSendMode, held: ColdSendCosts.Way, notHeld: ColdSendCosts.Way)] = [
            (.memory, .memory, .file), (.file, .file, .file), (.mapped, .mapped, .mapped),
        ]
        for (mode, held, notHeld) in cases {
            let costs = ColdSendCosts(mode: mode)
            #expect(Self.choices(costs, 200).allSatisfy { $0 == held })
            #expect(Self.choices(costs, 200, held: false).allSatisfy { $0 == notHeld })
            #expect(!costs.measures && costs.preferred() == held && costs.preferred(held: false) == notHeld)
            for way in ColdSendCosts.Way.allCases { costs.record(way, nanoseconds: 1_000, bytes: Self.mib) }
            #expect(costs.snapshot.ways.allSatisfy { $0.samples == 0 })
        }
    }

    @Test func theWaysTakeTurnsUntilAllAreMeasured() {
        let costs = ColdSendCosts(mode: .auto)
        #expect(costs.measures && costs.preferred() == nil && costs.preferred(held: false) == nil)
        #expect(Self.choices(costs, 6) == [.memory, .file, .mapped, .memory, .file, .mapped])
        // A body the tier does not hold: its file's two ways.
        #expect(Set(Self.choices(costs, 6, held: false)) == [.file, .mapped])
        // Only one way measured, however often: still taking turns.
        for _ in 0..<50 { costs.record(.file, nanoseconds: 100_000, bytes: 2 * Self.mib) }
        #expect(costs.preferred() == nil && costs.preferred(held: false) == nil)
        #expect(Set(Self.choices(costs, 6)) == [.memory, .file, .mapped])
        for _ in 0..<ColdSendCosts.samplesToStart { costs.record(.mapped, nanoseconds: 60_000, bytes: 2 * Self.mib) }
        // The file's two ways are known (a mapping cheaper); a held copy's three are not.
        #expect(costs.preferred(held: false) == .mapped && costs.preferred() == nil)
        for _ in 0..<(ColdSendCosts.samplesToStart - 1) { costs.record(.memory, nanoseconds: 50_000, bytes: 2 * Self.mib) }
        #expect(costs.preferred() == nil, "one sample short")
        costs.record(.memory, nanoseconds: 50_000, bytes: 2 * Self.mib)
        #expect(costs.preferred() == .memory && costs.preferred(held: false) == .mapped)
        let known = costs.snapshot
        #expect(
            known.memory.nanosecondsPerMiB == 25_000 && known.file.nanosecondsPerMiB == 50_000 && known.mapped.nanosecondsPerMiB == 30_000)
    }

    @Test func theCheapestWayIsTakenAndTheOthersExploredOnceIn64() {
        let costs = Self.measuredFileCheaper()
        #expect(costs.preferred() == .file && costs.preferred(held: false) == .file)
        let taken = Self.choices(costs, 64 * 6)
        #expect(
            taken.filter { $0 == .memory }.count == 3 && taken.filter { $0 == .mapped }.count == 3,
            "one in 64 explores another way, in turn")
        #expect(taken.filter { $0 == .file }.count == 64 * 6 - 6)
        let notHeld = Self.choices(costs, 64 * 6, held: false)
        #expect(notHeld.filter { $0 == .mapped }.count == 6 && !notHeld.contains(.memory))
    }

    /// The averages follow the machine: a way that becomes cheaper is preferred after a few samples of it.
    @Test func aChangeOfCostsChangesTheWay() {
        let costs = Self.measuredFileCheaper()
        #expect(costs.preferred() == .file)
        var samples = 0
        while costs.preferred() == .file && samples < 100 {
            costs.record(.memory, nanoseconds: 100_000, bytes: 2 * Self.mib)
            samples += 1
        }
        #expect(costs.preferred() == .memory)
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
