import Foundation
import HLSCacheCore
import HLSCrypto

/// How large objects are cut into slices (`cache.sliceSize`): fixed-size pieces stored as objects of their own,
/// keyed by (object, slice index), so a Range request fetches and stores only the slices it covers and eviction
/// works per slice. Shared by the proxy and the downloader, which must cut the same way.
package struct SliceLayout: Sendable, Hashable {
    /// Bytes per slice (the last slice of an object may be shorter).
    package let sliceSize: Int64

    /// The default slice size: 1 MiB, as nginx's `slice 1m` most deployments use.
    package static let defaultSliceSize: Int64 = 1 << 20
    /// Objects of more than this many slices are sliced; smaller ones are stored whole.
    package static let slicesBeforeSlicing: Int64 = 8

    package init(sliceSize: Int64 = SliceLayout.defaultSliceSize) {
        precondition(sliceSize > 0, "slice size must be positive")
        self.sliceSize = sliceSize
    }

    /// Objects larger than this are stored as slices: 8 slices (8 MiB by default).
    package var threshold: Int64 { sliceSize * Self.slicesBeforeSlicing }

    /// Whether an object of `total` bytes is stored as slices.
    package func isSliced(total: Int64) -> Bool { total > threshold }

    /// The index of the slice holding byte `offset`.
    package func index(of offset: Int64) -> Int64 { offset / sliceSize }

    /// The first and last byte (inclusive) of slice `index` of an object of `total` bytes.
    package func bytes(of index: Int64, total: Int64) -> (first: Int64, last: Int64) {
        let first = index * sliceSize
        return (first, min(first + sliceSize, total) - 1)
    }

    /// The number of slices of an object of `total` bytes.
    package func count(total: Int64) -> Int64 { (total + sliceSize - 1) / sliceSize }

    /// What the slices of the object stored under `key` share in the index (`objects.slice_of`): the key's hash
    /// and the slice size, so slices cut with another `cache.sliceSize` never mix with these.
    package func setID(of key: CacheKey) -> String {
        "\(SHA256.hex(key.value))/\(sliceSize)"
    }

    /// The cache key of slice `index` of the object stored under `key`. A space never occurs in a key made from a
    /// URL, so no URL's key can collide with a slice's.
    package func key(of key: CacheKey, slice index: Int64) -> CacheKey {
        CacheKey(storedValue: "\(key.value) slice \(index)/\(sliceSize)")
    }
}

/// Where a stored object sits in a sliced object (``CachedObject/slice``).
package struct ObjectSlice: Sendable, Hashable {
    /// ``SliceLayout/setID(of:)`` of the whole object.
    package var set: String
    /// The slice's index (its first byte is `index × sliceSize`).
    package var index: Int64
    /// The size of the whole object, as the origin's `Content-Range` gave it.
    package var objectSize: Int64

    package init(set: String, index: Int64, objectSize: Int64) {
        self.set = set
        self.index = index
        self.objectSize = objectSize
    }
}

/// The stored slices of one object (``CacheStore/sliceSet(of:layout:)``): one version, named by its validator.
package struct SliceSet: Sendable, Hashable {
    /// The validator every slice of this version was stored with, served as the object's `ETag`.
    package var validator: String
    /// The whole object's size.
    package var objectSize: Int64
    package var contentType: String?
    package var lastModified: Date?
    /// The indices of the slices stored now.
    package var present: Set<Int64>

    package init(validator: String, objectSize: Int64, contentType: String?, lastModified: Date?, present: Set<Int64>) {
        self.validator = validator
        self.objectSize = objectSize
        self.contentType = contentType
        self.lastModified = lastModified
        self.present = present
    }

    /// Whether `object` (a slice looked up by key) belongs to this version.
    package func contains(_ object: CachedObject) -> Bool {
        object.etag == validator && object.slice?.objectSize == objectSize
    }
}
