import HLSCacheCore
import HLSCacheStore
import NIOConcurrencyHelpers
import NIOCore

/// The body of a download stored as slices (``CacheFill`` with ``CacheFill/Slicing``), as its clients behind the
/// memory window read it: a slice being written through a descriptor of its temp file (``GrowingFile``, valid after
/// the rename and after an abort), a committed slice from the store, pinned while it is sent and checked to be of this
/// version. So a late joiner holds no more descriptors than the slices being written, whatever the object's size.
final class SlicedFile: FetchFile {
    private let store: CacheStore
    private let layout: SliceLayout
    private let key: CacheKey
    private let validator: String
    private let objectSize: Int64
    /// The slices whose files are read through a descriptor: the one being written, and any whose commit failed.
    private let writing = NIOLockedValueBox<[Int64: GrowingFile]>([:])

    init(store: CacheStore, layout: SliceLayout, key: CacheKey, validator: String, objectSize: Int64) {
        self.store = store
        self.layout = layout
        self.key = key
        self.validator = validator
        self.objectSize = objectSize
    }

    /// Slice `index` is being written; `file` reads it.
    func began(_ index: Int64, _ file: GrowingFile) {
        writing.withLockedValue { $0[index] = file }
    }

    /// Slice `index` is committed (its row is in the index): read from the store from now on.
    func committed(_ index: Int64) {
        writing.withLockedValue { $0[index] = nil }
    }

    func send(offset: Int64, length: Int64, to responder: Responder) -> EventLoopFuture<Void> {
        var sent = responder.eventLoop.makeSucceededVoidFuture()
        var position = offset
        let end = offset + length
        while position < end {
            let index = layout.index(of: position)
            let slice = layout.bytes(of: index, total: objectSize)
            let count = min(end, slice.last + 1) - position
            var pin: CachePin?
            let file: GrowingFile
            if let open = writing.withLockedValue({ $0[index] }) {
                file = open
            } else if let open = openStored(index) {
                (file, pin) = (open.file, open.pin)
            } else {
                // Evicted (or replaced by another version) since it was written: the client is cut off, never sent a hole.
                return responder.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
            }
            sent = responder.writeFile(file, offset: position - slice.first, length: count)
            let held = pin
            sent.whenComplete { _ in held?.unpin() }
            position += count
        }
        return sent
    }

    /// Committed slice `index` of this version, opened and pinned; nil when the store no longer has it.
    private func openStored(_ index: Int64) -> (file: GrowingFile, pin: CachePin)? {
        guard let (object, pin) = store.lookupAndPin(layout.key(of: key, slice: index)) else { return nil }
        guard object.etag == validator, object.slice?.objectSize == objectSize, let file = SliceStitcher.open(object) else {
            pin.unpin()
            return nil
        }
        return (file, pin)
    }
}
