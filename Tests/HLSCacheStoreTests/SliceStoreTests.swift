import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import Testing

/// Slices in the store (docs/store.md, "Slices"): each slice an object of its own, a set per object and slice size,
/// one version at a time, and the pure parts (layout, a slice answer's Content-Range and validator).
@Suite struct SliceStoreTests {
    static func storeSlice(
        _ data: [UInt8], index: Int64, of object: CacheKey, objectSize: Int64, validator: String, layout: SliceLayout, in cache: CacheStore
    ) throws {
        let writer = try cache.makeWriter(for: layout.key(of: object, slice: index), expectedLength: Int64(data.count))
        try writer.write(data)
        _ = try writer.finish(
            contentType: "video/mp4", kind: .segment, etag: validator,
            slice: ObjectSlice(set: layout.setID(of: object), index: index, objectSize: objectSize))
    }

    @Test func aSliceSetIsOneVersionAndANewVersionReplacesTheOld() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        let layout = SliceLayout(sliceSize: 1000)
        let movie = key("movie.mp4")
        #expect(cache.sliceSet(of: movie, layout: layout) == nil)
        try Self.storeSlice(bytes(1000), index: 0, of: movie, objectSize: 9500, validator: "\"v1\"", layout: layout, in: cache)
        try Self.storeSlice(bytes(500, seed: 9), index: 9, of: movie, objectSize: 9500, validator: "\"v1\"", layout: layout, in: cache)
        let set = try #require(cache.sliceSet(of: movie, layout: layout))
        #expect(set.validator == "\"v1\"" && set.objectSize == 9500 && set.present == [0, 9] && set.contentType == "video/mp4")
        let slice = try #require(cache.lookup(layout.key(of: movie, slice: 9)))
        #expect(slice.slice == ObjectSlice(set: layout.setID(of: movie), index: 9, objectSize: 9500))
        #expect(set.contains(slice))
        #expect(contents(slice.path) == bytes(500, seed: 9))
        // Another slice size is another set: never mixed with these.
        #expect(cache.sliceSet(of: movie, layout: SliceLayout(sliceSize: 2000)) == nil)

        // A slice of another version: the old version's slices go in the same commit (rows and files).
        try Self.storeSlice(bytes(1000, seed: 3), index: 4, of: movie, objectSize: 9500, validator: "\"v2\"", layout: layout, in: cache)
        let replaced = try #require(cache.sliceSet(of: movie, layout: layout))
        #expect(replaced.validator == "\"v2\"" && replaced.present == [4])
        #expect(cache.lookup(layout.key(of: movie, slice: 0)) == nil)
        #expect(dir.objectFiles().count == 1)
        #expect(try cache.usage().count == 1)

        #expect(try cache.removeSlices(of: movie, layout: layout) == 1)
        #expect(cache.sliceSet(of: movie, layout: layout) == nil)
        #expect(dir.objectFiles().isEmpty)
        #expect(try cache.usage().bytes == 0)
    }

    @Test func slicesSurviveAReopenAndAreEvictedOneByOne() throws {
        let dir = try TemporaryDirectory()
        let layout = SliceLayout(sliceSize: 1000)
        let movie = key("big.mp4")
        do {
            let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 30, freeDiskCushion: 0)
            for index: Int64 in 0..<3 {
                try Self.storeSlice(
                    bytes(1000, seed: UInt8(index)), index: index, of: movie, objectSize: 20_000, validator: "\"x\"", layout: layout,
                    in: cache)
            }
            cache.close()
        }
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        #expect(cache.sliceSet(of: movie, layout: layout)?.present == [0, 1, 2])
        _ = cache.lookup(layout.key(of: movie, slice: 1))
        _ = cache.lookup(layout.key(of: movie, slice: 2))
        #expect(try cache.evict(bytes: 1) == 1000)
        #expect(cache.sliceSet(of: movie, layout: layout)?.present.count == 2)
    }

    @Test func theLayoutCutsObjectsAndNamesSlices() {
        let layout = SliceLayout(sliceSize: 1 << 20)
        #expect(layout.threshold == 8 << 20)
        #expect(!layout.isSliced(total: 8 << 20) && layout.isSliced(total: (8 << 20) + 1))
        #expect(layout.index(of: 0) == 0 && layout.index(of: (1 << 20) - 1) == 0 && layout.index(of: 1 << 20) == 1)
        #expect(layout.bytes(of: 2, total: (2 << 20) + 10) == (first: 2 << 20, last: (2 << 20) + 9))
        #expect(layout.count(total: (2 << 20) + 10) == 3)
        let object = key("a.mp4")
        #expect(layout.key(of: object, slice: 3) != layout.key(of: object, slice: 4))
        #expect(layout.key(of: object, slice: 3) != SliceLayout(sliceSize: 1 << 21).key(of: object, slice: 3))
        #expect(layout.key(of: object, slice: 3).value.hasPrefix(object.value + " "))
    }

    @Test func aSliceAnswerNamesItsBytesAndItsVersion() {
        let tagged = SliceResponse(contentRange: "bytes 1048576-2097151/400000000", strongETag: "\"abc\"", lastModified: nil)
        #expect(tagged == SliceResponse(contentRange: "bytes 1048576-2097151/400000000", strongETag: "\"abc\"", lastModified: "x"))
        #expect(tagged?.first == 1_048_576 && tagged?.last == 2_097_151 && tagged?.total == 400_000_000 && tagged?.validator == "\"abc\"")
        let dated = SliceResponse(contentRange: "bytes 0-9/100", strongETag: nil, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(dated?.validator.hasPrefix("\"lm-") == true)
        #expect(
            dated?.validator
                != SliceResponse(contentRange: "bytes 0-9/101", strongETag: nil, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")?.validator)
        #expect(SliceResponse(contentRange: "bytes 0-9/100", strongETag: nil, lastModified: nil) == nil, "no validator")
        #expect(SliceResponse(contentRange: "bytes 0-9/*", strongETag: "\"a\"", lastModified: nil) == nil, "unknown size")
        #expect(SliceResponse(contentRange: "bytes 9-0/100", strongETag: "\"a\"", lastModified: nil) == nil)
        #expect(SliceResponse(contentRange: "bytes 0-100/100", strongETag: "\"a\"", lastModified: nil) == nil)
        #expect(SliceResponse(contentRange: nil, strongETag: "\"a\"", lastModified: nil) == nil)
    }
}
