import HLSCacheCore
import HLSTestSupport
import Testing

@testable import HLSCacheStore

/// The store remembers the SHA-256 names of recently looked-up keys in a ``BoundedLRU``: bounded, always the right
/// name, and the keys a playing stream keeps asking for stay when others overflow the table.
@Suite struct KeyHashMemoTests {
    static func key(_ index: Int) throws -> CacheKey {
        CacheKey(try OriginURL("https://cdn.example.com/v/seg\(index).ts"))
    }

    @Test func theMemoIsBoundedAndAlwaysRight() throws {
        let dir = try TemporaryDirectory()
        let store = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        for index in 0..<(CacheStore.maxRememberedKeyHashes + 1000) {
            let key = try Self.key(index)
            #expect(store.cachedKeyHash(key) == CacheStore.keyHash(key))
        }
        #expect(store.rememberedKeyHashes == CacheStore.maxRememberedKeyHashes)
        // The oldest went first.
        #expect(!store.remembersKeyHash(of: try Self.key(0)))
        #expect(store.remembersKeyHash(of: try Self.key(CacheStore.maxRememberedKeyHashes + 999)))
    }

    @Test func aKeyInUseStaysWhenOthersOverflowTheMemo() throws {
        let dir = try TemporaryDirectory()
        let store = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let playing = CacheKey(try OriginURL("https://cdn.example.com/live/now.ts"))
        _ = store.cachedKeyHash(playing)
        for index in 0..<(2 * CacheStore.maxRememberedKeyHashes) {
            _ = store.cachedKeyHash(try Self.key(index))
            if index % 1000 == 0 { #expect(store.cachedKeyHash(playing) == CacheStore.keyHash(playing)) }
        }
        #expect(store.remembersKeyHash(of: playing), "a table that wipes itself when full forgets it")
    }
}
