import Synchronization

/// Keeps an object from being evicted by this process while it is served.
///
/// Returned by ``CacheStore/pin(_:)`` and ``CacheStore/lookupAndPin(_:)``. Release it with ``unpin()`` when
/// the response is done; it also releases itself when deinitialised.
package final class CachePin: Sendable {
    /// SHA-256 hex of the pinned key.
    package let keyHash: String
    private let store: CacheStore
    private let released = Atomic<Bool>(false)

    init(store: CacheStore, keyHash: String) {
        self.store = store
        self.keyHash = keyHash
    }

    deinit {
        unpin()
    }

    /// Releases the pin; later calls do nothing.
    package func unpin() {
        guard released.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        store.unpin(keyHash: keyHash)
    }
}
