import HLSCacheCore
import HLSCacheStore

/// One origin resource an item stores: a playlist, a segment file (whole, even when the playlist addresses
/// byte ranges of it), an init section or a key.
package struct PlannedResource: Sendable, Hashable {
    /// The absolute origin URL.
    package var url: OriginURL
    /// The cache key it is stored under.
    package var key: CacheKey
    /// The object kind given to the store.
    package var kind: CacheObjectKind
    /// Bytes the playlist already tells (sum of byte ranges), if any.
    package var knownLength: Int64?
    /// For a key: its `METHOD` as the playlist writes it (`AES-128`, `SAMPLE-AES`, `AES-256`, …), which says the
    /// key's length (``KeyService/keySize(method:)``).
    package var keyMethod: String?
    /// For an AES-128 segment file: each encrypted segment in it (the whole file, or each `EXT-X-BYTERANGE` of
    /// it) with its key's URL and IV, so the download can be checked by decrypting the last block of each (a
    /// wrong key, IV or a damaged body is `corrupted` at download time, not at playback).
    package var encryptions: [Encryption] = []
    /// For a slice of a large file addressed by byte ranges: which one (its key is the slice's,
    /// ``SliceLayout/key(of:slice:)``; `url` is the file's).
    package var slice: Slice?
    /// The item's poster: optional — when it cannot be stored the item goes on without it (``DownloadItem/posterError``).
    package var isPoster = false

    /// A slice of a large file: fetched with a `Range` request for its bytes and stored as the proxy stores slices.
    package struct Slice: Sendable, Hashable {
        /// The whole file's cache key.
        package var objectKey: CacheKey
        package var index: Int64
        package var layout: SliceLayout

        package init(objectKey: CacheKey, index: Int64, layout: SliceLayout) {
            self.objectKey = objectKey
            self.index = index
            self.layout = layout
        }
    }

    /// One AES-128 segment: the whole file (`range` nil) or a byte range of it, each with its own PKCS#7 padding.
    package struct Encryption: Sendable, Hashable {
        package var keyURL: OriginURL
        package var iv: [UInt8]
        /// Offset and length of the segment in the file; `nil` for the whole file.
        package var range: (offset: Int64, length: Int64)? {
            get { rangeOffset.map { ($0, rangeLength ?? 0) } }
            set {
                rangeOffset = newValue?.offset
                rangeLength = newValue?.length
            }
        }
        private var rangeOffset: Int64?
        private var rangeLength: Int64?

        package init(keyURL: OriginURL, iv: [UInt8], range: (offset: Int64, length: Int64)? = nil) {
            self.keyURL = keyURL
            self.iv = iv
            self.range = range
        }
    }

    /// A resource.
    package init(url: OriginURL, key: CacheKey, kind: CacheObjectKind, knownLength: Int64? = nil) {
        self.url = url
        self.key = key
        self.kind = kind
        self.knownLength = knownLength
    }
}
