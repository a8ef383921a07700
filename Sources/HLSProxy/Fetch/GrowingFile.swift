import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// A read-only descriptor of a cache file being written (``CacheFill``): clients of a ``SharedFetch`` that are
/// behind its memory window read what has arrived from it with sendfile. It stays valid when the file is renamed
/// into the cache, and when an aborted write unlinks it, so the bytes written so far can always be read.
final class GrowingFile: Sendable {
    private let descriptor: CInt

    /// Takes ownership of `descriptor`.
    init(descriptor: CInt) {
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    /// A handle of its own for one `FileRegion` (sendfile takes explicit offsets, so a shared seek pointer does not
    /// matter); the caller closes it. Nil when the descriptor cannot be duplicated (out of descriptors).
    func handle() -> NIOFileHandle? {
        let copy = dup(descriptor)
        guard copy >= 0 else { return nil }
        return NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: copy)
    }
}
