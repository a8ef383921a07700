import NIOCore

/// What the clients of a ``SharedFetch`` behind its memory window read the body from: the one growing cache file
/// (``GrowingFile``), or the slice files of an object stored as slices (``SlicedFile``).
protocol FetchFile: Sendable {
    /// Sends `length` body bytes from `offset` (all of them already written) to `responder`, with sendfile; the future
    /// completes when they were handed to the kernel, and fails when they cannot be read (the client is then cut off).
    func send(offset: Int64, length: Int64, to responder: Responder) -> EventLoopFuture<Void>
}

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

extension GrowingFile: FetchFile {
    func send(offset: Int64, length: Int64, to responder: Responder) -> EventLoopFuture<Void> {
        responder.writeFile(self, offset: offset, length: length)
    }
}
