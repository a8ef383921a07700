/// Runs `body` over the bytes of `bytes`, copying only when the collection has no contiguous storage.
@inline(__always)
func withContiguousBytes<Bytes: Collection, R>(
    _ bytes: Bytes,
    _ body: (UnsafeBufferPointer<UInt8>) throws -> R
) rethrows -> R where Bytes.Element == UInt8 {
    if let result = try bytes.withContiguousStorageIfAvailable(body) { return result }
    return try Array(bytes).withUnsafeBufferPointer(body)
}

/// A pointer OpenSSL accepts for input even when the buffer is empty (it may not be nil).
@inline(__always)
func inputPointer(_ buffer: UnsafeBufferPointer<UInt8>) -> UnsafePointer<UInt8> {
    buffer.baseAddress ?? emptyInput
}

nonisolated(unsafe) private let emptyInput: UnsafePointer<UInt8> = {
    let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
    pointer.initialize(to: 0)
    return UnsafePointer(pointer)
}()
