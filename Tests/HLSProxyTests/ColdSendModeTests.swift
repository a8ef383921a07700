import Testing

@testable import HLSProxy

/// ``ColdSendMode``: `auto` sends a cold copy from memory until `cache.memoryLargeSends` other connections hold a large
/// body, from its file past that; `memory` and `file` always take theirs.
@Suite struct ColdSendModeTests {
    @Test func autoGoesByTheLoadTheOthersAlwaysTakeTheirWay() {
        #expect(ColdSendMode.auto.fromMemory(crowded: false))
        #expect(!ColdSendMode.auto.fromMemory(crowded: true))
        #expect(ColdSendMode.memory.fromMemory(crowded: false) && ColdSendMode.memory.fromMemory(crowded: true))
        #expect(!ColdSendMode.file.fromMemory(crowded: false) && !ColdSendMode.file.fromMemory(crowded: true))
    }

    /// The setting's words are the cases' names (`cache.memoryColdSends`), `auto` by default.
    @Test func theSettingNamesEachMode() {
        #expect(ColdSendMode.allCases.map(\.rawValue) == ["auto", "memory", "file"])
        #expect(ProxyConfiguration(cacheDirectory: "/tmp").memoryColdSends == .auto)
    }
}
