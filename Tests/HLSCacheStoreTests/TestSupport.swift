import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport

/// A fresh directory under the system temp dir, removed when the value is dropped.
final class TemporaryDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func files(in folder: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: path + "/" + folder)) ?? []
    }

    /// Every object file, as `ab/cdef…`.
    func objectFiles() -> [String] {
        files(in: "objects").flatMap { prefix in files(in: "objects/" + prefix).map { prefix + "/" + $0 } }
    }
}

func key(_ name: String) -> CacheKey {
    CacheKey(try! OriginURL("https://cdn.example.com/vod/\(name)"))
}

func bytes(_ count: Int, seed: UInt8 = 1) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
}

/// Writes and commits one object.
@discardableResult
func store(
    _ data: [UInt8], as key: CacheKey, in store: CacheStore, kind: CacheObjectKind = .segment,
    expiresAt: Date? = nil, locked: Bool = false
) throws -> CachedObject {
    let writer = try store.makeWriter(for: key, expectedLength: Int64(data.count))
    try writer.write(data)
    return try writer.finish(contentType: "video/mp2t", kind: kind, expiresAt: expiresAt, locked: locked)
}

func contents(_ path: String) -> [UInt8]? {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) }
}

/// `[bytes, count]`, easier to compare in `#expect` than a tuple.
func usage(_ store: CacheStore) throws -> [Int64] {
    let (bytes, count) = try store.usage()
    return [bytes, Int64(count)]
}
