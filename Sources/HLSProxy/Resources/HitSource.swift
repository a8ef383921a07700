import HLSCacheStore
import NIOCore

/// Where the bytes of a hit come from (``ResourceService``'s ordinary hit path): the memory tier's copy of the
/// object, or its file, open and pinned until the response is written.
enum HitSource {
    case memory(ByteBuffer)
    case file(NIOFileHandle, CachePin)

    /// The response body of `length` bytes from `offset` (within the object; the caller checked the range).
    func body(offset: Int64, length: Int64) -> ResponseBody {
        switch self {
        case .memory(let buffer):
            // A slice shares the buffer's storage: nothing is copied. The memory copy is of the object's size (checked
            // against the store's row), and the range is within it.
            return .bytes(buffer.getSlice(at: buffer.readerIndex + Int(offset), length: Int(length))!)
        case .file(let handle, let pin):
            return .file(handle, offset: offset, length: length, release: { pin.unpin() })
        }
    }

    /// Nothing will be sent from it: the file is closed and unpinned.
    func release() {
        guard case .file(let handle, let pin) = self else { return }
        try? handle.close()
        pin.unpin()
    }
}
