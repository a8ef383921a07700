import HLSDownloader
import Testing

/// The moving average behind `bytesPerSecond`, on an injected clock (no waiting).
@Suite struct TransferRateTests {
    @Test func unknownForASecondThenTheWindowsAverageThenDecaysWhenStopped() {
        let start = ContinuousClock.now
        var rate = TransferRate()
        rate.add(total: 0, at: start)
        rate.add(total: 500, at: start + .milliseconds(500))
        #expect(rate.perSecond(at: start + .milliseconds(500)) == nil, "less than a second seen")
        // 1000 bytes a second for 30 s, one sample every 100 ms: the average over the window is 1000.
        for tenth in 6...300 { rate.add(total: Int64(tenth) * 100, at: start + .milliseconds(tenth * 100)) }
        let now = start + .seconds(30)
        let steady = rate.perSecond(at: now) ?? -1
        #expect(abs(steady - 1000) < 30, "\(steady)")
        // Ten times faster for the last 5 s: the average covers the last 10 s only (about half and half).
        for tenth in 301...350 { rate.add(total: 30_000 + Int64(tenth - 300) * 1000, at: start + .milliseconds(tenth * 100)) }
        let mixed = rate.perSecond(at: start + .seconds(35)) ?? -1
        #expect(mixed > 4500 && mixed < 6500, "\(mixed)")
        // Stopped: nothing more arrives, and the speed falls over one window.
        let later = rate.perSecond(at: start + .seconds(40)) ?? -1
        #expect(later < mixed)
        let idle = rate.perSecond(at: start + .seconds(100)) ?? -1
        #expect(idle < 1000, "\(idle)")
        // A new count (a new run) starts over.
        rate.add(total: 10, at: start + .seconds(101))
        #expect(rate.perSecond(at: start + .milliseconds(101_500)) == nil)
    }
}
