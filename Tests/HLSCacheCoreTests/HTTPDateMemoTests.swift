import Testing

@testable import HLSCacheCore

/// ``HTTPDate/cachedFormat(_:)`` remembers what it formatted in a ``BoundedLRU``: bounded, and the dates in use stay.
@Suite(.serialized) struct HTTPDateMemoTests {
    @Test func theMemoIsBoundedAndAlwaysRight() {
        let base: Int64 = 1_900_000_000
        for offset in 0..<Int64(HTTPDate.maxRemembered + 1000) {
            #expect(HTTPDate.cachedFormat(base + offset) == HTTPDate.format(base + offset))
        }
        #expect(HTTPDate.rememberedCount == HTTPDate.maxRemembered)
    }

    @Test func aDateInUseStaysWhenOthersOverflowTheMemo() {
        let used: Int64 = 1_800_000_000
        _ = HTTPDate.cachedFormat(used)
        for offset in 1...Int64(2 * HTTPDate.maxRemembered) {
            _ = HTTPDate.cachedFormat(used + 10_000_000 + offset)
            if offset % 100 == 0 { #expect(HTTPDate.cachedFormat(used) == "Fri, 15 Jan 2027 08:00:00 GMT") }
        }
        #expect(HTTPDate.isRemembered(used))
    }
}
