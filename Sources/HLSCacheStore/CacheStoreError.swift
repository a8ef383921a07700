/// An error from the on-disk cache.
///
/// Equality compares the kind only (`error == .cacheFull`); ``detail`` says why. The names match the item
/// error codes of docs/design.md §5 where they overlap (`cacheFull`, `corrupted`).
package struct CacheStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Hashable, Sendable {
        case cacheFull
        case io
        case corrupted
        case lengthMismatch
        case writerClosed
        case database
    }

    private var code: Code
    /// A human-readable explanation.
    package private(set) var detail: String

    private init(code: Code, detail: String = "") {
        self.code = code
        self.detail = detail
    }

    /// The stable machine-readable name of the error kind, e.g. `cacheFull`.
    package var name: String { code.rawValue }

    /// The object does not fit under the size cap or the free-disk cushion even after eviction, or the disk
    /// filled up (`ENOSPC`) while writing. Nothing was left behind.
    package static let cacheFull = CacheStoreError(code: .cacheFull)
    /// A file-system call failed (the detail names the call and `errno`).
    package static let io = CacheStoreError(code: .io)
    /// The cache directory or index is unusable (not a directory, unreadable index).
    package static let corrupted = CacheStoreError(code: .corrupted)
    /// A writer was finished with a byte count different from the length it announced.
    package static let lengthMismatch = CacheStoreError(code: .lengthMismatch)
    /// A writer was used after `finish` or `abort` (including an abort from another thread).
    package static let writerClosed = CacheStoreError(code: .writerClosed)
    /// SQLite reported an error (busy for too long, disk I/O error).
    package static let database = CacheStoreError(code: .database)

    func with(_ detail: String) -> CacheStoreError {
        var copy = self
        copy.detail = detail
        return copy
    }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(code) }
    package var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }
}
