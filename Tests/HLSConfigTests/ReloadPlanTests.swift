import HLSCacheCore
import HLSConfig
import Testing

/// What a reload applies and what waits for a restart (``ReloadPlan``).
@Suite struct ReloadPlanTests {
    @Test func liveSettingsAreAppliedOthersNeedARestart() throws {
        let running = HLSCacheSettings()
        var loaded = running
        loaded.logLevel = "debug"
        loaded.downloadRateLimit = 2 << 20
        loaded.keysAllow = ["10.0.0.0/8"]
        loaded.listen = try #require(ListenAddress("127.0.0.1:9000"))
        loaded.origins["cdn.example.com"] = .init(headers: [.init(name: "X-Token", value: "a")])
        let plan = ReloadPlan.between(running: running, loaded: loaded)
        #expect(plan.applied == ["log.level", "keys.allow", "downloads.rateLimit", "origins"])
        #expect(plan.needsRestart == ["listen"])
        // What runs afterwards: the applied ones changed, the listen address not.
        let after = plan.settings(running: running, loaded: loaded)
        #expect(after.logLevel == "debug" && after.downloadRateLimit == 2 << 20 && after.keysAllow == ["10.0.0.0/8"])
        #expect(after.origins == loaded.origins)
        #expect(after.listen == running.listen)
        // Reloading the same file again: the listen address still waits, nothing else to apply.
        let again = ReloadPlan.between(running: after, loaded: loaded)
        #expect(again.applied.isEmpty && again.needsRestart == ["listen"])
        // The file put back: nothing waits.
        #expect(ReloadPlan.between(running: after, loaded: running).needsRestart.isEmpty)
    }

    @Test func traceIsNotAppliedLive() {
        var loaded = HLSCacheSettings()
        loaded.logLevel = "trace"
        let plan = ReloadPlan.between(running: HLSCacheSettings(), loaded: loaded)
        #expect(plan.applied.isEmpty && plan.needsRestart == ["log.level"])
    }
}
